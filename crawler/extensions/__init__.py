"""Scrapy extensions of the project."""
