"""Crawl policies as pure functions: recrawl intervals, priority, the crawl clock."""
