"""Schedules the next visit of every fetched page (``RECRAWL_*``).

Runs after the URL metadata pipeline, which put the URL's change history on
the item. For a page (``parse``) or sitemap (``parse_sitemap``) answered with
a 2xx or a ``304 Not Modified``:

1. the change rate is estimated from the history and the next interval
   chosen by :class:`~crawler.policy.recrawl.RecrawlPolicy` (shortened for
   important pages: the priority policy's importance of the URL);
2. the revisit's priority comes from :class:`~crawler.policy.priority.PriorityPolicy`
   (depth, in-links, host importance and quality, change rate);
3. the URL goes into the recrawl schedule
   (:class:`~crawler.frontier.due.DueSchedule`) with its level and the date
   of the capture holding its payload; when it is due, the frontier builds
   the revisit from the URL's record (the metadata pipeline's: the URL, the
   validators ``ETag`` and ``Last-Modified`` for a conditional request), so
   the recrawl needs ``METADATA_ENABLED``.

Redirects, errors and resources fetched by page modules are not revisited
(a redirect's target is a URL of its own). If Redis cannot answer, the page
goes on unscheduled (``recrawl/unavailable``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from redis.exceptions import RedisError
from scrapy.exceptions import NotConfigured

from crawler.archiving import Archive
from crawler.exceptions import ConfigurationError
from crawler.frontier.compact import bucket_sizes
from crawler.frontier.config import FrontierConfig
from crawler.frontier.context import FrontierContext
from crawler.frontier.due import DueSchedule, Revisit
from crawler.frontier.levels import PriorityLevels
from crawler.frontier.shards import ShardRouter
from crawler.items import PageItem
from crawler.policy.clock import CrawlClock
from crawler.policy.hostquality import HostQualityCache
from crawler.policy.priority import PriorityPolicy, PrioritySignals
from crawler.policy.recrawl import ChangeHistory, RecrawlPolicy, plan_revisit
from crawler.redisconn.provider import RedisProvider
from crawler.settings_parsing import get_bool
from crawler.urls import NormalizationConfig, UrlError, normalize_page_url, page_fingerprint, url_key
from crawler.warc.records import micros_of_warc_date, warc_micros

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)

#: Callbacks whose items are revisited.
_REVISITED = ("parse", "parse_sitemap")


class RecrawlPipeline:
    def __init__(
        self,
        crawler: Crawler,
        policy: RecrawlPolicy,
        priority: PriorityPolicy,
        clock: CrawlClock,
        levels: PriorityLevels,
    ) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.policy = policy
        self.priority = priority
        self.clock = clock
        self.levels = levels
        self.provider = RedisProvider.for_crawler(crawler)
        self.router = ShardRouter.for_crawler(crawler)
        self.host_quality = HostQualityCache.for_crawler(crawler)
        #: The crawl's URL normalization (the frontier's keys are built with it).
        self.normalization = NormalizationConfig.from_settings(crawler.settings)
        #: This process's frontier scheduler, told when to drain the revisits scheduled here.
        self.frontier = FrontierContext.for_crawler(crawler)
        self.schedule: DueSchedule | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "RECRAWL_ENABLED"):
            raise NotConfigured
        if not get_bool(settings, "METADATA_ENABLED"):
            raise ConfigurationError(
                "RECRAWL_ENABLED",
                "the recrawl schedule needs the URL records (METADATA_ENABLED = True): a revisit is built from "
                "its URL's record; set RECRAWL_ENABLED = False too, or turn METADATA_ENABLED back on",
            )
        config = FrontierConfig.for_crawler(crawler)
        pipeline = cls(
            crawler,
            RecrawlPolicy.from_settings(settings),
            PriorityPolicy.from_settings(settings),
            CrawlClock.from_settings(settings),
            PriorityLevels(config.levels),
        )
        Archive.for_crawler(crawler).join(pipeline)
        return pipeline

    async def open_spider(self) -> None:
        client = await self.provider.client()
        self.schedule = await self.provider.outage.call("Recrawl schedule open", lambda: self._open(client),
                                                        self.stats)

    async def _open(self, client: AnyRedis) -> DueSchedule:
        sizes = await bucket_sizes(client, self.router.keys[0].leases, external=False)
        schedule = DueSchedule(client, self.router, sizes)
        await schedule.open()
        return schedule

    async def close_spider(self) -> None:
        if self.schedule is not None:
            await self.schedule.close()

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or self.schedule is None:
            return item
        if item.callback not in _REVISITED or item.record_only or not (200 <= item.status < 300 or item.status == 304):
            return item
        try:
            url, host = normalize_page_url(item.url, self.normalization)
        except UrlError:
            return item
        revisit = self.plan(item, host)
        entry = Revisit(url_key(page_fingerprint(url)), int(revisit.due), self.levels.level(revisit.priority), host,
                        revisit.captured)
        try:
            schedule = self.schedule
            await self.provider.outage.call("Recrawl schedule", lambda: schedule.schedule([entry]), self.stats)
        except (RedisError, OSError) as exc:
            self.stats.inc_value("recrawl/unavailable")
            logger.warning("Recrawl schedule unavailable (%s); %s is not scheduled", exc, item.url)
            return item
        self.stats.inc_value("recrawl/scheduled")
        self.frontier.revisit_scheduled(entry.due * 1000)
        if item.status == 304:
            self.stats.inc_value("recrawl/not_modified")
        elif item.changed is True:
            self.stats.inc_value("recrawl/changed")
        elif item.changed is False:
            self.stats.inc_value("recrawl/unchanged")
        return item

    def plan(self, item: PageItem, host: str) -> _Plan:
        """The next visit of a fetched page: when, at which priority, with which validators."""
        now = item.crawl_time or self.clock.at(item.fetched_at)
        history = ChangeHistory(item.observations, item.changes, float(item.first_fetch), now)
        signals = PrioritySignals(
            depth=item.depth,
            inlinks=item.inlinks,
            host_importance=self.priority.importance_of(host),
            host=self.host_quality.get(host),
        )
        plan = plan_revisit(self.policy, self.priority, history, item.previous_fetch or None, signals)
        return _Plan(plan.due, plan.priority, self._capture_micros(item))

    @staticmethod
    def _capture_micros(item: PageItem) -> int:
        """The WARC date (epoch microseconds) of the capture a 304 will stand for: the one holding the payload.

        The revisit's other validators (ETag, Last-Modified) are the URL record's: those of this
        capture, or, when a 304 repeats none, the ones it answered (``lua/urlmeta.lua``).
        """
        date = item.revalidated
        if date is None and item.duplicate_of is not None and item.duplicate_of[0] == item.url:
            date = item.duplicate_of[1]
        return micros_of_warc_date(date) if date else warc_micros(item.fetched_at)


class _Plan:
    __slots__ = ("captured", "due", "priority")

    def __init__(self, due: float, priority: int, captured: int) -> None:
        self.due = due
        self.priority = priority
        #: Epoch microseconds of the capture holding the payload.
        self.captured = captured
