"""Live progress: a log line every ``PROGRESS_INTERVAL`` seconds, and the crawl's shared record.

Every interval (30 s by default; 0 turns it off) each worker:

* logs one line: pages fetched, pages/s (this interval and overall), the
  shared frontier (queued URLs, URLs in flight, active and ready hosts, due
  revisits), errors by class, duplicates, robots.txt drops;
* adds what its counters did since its last report to the crawl's totals in
  Redis and appends a sample to the crawl's timeline
  (:mod:`crawler.ops.timeline`), which the crawl report plots.

In the first interval it also reports (without a log line) 1, 2, 4, 8...
seconds after the start, so that a crawl of seconds has points to chart.

At the end of the crawl it reports once more and, with ``REPORT_ENABLED``
(on by default), writes the crawl report (``REPORT_PATH``, default
``crawl-data/<crawl id>/report.html``). The work is a few Redis commands per
interval: nothing on the per-page path. A Redis that does not answer costs a
warning, never the crawl.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.frontier import FrontierConfig
from crawler.ops.figures import FrontierFigures, Progress, delta, progress_line, totals_from_stats
from crawler.ops.timeline import Sample, Timeline
from crawler.ops.view import frontier_figures
from crawler.redisconn.provider import RedisProvider, crawl_id_for, worker_name
from crawler.settings_parsing import get_bool, get_float, setting

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def ticks(interval: float) -> Iterator[tuple[float, bool]]:
    """When to report, in seconds from the start, and whether to log the line then: 1, 2, 4... s
    while under ``interval`` (the timeline only), then every ``interval`` (logged)."""
    early = 1.0
    while early < interval:
        yield early, False
        early *= 2
    for n in itertools.count(1):
        yield n * interval, True


class ProgressReporter:
    def __init__(self, crawler: Crawler, interval: float, report_path: Path | None) -> None:
        self.crawler = crawler
        self.interval = interval
        self.report_path = report_path
        self.crawl_id = crawl_id_for(crawler)
        self.provider = RedisProvider.for_crawler(crawler)
        self.router = RedisProvider.for_crawler(crawler).router
        self.worker = worker_name()
        self.timeline: Timeline | None = None
        self.started = time.monotonic()
        self._last = time.monotonic()
        self._reported: dict[str, float] = {}
        self._task: asyncio.Task[None] | None = None
        #: One tick at a time: each adds to the shared totals what changed since the last one reported.
        self._ticking = asyncio.Lock()
        #: The latest figures of the shared frontier (the metrics endpoint serves them).
        self.frontier: FrontierFigures | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        interval = get_float(settings, "PROGRESS_INTERVAL", minimum=0.0)
        if interval <= 0:
            raise NotConfigured
        report = None
        if get_bool(settings, "REPORT_ENABLED"):
            default = Path(setting(settings, "CRAWL_DATA_DIR")) / crawl_id_for(crawler) / "report.html"
            report = Path(settings.get("REPORT_PATH") or default)
        reporter = cls(crawler, interval, report)
        crawler.signals.connect(reporter.engine_started, signal=signals.engine_started)
        crawler.signals.connect(reporter.spider_closed, signal=signals.spider_closed)
        return reporter

    def engine_started(self) -> None:
        self.started = self._last = time.monotonic()
        self._task = asyncio.ensure_future(self._loop())

    async def spider_closed(self, spider: Any, reason: str) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.tick(final=True)
        if self.report_path is not None and self.timeline is not None:
            from crawler.ops.lookup import Lookup
            from crawler.report.html import write_report

            settings = self.crawler.settings
            lookup = Lookup(settings, self.router, FrontierConfig.for_crawler(self.crawler),
                            Path(setting(settings, "CRAWL_DATA_DIR")) / self.crawl_id,
                            self.provider.config.memory_limit)
            try:
                await write_report(self.timeline, await self.provider.client(), self.router, self.crawl_id,
                                   self.report_path, lookup)
                logger.info("Crawl report: %s", self.report_path)
            except (RedisError, OSError) as exc:
                logger.warning("Crawl report not written (%s)", exc)

    async def _loop(self) -> None:
        for due, logged in ticks(self.interval):
            await asyncio.sleep(max(0.0, self.started + due - time.monotonic()))
            # A tick runs to its end when the crawl closes meanwhile: cancelled after its counters
            # reached Redis but before they were marked reported, the final tick would add them again.
            await asyncio.shield(self.tick(log=logged))

    async def tick(self, final: bool = False, log: bool = True) -> None:
        """Log the progress line (unless ``log`` is false) and report to the crawl's shared record."""
        async with self._ticking:
            await self._tick(final, log)

    async def _tick(self, final: bool, log: bool) -> None:
        stats = self.crawler.stats
        assert stats is not None
        now = time.monotonic()
        totals = totals_from_stats(stats.get_stats())
        changed = delta(totals, self._reported)
        try:
            client = await self.provider.client()
            if self.timeline is None:
                self.timeline = Timeline(client, self.crawl_id)
            self.frontier = await frontier_figures(client, self.router, self.provider.config.memory_limit,
                                                   self.frontier)
        except (RedisError, OSError) as exc:
            logger.warning("Progress: Redis unreachable (%s)", exc)
            self.frontier = None
        admission = stats.get_value("redis/admission") or ""
        progress = Progress(totals, changed, now - self._last, now - self.started, self.frontier, str(admission))
        if log or final:
            logger.info("%s%s", "Final " if final else "", progress_line(progress))
        self._last = now
        if self.timeline is None:
            return
        frontier = self.frontier or FrontierFigures()
        sample = Sample(
            time.time(), self.worker, int(changed.get("pages", 0)),
            int(sum(v for k, v in changed.items() if k.startswith("error:"))),
            int(changed.get("dedup:exact", 0) + changed.get("dedup:near", 0)),
            frontier.queued, frontier.leased, frontier.active_hosts, frontier.ready_hosts,
        )
        try:
            await self.timeline.report(changed, sample)
            self._reported = totals
        except (RedisError, OSError) as exc:
            logger.warning("Progress: could not record the timeline (%s)", exc)
