"""Records every fetched URL in the URL metadata store (``METADATA_*``).

State (fetched for 2xx/3xx, failed otherwise), fetch time (crawl clock),
status, payload digest, SimHash, ETag, Last-Modified, length, outlink count;
the store keeps the change history and gives back whether the content changed
(on the item: ``changed``, ``observations``, ``changes``, ``first_fetch``,
``previous_fetch``) and the URL's in-link estimate (``inlinks``), which the
recrawl pipeline reads; and the host's quality counters, kept in the
worker's :class:`~crawler.policy.hostquality.HostQualityCache` for the
priority policy. With the recrawl pipeline on, the same call plans the
URL's next visit and puts it in the recrawl schedule (``next_visit``; the
record is written once). If Redis cannot answer, the page goes on (counted in
``metadata/unavailable``, and ``recrawl/unavailable`` for a page to revisit).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from redis.exceptions import RedisError
from scrapy.exceptions import NotConfigured
from scrapy.settings import BaseSettings

from crawler.archiving import Archive
from crawler.crawlstate.compact import bucket_sizes
from crawler.crawlstate.shards import ShardRouter
from crawler.frontier import SeenConfig, crawl_sizes
from crawler.httpheaders import header_value, http_date_epoch
from crawler.items import PageItem
from crawler.metadata.record import KIND_OTHER, KIND_PARSE, KIND_SITEMAP
from crawler.metadata.recordstore import PAGE_ERROR, PAGE_NEAR_DUPLICATE, UrlMetadataStore, UrlRecord, UrlState, digest4
from crawler.pipelines.recrawl import RecrawlPipeline
from crawler.pipelines.redisstage import RedisStage
from crawler.policy.clock import CrawlClock
from crawler.policy.hostquality import HostQualityCache
from crawler.policy.priority import HostQuality
from crawler.redisconn.provider import RedisProvider
from crawler.settings_parsing import get_bool, get_float, get_int, is_set
from crawler.urls import NormalizationConfig, page_fingerprint
from crawler.urls.fingerprint import bloom_offsets
from crawler.urls.normalize import DEFAULT_CONFIG as DEFAULT_NORMALIZATION

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)

#: What a record says of its URL's callback (a revisit is built with it).
_KINDS = {"parse": KIND_PARSE, "parse_sitemap": KIND_SITEMAP}


def repeat_window_setting(settings: Any) -> int:
    """``METADATA_REPEAT_WINDOW`` (s): default half of ``RECRAWL_MIN_INTERVAL``, at most 10 minutes.

    Shorter than any planned revisit, longer than a lease expiry and requeue.
    """
    if not is_set(settings, "METADATA_REPEAT_WINDOW"):
        return int(min(600.0, get_float(settings, "RECRAWL_MIN_INTERVAL", minimum=0.0) / 2))
    return get_int(settings, "METADATA_REPEAT_WINDOW", minimum=0)


class UrlMetadataPipeline(RedisStage[UrlMetadataStore]):
    store_name = "URL metadata store"

    def __init__(
        self,
        provider: RedisProvider,
        router: ShardRouter,
        change_distance: int,
        stats: Any,
        *,
        clock: CrawlClock | None = None,
        host_quality: HostQualityCache | None = None,
        repeat_window: int = 0,
        normalization: NormalizationConfig = DEFAULT_NORMALIZATION,
        settings: BaseSettings | None = None,
    ) -> None:
        super().__init__(provider, router, stats, normalization)
        self.change_distance = change_distance
        self.clock = clock or CrawlClock()
        #: The crawl's seen set and in-link sketch sizes (its metadata), known once the store opens.
        self.seen: SeenConfig | None = None
        self.inlink_cells = 0
        #: The settings the crawl's sizes are computed from, when no worker recorded them yet.
        self.settings = settings
        self.host_quality = host_quality or HostQualityCache()
        self.repeat_window = repeat_window
        #: The crawl's archive stages, where the recrawl pipeline is found when the spider opens.
        self.archive: Archive | None = None
        #: The recrawl pipeline, whose revisits are planned with each record (None: no recrawl).
        self.recrawl: RecrawlPipeline | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "METADATA_ENABLED"):
            raise NotConfigured
        provider = RedisProvider.for_crawler(crawler)
        pipeline = cls(
            provider,
            provider.router,
            get_int(settings, "METADATA_CHANGE_DISTANCE", minimum=0),
            crawler.stats,
            clock=CrawlClock.from_settings(settings),
            host_quality=HostQualityCache.for_crawler(crawler),
            repeat_window=repeat_window_setting(settings),
            normalization=NormalizationConfig.from_settings(settings),
            settings=settings,
        )
        pipeline.archive = Archive.for_crawler(crawler)
        pipeline.archive.join(pipeline)
        return pipeline

    async def open_spider(self) -> None:
        if self.archive is not None:
            self.recrawl = next((s for s in self.archive.stages if isinstance(s, RecrawlPipeline)), None)
        await super().open_spider()

    async def open_store(self, client: AnyRedis) -> UrlMetadataStore:
        if self.settings is not None:
            sizes = await crawl_sizes(client, self.router, self.settings, self.provider.config.memory_limit)
            self.seen, self.inlink_cells = sizes.seen, sizes.inlink_cells
        buckets = await bucket_sizes(client, self.router.keys[0].leases, external=False)
        store = UrlMetadataStore(client, self.router, self.change_distance, self.inlink_cells, self.repeat_window,
                                 buckets)
        await store.open()
        return store

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or self.store is None or item.record_only:
            return item
        page = self.page_url(item)
        if page is None:
            return item
        url, host = page
        content = 200 <= item.status < 300 and item.payload_digest is not None
        item.crawl_time = self.clock.at(item.fetched_at)
        record = UrlRecord(
            state=UrlState.FETCHED if item.status < 400 else UrlState.FAILED,
            fetched_at=int(item.crawl_time),
            status=item.status,
            digest=digest4(item.payload_digest) if content and item.payload_digest else b"",
            simhash8=item.simhash.to_bytes(8, "big") if content and item.simhash is not None else b"",
            etag=header_value(item.headers, "ETag"),
            last_modified=http_date_epoch(header_value(item.headers, "Last-Modified")),
            length=len(item.body),
            outlinks=len(item.outlinks),
            depth=item.depth,
            kind=_KINDS.get(item.callback, KIND_OTHER),
            url=url,
            host=host,
        )
        flags = (PAGE_ERROR if item.status >= 400 else 0) | (PAGE_NEAR_DUPLICATE if item.near_duplicate_of else 0)
        positions: list[int] = []
        if self.inlink_cells and self.seen is not None:
            positions = bloom_offsets(page_fingerprint(url), self.seen.bloom_bits, self.seen.bloom_hashes)
        revisit = self.recrawl.revisit_request(item, host) if self.recrawl is not None else None
        try:
            store = self.store
            observation = await self.call(
                lambda: store.record(url, host, record, flags=flags, inlink_positions=positions, revisit=revisit))
        except (RedisError, OSError) as exc:
            self.stats.inc_value("metadata/unavailable")
            if revisit is not None:
                self.stats.inc_value("recrawl/unavailable")
            logger.warning("URL metadata store unavailable (%s) for %s%s", exc, item.url,
                           "; it is not scheduled for a revisit" if revisit is not None else "")
            return item
        item.next_visit = observation.next_visit
        if observation.repeat:
            self.stats.inc_value("metadata/repeat")
        item.changed, item.observations, item.changes = (
            observation.changed, observation.observations, observation.changes
        )
        item.first_fetch, item.previous_fetch, item.inlinks = (
            observation.first_fetch, observation.previous_fetch, observation.inlinks
        )
        self.host_quality.update(
            host, HostQuality(observation.host_pages, observation.host_errors, observation.host_near_duplicates)
        )
        self.stats.inc_value("metadata/recorded")
        if observation.changed:
            self.stats.inc_value("metadata/changed")
        return item
