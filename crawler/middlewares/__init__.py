"""Downloader and spider middlewares of the crawler."""
