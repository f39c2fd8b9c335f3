"""Operating a crawl: the figures of its progress, kept in Redis for every worker and the report."""
