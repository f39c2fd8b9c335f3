"""What the item pipelines whose state is in the crawl's Redis share (the duplicate index, the URL
metadata): the store opened when the spider opens, waiting a Redis outage out (``REDIS_OUTAGE_TIMEOUT``),
closed when it closes; a page's URL as the frontier keys it; each call to the store under the same
outage policy. A page the store cannot take is passed on, counted and logged by the stage itself:
storage never depends on these stages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from crawler.urls import NormalizationConfig, UrlError, normalize_page_url
from crawler.urls.normalize import DEFAULT_CONFIG as DEFAULT_NORMALIZATION

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
    from crawler.items import PageItem
    from crawler.redisconn.link import AnyRedis
    from crawler.redisconn.provider import RedisProvider


class Store(Protocol):
    async def close(self) -> None: ...


S = TypeVar("S", bound=Store)
T = TypeVar("T")


class RedisStage(Generic[S]):
    """An item pipeline over a store (``S``) in the crawl's Redis; a subclass opens it (:meth:`open_store`)."""

    #: The store's name in the outage's log lines ("URL metadata store").
    store_name: ClassVar[str]

    def __init__(self, provider: RedisProvider, router: ShardRouter, stats: Any,
                 normalization: NormalizationConfig = DEFAULT_NORMALIZATION) -> None:
        self.provider = provider
        self.router = router
        self.stats = stats
        #: The crawl's URL normalization (the frontier's keys are built with it).
        self.normalization = normalization
        self.store: S | None = None

    async def open_spider(self) -> None:
        client = await self.provider.client()
        self.store = await self.provider.outage.call(f"{self.store_name} open", lambda: self.open_store(client),
                                                     self.stats)

    async def open_store(self, client: AnyRedis) -> S:
        raise NotImplementedError

    async def close_spider(self) -> None:
        if self.store is not None:
            await self.store.close()

    def page_url(self, item: PageItem) -> tuple[str, str] | None:
        """The page's URL and host as the frontier keys them; None for a URL it cannot normalize."""
        try:
            return normalize_page_url(item.url, self.normalization)
        except UrlError:
            return None

    async def call(self, request: Callable[[], Awaitable[T]]) -> T:
        """One call to the store, an outage waited out (RedisError or OSError past it)."""
        return await self.provider.outage.call(self.store_name, request, self.stats)
