"""Schedules the next visit of every fetched page (``RECRAWL_*``).

For a page (``parse``) or sitemap (``parse_sitemap``) answered with a 2xx or
a ``304 Not Modified``, the URL metadata pipeline asks this one for the
revisit's inputs (:meth:`RecrawlPipeline.revisit_request`) and the URL
metadata store decides the next visit in the same call that records the
fetch, from the history that call computes, writing the URL's record once
(``lua/urlmeta.lua``):

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

The decision is :func:`~crawler.policy.recrawl.plan_revisit`'s, made in Lua
with the policy's numbers (:func:`~crawler.policy.recrawl.revisit_terms`;
``crawler/policy/lua/revisit.lua``). This pipeline counts what was scheduled
(``item.next_visit``) and tells the frontier. Redirects, errors and
resources fetched by page modules are not revisited (a redirect's target is
a URL of its own). If Redis could not record the fetch, the page goes on
unscheduled (``recrawl/unavailable``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import NotConfigured

from crawler.archiving import Archive
from crawler.exceptions import ConfigurationError
from crawler.frontier import FrontierConfig, FrontierContext, PriorityLevels
from crawler.items import PageItem
from crawler.metadata.recordstore import RevisitRequest
from crawler.policy.clock import CrawlClock
from crawler.policy.priority import PriorityPolicy
from crawler.policy.recrawl import RecrawlPolicy, revisit_terms
from crawler.settings_parsing import get_bool
from crawler.warc.dates import micros_of_warc_date, warc_micros

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
        #: The policy's numbers as the record script reads them.
        self.terms = revisit_terms(policy, priority, levels.levels, levels.default_level)
        #: This process's frontier scheduler, told when to drain the revisits scheduled here.
        self.frontier = FrontierContext.for_crawler(crawler)

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

    @staticmethod
    def revisited(item: PageItem) -> bool:
        """Whether a page gets a next visit (a page or sitemap answered with a 2xx or a 304)."""
        return (item.callback in _REVISITED and not item.record_only
                and (200 <= item.status < 300 or item.status == 304))

    def revisit_request(self, item: PageItem, host: str) -> RevisitRequest | None:
        """What the URL metadata store needs to plan the page's next visit as it records the fetch
        (None: not revisited)."""
        if not self.revisited(item):
            return None
        now = item.crawl_time or self.clock.at(item.fetched_at)
        return RevisitRequest(self.terms, item.depth, self.priority.importance_of(host), now,
                              self._capture_micros(item))

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or not self.revisited(item):
            return item
        if not item.next_visit:  # not recorded (Redis could not answer: recrawl/unavailable), or not a page URL
            return item
        self.stats.inc_value("recrawl/scheduled")
        self.frontier.revisit_scheduled(item.next_visit * 1000)
        if item.status == 304:
            self.stats.inc_value("recrawl/not_modified")
        elif item.changed is True:
            self.stats.inc_value("recrawl/changed")
        elif item.changed is False:
            self.stats.inc_value("recrawl/unchanged")
        return item

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
