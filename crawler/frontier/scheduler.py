"""The Scrapy scheduler that serves requests from the shared Redis frontier.

Scrapy calls :meth:`FrontierScheduler.enqueue_request` and
:meth:`FrontierScheduler.next_request` synchronously, many times a second, so
neither talks to Redis: requests go in through the :class:`Intake` (filter,
fingerprint, score, level, encode, shard) and come out of a small local buffer
(:class:`InHand`), and a single background task, the :class:`Pump`, does all
the I/O in one pipelined round trip per cycle.

A request is *finished* when the engine drops it from its in-progress set,
which happens after the download, the spider callback, every request the
callback produced has been enqueued here, and every item has left the item
pipelines. Only then is its lease acked, in the same round trip as (and after)
the requests it produced, so a worker that dies at any moment loses nothing:
its unacked leases expire and their URLs are fetched again by someone else.

The host's next allowed time is computed by :class:`PolitenessPolicy` from the
fetch's duration (Scrapy's ``download_latency``) and the time the engine
finished with the request, which is never earlier than the end of the fetch
(:class:`LeaseCompleter`).

Recrawl, shards, draining and priority as the scheduler sees them:
docs/frontier.md, "The scheduler's cycle".
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.defer import deferred_from_coro

from crawler import defaults
from crawler.crawlstate.compact import bucket_sizes
from crawler.crawlstate.shards import ShardRouter, check_crawl_metadata
from crawler.downloader.dns import CachingGuardedResolver, resolver_from_settings
from crawler.exceptions import ConfigurationError, FrontierUnavailableError
from crawler.frontier.admission import MemoryWatch
from crawler.frontier.codec import RequestCodec
from crawler.frontier.config import FrontierConfig
from crawler.frontier.context import FrontierContext
from crawler.frontier.inhand import InHand
from crawler.frontier.intake import Intake
from crawler.frontier.levels import PriorityLevels
from crawler.frontier.outcome import Handout, LeaseCompleter
from crawler.frontier.pacing import ShardPacer
from crawler.frontier.pump import Pump
from crawler.frontier.redisfrontier import shard_frontiers
from crawler.frontier.reset import reset_crawl
from crawler.frontier.sizing import crawl_sizes
from crawler.frontier.slotconf import share_slot_overrides
from crawler.policy.backoff import BackoffPolicy
from crawler.policy.clock import CrawlClock
from crawler.policy.hostquality import HostQualityCache
from crawler.policy.politeness import PolitenessKey
from crawler.policy.priority import PriorityPolicy
from crawler.policy.recrawl import RecrawlMode
from crawler.redisconn.provider import RedisProvider
from crawler.requestmeta import LEASE_META
from crawler.scrapy_internals import engine_is_interactive, engine_slot
from crawler.settings_parsing import get_float, get_int
from crawler.sitemaps import SitemapSettings
from crawler.urls.filters import FilterConfig, UrlFilter

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

    from crawler.frontier.redisfrontier import RedisFrontier
    from crawler.frontier.sizing import CrawlSizes
    from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)


class FrontierScheduler(BaseScheduler):
    """Scrapy scheduler over the Redis Mercator frontier (``SCHEDULER``)."""

    def __init__(
        self,
        crawler: Crawler,
        config: FrontierConfig,
        provider: RedisProvider,
        stats: StatsCollector,
        backoff: BackoffPolicy,
        url_filter: UrlFilter,
        *,
        router: ShardRouter | None = None,
        priority: PriorityPolicy | None = None,
        host_quality: HostQualityCache | None = None,
        clock: CrawlClock | None = None,
        mode: RecrawlMode = RecrawlMode.BATCH,
        drain_interval: float = defaults.RECRAWL_DRAIN_INTERVAL,
        resolver: CachingGuardedResolver | None = None,
        page_bytes: int = defaults.FRONTIER_PAGE_BYTES,
        memory_interval: float = defaults.FRONTIER_MEMORY_CHECK_INTERVAL,
    ) -> None:
        self.crawler = crawler
        self.clock = clock or CrawlClock()
        self.mode = mode
        self.config = config
        self.backoff = backoff
        #: Bytes a queued URL will take once fetched, and seconds between looks at Redis memory.
        self.page_bytes = page_bytes
        self.memory_interval = memory_interval
        self.provider = provider
        self.stats = stats
        self.router = router or ShardRouter(config.crawl_id)
        self.keys = self.router.crawl_keys
        shards = self.router.count
        self.politeness = config.politeness()
        self.levels = PriorityLevels(config.levels)
        #: URLs on their way in (per shard), sent by the next step.
        self.intake = Intake(
            self.router,
            url_filter,
            self.levels,
            stats,
            local_seen_size=config.local_seen_size,
            local_requests=config.local_requests,
            priority=priority,
            host_quality=host_quality,
            clock=self.clock,
            resolver=resolver,
        )
        #: What each shard last told this worker; when to ask which for URLs.
        self.pacer = ShardPacer(shards, config.idle_poll)
        #: Leases held, from claim to ack.
        self.inhand = InHand(config.concurrency, config.lease_timeout)
        self.pump = Pump(
            config,
            provider,
            stats,
            self.intake,
            self.inhand,
            self.pacer,
            self.clock,
            shards=shards,
            drain_interval=drain_interval,
            wake_engine=self._wake_engine,
            has_pending=self.has_pending_requests,
        )
        # New URLs wake the pump at once (the link's path: intake -> pump -> store).
        self.intake.notify = self.pump.poke
        self._nextcall: Any = None
        #: When the frontier was last found drained (FRONTIER_IDLE_BEFORE_CLOSE), on the monotonic clock.
        self._drained_since: float | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = FrontierConfig.for_crawler(crawler)
        assert crawler.stats is not None
        settings = crawler.settings
        router = RedisProvider.for_crawler(crawler).router
        if config.politeness_key is PolitenessKey.IP and router.count > 1:
            raise ConfigurationError(
                "FRONTIER_POLITENESS_KEY",
                f"'ip' needs one frontier shard (FRONTIER_SHARDS = 1), not {router.count}: the hosts of one "
                "address can belong to several shards, whose clocks are apart",
            )
        return cls(
            crawler,
            config,
            RedisProvider.for_crawler(crawler),
            crawler.stats,
            BackoffPolicy.from_settings(settings),
            UrlFilter(FilterConfig.from_settings(settings)),
            router=router,
            priority=PriorityPolicy.from_settings(settings),
            host_quality=HostQualityCache.for_crawler(crawler),
            clock=CrawlClock.from_settings(settings),
            mode=RecrawlMode.from_settings(settings),
            drain_interval=get_float(settings, "RECRAWL_DRAIN_INTERVAL", minimum=0.1),
            resolver=resolver_from_settings(settings, crawler.stats)
            if config.politeness_key is PolitenessKey.IP
            else None,
            page_bytes=get_int(settings, "FRONTIER_PAGE_BYTES", minimum=1),
            memory_interval=get_float(settings, "FRONTIER_MEMORY_CHECK_INTERVAL", minimum=0.1),
        )

    # -- lifecycle ---------------------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    async def _open(self, spider: Spider) -> None:
        spider_mode = getattr(spider, "mode", None)
        if spider_mode is not None:
            self.mode = RecrawlMode.parse(spider_mode, "mode (spider argument)")
        client = await self.provider.client()
        if self.config.reset_on_start:
            deleted = await self.provider.outage.call(
                "Frontier reset", lambda: reset_crawl(client, self.config.crawl_id), self.stats)
            logger.warning("Frontier %r reset (FRONTIER_RESET_ON_START): %d keys deleted, the crawl starts over",
                           self.config.crawl_id, deleted)
        # Every step reads or writes only what a second try reads and writes the same way:
        # a Redis outage while this worker opens is waited out, not fatal.
        sizes, frontiers = await self.provider.outage.call("Frontier open", lambda: self._open_shards(client),
                                                          self.stats)
        count = self.router.count
        self.config = replace(self.config, inlink_cells=sizes.inlink_cells)
        codec = RequestCodec(spider, SitemapSettings.from_settings(self.crawler.settings).max_bytes)
        self.intake.bind(codec, frontiers)
        self.pump.memory = MemoryWatch(client, self.router, sizes.memory_limit, self.config.levels,
                                       self.page_bytes, self.memory_interval, self.stats)
        # The engine's own record of requests still being processed (watched: a
        # request it is done with is collected for an ack), and its "look for
        # work now" call: the only two engine internals used here.
        self._nextcall = engine_slot(self.crawler.engine, self.inhand.finished)
        if engine_is_interactive(self.crawler.engine):
            # scrapy shell: fetch() waits on the request object it scheduled, so it must not be stored.
            self.intake.interactive = True
            logger.info("Frontier %r: an interactive session (scrapy shell); its requests are fetched by this "
                        "process, not stored in the frontier", self.config.crawl_id)
        self.inhand.bind(LeaseCompleter(self.politeness, codec, self.stats))
        self.pump.start(frontiers, codec, self.keys.crawl_key("draining"))
        FrontierContext.for_crawler(self.crawler).attach(self.intake, self)
        logger.info(
            "Frontier %r open on %s: %d shard%s, min delay %.3g s, delay factor %.3g, %d priority levels %s, "
            "%d active hosts, lease %.0f s, %s mode; Redis memory limit %s, Bloom filter %.1f MiB per shard, %d hashes",
            self.config.crawl_id,
            self.provider.url,
            count,
            "" if count == 1 else "s",
            self.config.min_delay,
            self.config.delay_factor,
            self.config.levels,
            list(self.config.queue_weights),
            self.config.active_hosts,
            self.config.lease_timeout,
            self.mode.value,
            f"{sizes.memory_limit / 2**20:,.0f} MiB" if sizes.memory_limit else "none",
            sizes.seen.bloom_bits / 8 / 2**20,
            sizes.seen.bloom_hashes,
        )

    async def _open_shards(self, client: AnyRedis) -> tuple[CrawlSizes, list[RedisFrontier]]:
        """The crawl's recorded sizes checked, and each shard's frontier with its scripts loaded."""
        await check_crawl_metadata(client, self.router)
        await self._check_politeness_key(client)
        # DOWNLOAD_SLOTS: this worker's entries shared, every worker's applied.
        overrides = await share_slot_overrides(client, self.router, dict(self.config.slot_overrides))
        self.politeness = self.config.politeness(overrides)
        self.config = replace(self.config, slot_limited=any(o.concurrency is not None for o in overrides.values()))
        if overrides:
            logger.info("Frontier %r: %d politeness keys with settings of their own (DOWNLOAD_SLOTS): %s",
                        self.config.crawl_id, len(overrides), ", ".join(sorted(overrides)[:10]))
        sizes = await crawl_sizes(client, self.router, self.crawler.settings, self.provider.config.memory_limit)
        config = replace(self.config, inlink_cells=sizes.inlink_cells)
        frontiers = shard_frontiers(client, self.router, config, sizes.seen, self.backoff)
        buckets = await bucket_sizes(client, self.router.keys[0].leases, external=self.provider.embedded is None)
        for frontier in frontiers:
            frontier.sizes = buckets
            await frontier.prepare()
        return sizes, frontiers

    async def _check_politeness_key(self, client: Any) -> None:
        """Every worker of a crawl keeps politeness by the same key (recorded by the first)."""
        key = self.keys.crawl_key("meta")
        mine = self.config.politeness_key.value
        await client.hsetnx(key, "politeness_key", mine)
        stored = await client.hget(key, "politeness_key")
        stored = stored.decode() if isinstance(stored, bytes) else str(stored)
        if stored != mine:
            raise ConfigurationError(
                "FRONTIER_POLITENESS_KEY",
                f"crawl {self.config.crawl_id!r} keeps politeness by {stored!r}, this worker by {mine!r}; "
                "the key is fixed for the life of a crawl",
            )

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        self.pump.closing = True
        FrontierContext.for_crawler(self.crawler).detach(self.intake)
        await self.pump.stop()
        if not self.pump.frontiers:
            return
        await self.pump.flush()
        unfinished = len(self.inhand.handed)
        for frontier in self.pump.frontiers:
            await frontier.close()
        if unfinished:
            logger.warning("Frontier close: %d requests were still in flight; their leases will expire", unfinished)
        if not self.stats.get_value("frontier/claimed") and not self.stats.get_value("frontier/enqueued") \
                and not self.stats.get_value("frontier/local"):
            if self.stats.get_value("frontier/duplicate"):
                logger.warning(
                    "Frontier %r had nothing to crawl: the URLs given were crawled before (the crawl's seen set "
                    "remembers them). To start over: -s FRONTIER_RESET_ON_START=True, or "
                    "scrapy frontier reset --crawl-id %s --yes",
                    self.config.crawl_id, self.config.crawl_id,
                )
            else:
                logger.warning(
                    "Frontier %r had nothing to crawl: give seeds with -a seeds=FILE or -a urls=URL,URL",
                    self.config.crawl_id,
                )
        logger.info("Frontier %r closed (%s)", self.config.crawl_id, reason)

    # -- the Scrapy scheduler interface --------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self._has_work():
            self._drained_since = None
            return True
        wait = self.config.idle_before_close
        if wait <= 0 or self.pump.closing or self.pump.draining:
            return False
        # Drained: stay open FRONTIER_IDLE_BEFORE_CLOSE seconds for URLs that others add (the pump keeps
        # looking every FRONTIER_IDLE_POLL), as scrapy-redis's SCHEDULER_IDLE_BEFORE_CLOSE waits.
        now = time.monotonic()
        if self._drained_since is None:
            self._drained_since = now
            logger.info("Frontier %r drained; waiting up to %g s for new URLs (FRONTIER_IDLE_BEFORE_CLOSE)",
                        self.config.crawl_id, wait)
        return now - self._drained_since < wait

    def _has_work(self) -> bool:
        inhand, pump = self.inhand, self.pump
        if pump.draining:
            return bool(inhand.handed or self.intake.enqueues or inhand.completions or pump.step_running
                        or self.intake.local)
        if self.mode is RecrawlMode.CONTINUOUS and not pump.closing:
            return True
        return bool(
            inhand.buffer
            or self.intake.local
            or self.pacer.due_now > 0
            or inhand.handed
            or self.intake.enqueues
            or inhand.completions
            or pump.step_running
            or not self.pacer.synced
            or self.pacer.pending > 0
        )

    def enqueue_request(self, request: Request) -> bool:
        """Queue a request for the frontier (:meth:`Intake.request`); ``False`` if it is dropped here.

        Duplicates found by the shared seen set, and URLs over a page budget,
        are counted when Redis answers: the engine is told ``True`` for every
        request that was sent.
        """
        handout = self.inhand.handed.get(request)
        if handout is not None and handout.outcome is not None:
            # A leased request a downloader middleware gave back with its outcome set (a retry,
            # a dead letter): its lease's ack applies it. Returned rather than raised, so the
            # spider's errback is not called for it (as with Scrapy's RetryMiddleware).
            return True
        return self.intake.request(request)

    def revisit_scheduled(self, due_ms: int) -> None:
        """A revisit was put in the due set by this process (the recrawl pipeline):
        drain it when it is due, not at the next ``RECRAWL_DRAIN_INTERVAL``."""
        if self.pacer.revisit_scheduled(due_ms):
            self.pump.poke()

    def next_request(self) -> Request | None:
        if self.intake.local:
            # Requests the frontier cannot store (callbacks that are not spider methods): this process's own.
            return self.intake.local.popleft()
        self.pump.collect()
        request = self.inhand.hand_out()
        if (
            request is None
            and not self.pump.closing
            and self.inhand.capacity() > 0
            and self.pacer.next_ready_at <= time.time()
        ):
            # Ask the pump for work only if it could claim some: with every
            # slot taken (requests still in the pipelines) a poke would only
            # spin the engine and the pump against each other.
            self.pump.poke()
        return request

    def _wake_engine(self) -> None:
        if self._nextcall is not None and not self.pump.closing:
            self._nextcall.schedule()

    # -- introspection -------------------------------------------------------------------

    def __len__(self) -> int:
        return self.pacer.pending + len(self.intake.local)


__all__ = ["LEASE_META", "FrontierScheduler", "FrontierUnavailableError", "Handout"]
