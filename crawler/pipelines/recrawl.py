"""Schedules the next visit of every fetched page (``RECRAWL_*``).

Runs after the URL metadata pipeline, which put the URL's change history on
the item. For a page (``parse``) or sitemap (``parse_sitemap``) answered with
a 2xx or a ``304 Not Modified``:

1. the change rate is estimated from the history and the next interval
   chosen by :class:`~crawler.policy.recrawl.RecrawlPolicy` (shortened for
   important pages: the priority policy's importance of the URL);
2. the revisit's priority comes from :class:`~crawler.policy.priority.PriorityPolicy`
   (depth, in-links, host importance and quality, change rate);
3. the revisit request, with the validators of this capture (``ETag``,
   ``Last-Modified``) for a conditional request, goes into the due set
   (:class:`~crawler.frontier.due.DueSchedule`), which the frontier drains
   when it is due.

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
from crawler.frontier.codec import RequestCodec
from crawler.frontier.config import FrontierConfig
from crawler.frontier.context import FrontierContext
from crawler.frontier.due import DueSchedule, Revisit, due_member
from crawler.frontier.levels import PriorityLevels
from crawler.frontier.shards import ShardRouter
from crawler.httpheaders import header_value, http_date_epoch
from crawler.items import PageItem
from crawler.metadata.store import url_field
from crawler.policy.clock import CrawlClock
from crawler.policy.hostquality import HostQualityCache
from crawler.policy.priority import PriorityPolicy, PrioritySignals
from crawler.policy.recrawl import ChangeHistory, RecrawlPolicy, plan_revisit
from crawler.redisconn.provider import RedisProvider, crawl_id_for
from crawler.requestmeta import REVISIT_META
from crawler.settings_parsing import get_bool
from crawler.sitemaps import SitemapSettings, sitemap_meta
from crawler.urls import NormalizationConfig, UrlError, normalize_url
from crawler.warc.records import warc_date

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

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
        self.sitemaps = SitemapSettings.from_settings(crawler.settings)
        #: The crawl's URL normalization (the frontier's keys are built with it).
        self.normalization = NormalizationConfig.from_settings(crawler.settings)
        #: This process's frontier scheduler, told when to drain the revisits scheduled here.
        self.frontier = FrontierContext.for_crawler(crawler)
        self.schedule: DueSchedule | None = None
        self.codec: RequestCodec | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "RECRAWL_ENABLED"):
            raise NotConfigured
        config = FrontierConfig.from_settings(settings, crawl_id_for(crawler))
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
        spider = self.crawler.spider
        assert spider is not None
        self.codec = RequestCodec(spider)
        self.schedule = DueSchedule(await self.provider.client(), self.router)
        await self.schedule.open()

    async def close_spider(self) -> None:
        if self.schedule is not None:
            await self.schedule.close()

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or self.schedule is None or self.codec is None:
            return item
        if item.callback not in _REVISITED or not (200 <= item.status < 300 or item.status == 304):
            return item
        try:
            url, host = normalize_url(item.url, self.normalization)
        except UrlError:
            return item
        revisit = self.plan(item, host)
        meta: dict[str, Any] = {"depth": item.depth, REVISIT_META: revisit.validators}
        if item.callback == "parse_sitemap":
            meta.update(sitemap_meta(self.sitemaps.max_bytes))
        blob = self.codec.encode_link(url, item.callback, meta, revisit.priority)
        entry = Revisit(due_member(url), int(revisit.due * 1000), self.levels.level(revisit.priority), host, blob,
                        url_field(url))
        try:
            schedule = self.schedule
            await self.provider.outage.call("Recrawl schedule", lambda: schedule.schedule([entry]), self.stats)
        except (RedisError, OSError) as exc:
            self.stats.inc_value("recrawl/unavailable")
            logger.warning("Recrawl schedule unavailable (%s); %s is not scheduled", exc, item.url)
            return item
        self.stats.inc_value("recrawl/scheduled")
        self.frontier.revisit_scheduled(entry.due_ms)
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
        return _Plan(plan.due, plan.priority, self._validators(item))

    @staticmethod
    def _validators(item: PageItem) -> dict[str, Any]:
        """ETag, Last-Modified and capture date to revalidate this capture with."""
        etag = header_value(item.headers, "ETag")
        last_modified = http_date_epoch(header_value(item.headers, "Last-Modified"))
        if item.status == 304:
            # A 304 need not repeat the validators: keep the ones it answered.
            etag = etag or header_value(item.request_headers, "If-None-Match")
            last_modified = last_modified or http_date_epoch(header_value(item.request_headers, "If-Modified-Since"))
        # The capture a 304 will stand for: the one holding the payload.
        date = item.revalidated
        if date is None and item.duplicate_of is not None and item.duplicate_of[0] == item.url:
            date = item.duplicate_of[1]
        validators: dict[str, Any] = {"date": date or warc_date(item.fetched_at)}
        if etag:
            validators["etag"] = etag
        if last_modified:
            validators["lm"] = last_modified
        return validators


class _Plan:
    __slots__ = ("due", "priority", "validators")

    def __init__(self, due: float, priority: int, validators: dict[str, Any]) -> None:
        self.due = due
        self.priority = priority
        self.validators = validators
