"""The Redis server every shared component uses: configured, or embedded."""

from crawler.redisconn.config import RedisConfig
from crawler.redisconn.embedded import EmbeddedRedisServer
from crawler.redisconn.provider import RedisProvider

__all__ = ["EmbeddedRedisServer", "RedisConfig", "RedisProvider"]
