"""A Prometheus endpoint (``METRICS_PORT``; off by default), with stable metric names.

Per worker (from its stats, read at scrape time: nothing on the per-page
path): ``crawler_pages_total``, ``crawler_response_bytes_total``,
``crawler_responses_total{status}``, ``crawler_errors_total{class}``,
``crawler_duplicates_total{kind}``, ``crawler_robots_disallowed_total``,
``crawler_dead_letters_total``, ``crawler_fetch_latency_seconds`` (histogram)
and ``crawler_pages_per_second{window="recent"|"overall"}``.

For the whole crawl (read from the shared frontier every
``METRICS_REFRESH_INTERVAL`` seconds on the event loop, so the same value
from every worker): ``crawler_frontier_queued_urls``,
``crawler_frontier_in_flight_urls``, ``crawler_frontier_active_hosts``,
``crawler_frontier_sleeping_hosts``, ``crawler_frontier_parked_hosts``, ``crawler_frontier_dead_letters``,
``crawler_frontier_ready_hosts``, ``crawler_frontier_seen_urls``,
``crawler_frontier_due_urls``.

Every metric has a ``crawl`` label. The HTTP server is prometheus-client's,
in its own thread, bound to ``METRICS_HOST`` (default 127.0.0.1).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import RedisError
from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.exceptions import ConfigurationError
from crawler.frontier.shards import ShardRouter
from crawler.ops.figures import FrontierFigures, latency_buckets, totals_from_stats
from crawler.ops.view import frontier_figures
from crawler.redisconn.provider import RedisProvider, crawl_id_for
from crawler.settings_parsing import get_float, get_int, setting

if TYPE_CHECKING:
    from typing import Self

    from prometheus_client.core import Metric
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

#: Seconds of the "recent" pages/s window.
RECENT_WINDOW = 60.0


class CrawlCollector(Collector):
    """Builds the metric families at scrape time from the worker's stats and the latest frontier figures."""

    def __init__(self, crawl_id: str, stats: Any) -> None:
        self.crawl_id = crawl_id
        self.stats = stats
        self.started = time.monotonic()
        self.frontier: FrontierFigures | None = None
        self._history: deque[tuple[float, float]] = deque(maxlen=256)

    def collect(self) -> Iterator[Metric]:
        crawl = self.crawl_id
        totals = totals_from_stats(dict(self.stats.get_stats()))

        def counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, help_text, labels=["crawl"])
            family.add_metric([crawl], value)
            return family

        pages = totals.get("pages", 0.0)
        yield counter("crawler_pages", "Responses received by this worker", pages)
        yield counter("crawler_response_bytes", "Body bytes received by this worker", totals.get("bytes", 0.0))
        yield counter("crawler_robots_disallowed", "URLs dropped by robots.txt", totals.get("robots:disallowed", 0))
        yield counter("crawler_dead_letters", "URLs moved to the dead letters", totals.get("dead_letters", 0.0))
        statuses = CounterMetricFamily("crawler_responses", "Responses by HTTP status", labels=["crawl", "status"])
        errors = CounterMetricFamily("crawler_errors", "Errors by class (HTTP 4xx/5xx, exception classes)",
                                     labels=["crawl", "class"])
        duplicates = CounterMetricFamily("crawler_duplicates", "Duplicate pages by kind", labels=["crawl", "kind"])
        for key, value in sorted(totals.items()):
            if key.startswith("status:"):
                statuses.add_metric([crawl, key[7:]], value)
            elif key.startswith("error:"):
                errors.add_metric([crawl, key[6:]], value)
        for kind in ("exact", "near"):
            duplicates.add_metric([crawl, kind], totals.get(f"dedup:{kind}", 0.0))
        yield statuses
        yield errors
        yield duplicates
        cumulative = 0
        buckets = []
        for bound, count in latency_buckets(totals):
            cumulative += count
            buckets.append((bound, float(cumulative)))
        latency = HistogramMetricFamily("crawler_fetch_latency_seconds", "Time to the response headers",
                                        labels=["crawl"])
        latency.add_metric([crawl], buckets, sum_value=totals.get("latency_sum", 0.0))
        yield latency
        now = time.monotonic()
        self._history.append((now, pages))
        while len(self._history) > 1 and now - self._history[0][0] > RECENT_WINDOW:
            self._history.popleft()
        then, before = self._history[0]
        rate = GaugeMetricFamily("crawler_pages_per_second", "Pages per second of this worker",
                                 labels=["crawl", "window"])
        rate.add_metric([crawl, "recent"], (pages - before) / (now - then) if now > then else 0.0)
        rate.add_metric([crawl, "overall"], pages / (now - self.started) if now > self.started else 0.0)
        yield rate
        frontier = self.frontier
        if frontier is not None:
            for name, help_text, value in (
                ("crawler_frontier_queued_urls", "URLs queued in the shared frontier", frontier.queued),
                ("crawler_frontier_in_flight_urls", "URLs leased by any worker", frontier.leased),
                ("crawler_frontier_active_hosts", "Awake hosts holding a back queue", frontier.awake_hosts),
                ("crawler_frontier_sleeping_hosts", "Hosts holding a back queue, asleep until a wake time",
                 frontier.sleeping),
                ("crawler_frontier_parked_hosts", "Sleeping hosts parked after connection failures", frontier.parked),
                ("crawler_frontier_dead_letters", "URLs in the dead-letter queue", frontier.dead_letters),
                ("crawler_frontier_ready_hosts", "Hosts waiting for their next fetch", frontier.ready_hosts),
                ("crawler_frontier_seen_urls", "URLs ever enqueued (the seen set)", frontier.seen),
                ("crawler_frontier_due_urls", "Revisits scheduled", frontier.due),
                ("crawler_frontier_url_records", "URL records (URLs fetched or given up on)", frontier.records),
                ("crawler_redis_memory_used_bytes", "Redis used_memory of the servers holding the crawl",
                 frontier.memory_used),
                ("crawler_redis_memory_limit_bytes", "Their memory limit (REDIS_MEMORY_LIMIT or maxmemory; 0: none)",
                 frontier.memory_limit),
                ("crawler_redis_memory_share", "The fullest server's share of its limit", frontier.memory_share),
                ("crawler_redis_bytes_per_page", "Redis bytes per URL record, fixed costs included",
                 frontier.bytes_per_record),
            ):
                gauge = GaugeMetricFamily(name, help_text, labels=["crawl"])
                gauge.add_metric([crawl], value)
                yield gauge
            hours = frontier.hours_to_limit()
            if hours is not None:
                gauge = GaugeMetricFamily("crawler_redis_hours_to_limit", "Hours until the fullest Redis server "
                                          "reaches its limit at the crawl's recent growth", labels=["crawl"])
                gauge.add_metric([crawl], hours)
                yield gauge
            per_server = GaugeMetricFamily("crawler_redis_server_memory_share", "Each server's (cluster "
                                           "primary's) share of its memory limit", labels=["crawl", "server"])
            for server in frontier.servers:
                per_server.add_metric([crawl, server.server], server.share)
            yield per_server


class MetricsEndpoint:
    def __init__(self, crawler: Crawler, port: int, host: str, refresh: float) -> None:
        self.crawler = crawler
        self.port = port
        self.host = host
        self.refresh = refresh
        self.crawl_id = crawl_id_for(crawler)
        self.provider = RedisProvider.for_crawler(crawler)
        self.router = ShardRouter.for_crawler(crawler)
        self.registry = CollectorRegistry(auto_describe=False)
        self.collector = CrawlCollector(self.crawl_id, crawler.stats)
        self.registry.register(self.collector)
        self._server: Any = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        port = get_int(settings, "METRICS_PORT", minimum=0)
        if port == 0:
            raise NotConfigured
        if port > 65535:
            raise ConfigurationError("METRICS_PORT", f"not a TCP port: {port}")
        endpoint = cls(crawler, port, str(setting(settings, "METRICS_HOST")),
                       get_float(settings, "METRICS_REFRESH_INTERVAL", minimum=0.1))
        crawler.signals.connect(endpoint.engine_started, signal=signals.engine_started)
        crawler.signals.connect(endpoint.engine_stopped, signal=signals.engine_stopped)
        return endpoint

    def engine_started(self) -> None:
        try:
            self._server, _thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as exc:
            raise ConfigurationError("METRICS_PORT", f"cannot listen on {self.host}:{self.port}: {exc}") from None
        logger.info("Metrics: http://%s:%d/metrics", self.host, self.port)
        self._task = asyncio.ensure_future(self._refresh_loop())

    async def _refresh_loop(self) -> None:
        while True:
            try:
                self.collector.frontier = await frontier_figures(await self.provider.client(), self.router,
                                                                 self.provider.config.memory_limit,
                                                                 self.collector.frontier)
            except (RedisError, OSError) as exc:
                logger.debug("Metrics: frontier figures unavailable (%s)", exc)
            await asyncio.sleep(self.refresh)

    def engine_stopped(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
