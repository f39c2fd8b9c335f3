"""Exact and near-duplicate detection of every page (``DEDUP_*``).

Computes the payload digest (SHA-1, the WARC ``WARC-Payload-Digest``) and asks
the shared index (:class:`~crawler.dedup.index.DedupIndex`) in one script call:
a payload already archived makes the WARC writer store a ``revisit`` record
(``item.duplicate_of``); a page whose SimHash is within
``DEDUP_SIMHASH_DISTANCE`` (3) of an indexed one is flagged
``near_duplicate_of`` (it is still archived, but not passed to index
consumers). If Redis cannot answer, the page is stored in full and counted in
``dedup/unavailable``: storage never depends on dedup.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from redis.exceptions import RedisError
from scrapy.exceptions import NotConfigured

from crawler.archiving import Archive
from crawler.crawlstate.compact import bucket_sizes
from crawler.crawlstate.shards import ShardRouter
from crawler.dedup import text
from crawler.dedup.index import DedupIndex
from crawler.items import PageItem
from crawler.pipelines.redisstage import RedisStage
from crawler.redisconn.provider import RedisProvider
from crawler.settings_parsing import get_bool, get_int
from crawler.urls import NormalizationConfig
from crawler.urls.normalize import DEFAULT_CONFIG as DEFAULT_NORMALIZATION
from crawler.warc.dates import warc_micros
from crawler.warc.digests import payload_digest

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)


class DedupPipeline(RedisStage[DedupIndex]):
    store_name = "Dedup index"

    def __init__(self, provider: RedisProvider, router: ShardRouter, distance: int, stats: Any,
                 normalization: NormalizationConfig = DEFAULT_NORMALIZATION, *, write_records: bool = True) -> None:
        super().__init__(provider, router, stats, normalization)
        #: Whether the check writes a page's URL record (no URL metadata pipeline writes it).
        self.write_records = write_records
        self.distance = distance

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not get_bool(crawler.settings, "DEDUP_ENABLED"):
            raise NotConfigured
        distance = get_int(crawler.settings, "DEDUP_SIMHASH_DISTANCE", minimum=0)
        if distance > 3:
            # 4 blocks of 16 bits: the pigeonhole guarantee holds up to distance 3.
            from crawler.exceptions import ConfigurationError

            raise ConfigurationError("DEDUP_SIMHASH_DISTANCE", f"at most 3 with 4 index blocks, got {distance}")
        if not text.NATIVE:
            logger.warning("SimHash in pure Python: crawler.dedup._simhash is not built (it needs a C compiler "
                           "and xxhash.h, Debian's libxxhash-dev; `make venv` or `pip install` builds it). Same "
                           "fingerprints, about 0.2 ms more CPU per page.")
        provider = RedisProvider.for_crawler(crawler)
        pipeline = cls(provider, provider.router, distance, crawler.stats,
                       NormalizationConfig.from_settings(crawler.settings),
                       write_records=not get_bool(crawler.settings, "METADATA_ENABLED"))
        Archive.for_crawler(crawler).join(pipeline)
        return pipeline

    async def open_store(self, client: AnyRedis) -> DedupIndex:
        sizes = await bucket_sizes(client, self.router.keys[0].leases, external=False)
        index = DedupIndex(client, self.router, self.distance, sizes, write_records=self.write_records)
        await index.open()
        return index

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or self.store is None:
            return item
        item.payload_digest = payload_digest(item.body)
        if item.status != 200 or not item.body:
            return item
        page = self.page_url(item)
        if page is None:
            return item
        url, host = page
        try:
            index, digest = self.store, item.payload_digest
            verdict = await self.call(lambda: index.check(url, host, digest, warc_micros(item.fetched_at),
                                                          item.simhash))
        except (RedisError, OSError) as exc:
            self.stats.inc_value("dedup/unavailable")
            logger.warning("Dedup index unavailable (%s); storing %s in full", exc, item.url)
            return item
        self.stats.inc_value("dedup/checked")
        if verdict.unresolved:
            self.stats.inc_value("dedup/unresolved")
            logger.warning("Dedup index: a duplicate of %s whose URL record is gone; storing it in full", item.url)
        if verdict.duplicate_of is not None and verdict.duplicate_of[0] != url:
            item.duplicate_of = verdict.duplicate_of
            self.stats.inc_value("dedup/exact")
        elif verdict.duplicate_of is not None:
            item.duplicate_of = (item.url, verdict.duplicate_of[1])  # the same URL again: a revisit of itself
            self.stats.inc_value("dedup/exact_same_url")
        if verdict.near_duplicate_of is not None:
            item.near_duplicate_of = verdict.near_duplicate_of
            item.near_distance = verdict.distance
            self.stats.inc_value("dedup/near")
        return item
