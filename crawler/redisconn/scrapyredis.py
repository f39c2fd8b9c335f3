"""A scrapy-redis ``RedisSpider`` on the crawl's embedded Redis.

scrapy-redis builds a RedisSpider's client when the spider is made, from
``REDIS_URL``, ``REDIS_HOST`` / ``REDIS_PORT`` and ``REDIS_PARAMS``; with none of
them it is a client of ``localhost:6379``. The frontier reads the same settings
(:mod:`crawler.redisconn.config`), and with none of them it starts its own
embedded server. So that the spider's start URLs and the frontier are on one
server, not two, the embedded server, once started, is given to such a
spider: its client's connections go to the embedded server's socket (its
other options, scrapy-redis's ``REDIS_PARAMS`` among them, kept). A spider
whose project names a Redis keeps its own.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

logger = logging.getLogger(__name__)

#: Options of the spider's client that still apply on the embedded server's socket (it has no password).
_KEPT = ("db", "socket_timeout", "socket_connect_timeout", "encoding", "encoding_errors", "decode_responses",
         "retry_on_timeout", "client_name", "health_check_interval", "socket_read_size")


def redis_spider_client(spider: Any) -> redis.Redis | None:
    """The client of ``spider`` if it is a scrapy-redis RedisSpider (or RedisCrawlSpider), else None."""
    try:
        from scrapy_redis.spiders import RedisMixin
    except ImportError:  # scrapy-redis is not installed: no RedisSpider
        return None
    server = getattr(spider, "server", None)
    return server if isinstance(spider, RedisMixin) and isinstance(server, redis.Redis) else None


def share_embedded(spider: Any, socket_path: str) -> bool:
    """Point a RedisSpider's client at the embedded server's socket; whether there was one."""
    server = redis_spider_client(spider)
    if server is None:
        return False
    kwargs = server.connection_pool.connection_kwargs
    options = {key: kwargs[key] for key in _KEPT if key in kwargs}
    old = server.connection_pool
    server.connection_pool = redis.ConnectionPool(connection_class=redis.UnixDomainSocketConnection,
                                                  path=socket_path, **options)
    old.disconnect()
    logger.info("RedisSpider %r reads its start URLs (key %r) from the crawl's embedded Redis, where the frontier "
                "is: unix://%s (push URLs there: redis-cli -s %s lpush %s URL)", getattr(spider, "name", "?"),
                getattr(spider, "redis_key", None), socket_path, socket_path, getattr(spider, "redis_key", "KEY"))
    return True
