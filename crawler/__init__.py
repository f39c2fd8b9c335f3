"""A polite, distributed, Mercator-style web crawler on Scrapy."""

__version__ = "0.1.0"
