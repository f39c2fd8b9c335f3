"""Waiting out a Redis outage: retry an operation with backoff instead of losing its result.

Every component that keeps state in Redis (the robots.txt cache, the dedup
index, the URL metadata store, the recrawl schedule) calls Redis through
:meth:`OutagePolicy.call`. A connection error (refused, reset, closed, a
server still loading its AOF) is retried with exponential backoff, from
``REDIS_RETRY_DELAY`` doubling up to ``REDIS_RETRY_MAX_DELAY``, for at most
``REDIS_OUTAGE_TIMEOUT`` seconds; only then does the error reach the caller.
The page waits meanwhile (its lease is renewed by the frontier, which waits
the same way), so a restarted Redis costs time, not data. Errors that are not
about the connection (a script error, a wrong type) are raised at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from crawler.settings_parsing import get_float

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What a Redis outage looks like from the client (BusyLoadingError is a ConnectionError).
REDIS_DOWN: tuple[type[BaseException], ...] = (RedisConnectionError, RedisTimeoutError, OSError)


@dataclass(frozen=True)
class OutagePolicy:
    timeout: float = 300.0
    base_delay: float = 0.5
    max_delay: float = 10.0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> OutagePolicy:
        base = get_float(settings, "REDIS_RETRY_DELAY", minimum=0.01)
        return cls(
            timeout=get_float(settings, "REDIS_OUTAGE_TIMEOUT", minimum=0.0),
            base_delay=base,
            max_delay=get_float(settings, "REDIS_RETRY_MAX_DELAY", minimum=base),
        )

    async def call(
        self, what: str, operation: Callable[[], Awaitable[T]], stats: Any = None
    ) -> T:
        """``await operation()``, retried through a Redis outage of up to ``timeout`` seconds."""
        deadline = time.monotonic() + self.timeout
        delay = self.base_delay
        while True:
            try:
                return await operation()
            except REDIS_DOWN as exc:
                if time.monotonic() + delay > deadline:
                    raise
                if stats is not None:
                    stats.inc_value("redis/retries")
                logger.warning("%s: Redis unreachable (%s); retrying in %.1f s", what, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.max_delay)
