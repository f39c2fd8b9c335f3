"""The Redis Mercator frontier: keys, scripts, the store and the Scrapy scheduler."""
