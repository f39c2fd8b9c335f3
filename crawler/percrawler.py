"""One object per running crawler: the registry behind every ``X.for_crawler(crawler)``.

Components of one crawl that Scrapy builds separately (middlewares, pipelines,
extensions, the scheduler) share some objects: the Redis connection, the shard
router, the archive's stages, the host quality cache. Each is made on first
use and kept as long as its crawler lives (a weak reference: a finished
crawler takes its objects with it, and two crawlers in one process never share
one).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Generic, TypeVar
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

T = TypeVar("T")


class PerCrawler(Generic[T]):
    """``registry(crawler)``: the crawler's object, made by ``make(crawler)`` the first time."""

    __slots__ = ("_make", "_objects")

    def __init__(self, make: Callable[[Crawler], T]) -> None:
        self._make = make
        self._objects: WeakKeyDictionary[Crawler, T] = WeakKeyDictionary()

    def __call__(self, crawler: Crawler) -> T:
        found = self._objects.get(crawler)
        if found is None:
            found = self._objects[crawler] = self._make(crawler)
        return found
