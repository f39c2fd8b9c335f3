"""The crawler's Prometheus metrics: names, types and units as Prometheus names them.

Per worker (from its stats, read at scrape time: nothing on the per-page
path), counters ending in ``_total`` and a latency histogram in seconds:
``crawler_pages_total``, ``crawler_response_bytes_total``,
``crawler_responses_total{status}``, ``crawler_errors_total{class}``,
``crawler_duplicates_total{kind}``, ``crawler_robots_disallowed_total``,
``crawler_dead_letters_total``, ``crawler_urls_refused_total{reason}``,
``crawler_fetch_latency_seconds``. Rates are Prometheus' to compute
(``rate(crawler_pages_total[5m])``).

For the whole crawl (the shared frontier's figures), exported by one worker
of the crawl at a time (``crawl_wide``: the worker that holds the crawl's
``metricsleader`` lease), so that a fleet's ``sum()`` is the crawl's figure:
``crawler_frontier_*`` gauges (URLs and hosts), ``crawler_redis_memory_used_bytes``,
``crawler_redis_memory_limit_bytes``, ``crawler_redis_memory_used_ratio``,
``crawler_redis_server_memory_used_ratio{server}``,
``crawler_redis_memory_per_url_record_bytes``, ``crawler_redis_seconds_to_limit``.

:data:`DEPRECATED` names the metrics of 0.1.0's first form, still exported as
copies until 0.2 (their HELP says so). Every metric has a ``crawl`` label.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from crawler.ops.figures import FrontierFigures, latency_buckets, totals_from_stats

if TYPE_CHECKING:
    from prometheus_client.core import Metric

#: Seconds of the deprecated ``crawler_pages_per_second{window="recent"}``.
RECENT_WINDOW = 60.0

#: Deprecated name -> what replaces it (exported as copies until 0.2; docs/operating.md lists them).
DEPRECATED = {
    "crawler_pages_per_second": "rate(crawler_pages_total[5m])",
    "crawler_redis_memory_share": "crawler_redis_memory_used_ratio",
    "crawler_redis_server_memory_share": "crawler_redis_server_memory_used_ratio",
    "crawler_redis_bytes_per_page": "crawler_redis_memory_per_url_record_bytes",
    "crawler_redis_hours_to_limit": "crawler_redis_seconds_to_limit",
}

#: The crawl-wide gauges: name, help, the FrontierFigures attribute.
CRAWL_GAUGES = (
    ("crawler_frontier_queued_urls", "URLs queued in the shared frontier", "queued"),
    ("crawler_frontier_in_flight_urls", "URLs leased by any worker", "leased"),
    ("crawler_frontier_active_hosts", "Awake hosts holding a back queue", "awake_hosts"),
    ("crawler_frontier_sleeping_hosts", "Hosts holding a back queue, asleep until a wake time", "sleeping"),
    ("crawler_frontier_parked_hosts", "Sleeping hosts parked after connection failures", "parked"),
    ("crawler_frontier_parked_host_longest_wait_seconds", "Seconds until the parked host that waits longest may "
     "be contacted again (of up to 1,000 sampled per shard)", "longest_park"),
    ("crawler_frontier_dead_letters", "URLs in the dead-letter queue", "dead_letters"),
    ("crawler_frontier_ready_hosts", "Hosts waiting for their next fetch", "ready_hosts"),
    ("crawler_frontier_seen_urls", "URLs ever enqueued (the seen set)", "seen"),
    ("crawler_frontier_due_urls", "Revisits scheduled", "due"),
    ("crawler_frontier_url_records", "URL records (URLs fetched or given up on)", "records"),
    ("crawler_redis_memory_used_bytes", "Redis used_memory of the servers holding the crawl", "memory_used"),
    ("crawler_redis_memory_limit_bytes", "Their memory limit (REDIS_MEMORY_LIMIT or maxmemory; 0: none)",
     "memory_limit"),
    ("crawler_redis_memory_used_ratio", "The fullest server's used memory over its limit (0 to 1)", "memory_share"),
    ("crawler_redis_memory_per_url_record_bytes", "Redis bytes per URL record, fixed costs included",
     "bytes_per_record"),
)


def _deprecated(name: str) -> str:
    return f"Deprecated (until 0.2): use {DEPRECATED[name]}"


class CrawlCollector(Collector):
    """Builds the metric families at scrape time from the worker's stats and the latest frontier figures."""

    def __init__(self, crawl_id: str, stats: Any) -> None:
        self.crawl_id = crawl_id
        self.stats = stats
        self.started = time.monotonic()
        #: The shared frontier's latest figures (None: not read yet).
        self.frontier: FrontierFigures | None = None
        #: Whether this worker exports the crawl-wide gauges (it holds the crawl's lease for it).
        self.crawl_wide = True
        self._history: deque[tuple[float, float]] = deque(maxlen=256)

    def collect(self) -> Iterator[Metric]:
        crawl = self.crawl_id
        stats = dict(self.stats.get_stats())
        totals = totals_from_stats(stats)

        def counter(name: str, help_text: str, value: float) -> CounterMetricFamily:
            family = CounterMetricFamily(name, help_text, labels=["crawl"])
            family.add_metric([crawl], value)
            return family

        def gauge(name: str, help_text: str, value: float) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, help_text, labels=["crawl"])
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
        refused = CounterMetricFamily("crawler_urls_refused", "New URLs not admitted, by reason (memory: Redis "
                                      "memory near its limit)", labels=["crawl", "reason"])
        refused.add_metric([crawl, "memory"], float(stats.get("frontier/refused/memory", 0) or 0))
        yield refused
        cumulative = 0
        buckets = []
        for bound, count in latency_buckets(totals):
            cumulative += count
            buckets.append((bound, float(cumulative)))
        latency = HistogramMetricFamily("crawler_fetch_latency_seconds", "Time to the response headers",
                                        labels=["crawl"])
        latency.add_metric([crawl], buckets, sum_value=totals.get("latency_sum", 0.0))
        yield latency
        yield self._rates(pages)
        frontier = self.frontier
        if frontier is None or not self.crawl_wide:
            return
        for name, help_text, attribute in CRAWL_GAUGES:
            yield gauge(name, help_text, float(getattr(frontier, attribute)))
        per_server = GaugeMetricFamily("crawler_redis_server_memory_used_ratio", "Each server's (cluster "
                                       "primary's) used memory over its limit", labels=["crawl", "server"])
        old_per_server = GaugeMetricFamily("crawler_redis_server_memory_share",
                                           _deprecated("crawler_redis_server_memory_share"), labels=["crawl", "server"])
        for server in frontier.servers:
            per_server.add_metric([crawl, server.server], server.share)
            old_per_server.add_metric([crawl, server.server], server.share)
        yield per_server
        hours = frontier.hours_to_limit()
        if hours is not None:
            yield gauge("crawler_redis_seconds_to_limit", "Seconds until the fullest Redis server reaches its limit "
                        "at the crawl's recent growth", hours * 3600)
        # The deprecated copies.
        yield gauge("crawler_redis_memory_share", _deprecated("crawler_redis_memory_share"), frontier.memory_share)
        yield old_per_server
        yield gauge("crawler_redis_bytes_per_page", _deprecated("crawler_redis_bytes_per_page"),
                    frontier.bytes_per_record)
        if hours is not None:
            yield gauge("crawler_redis_hours_to_limit", _deprecated("crawler_redis_hours_to_limit"), hours)

    def _rates(self, pages: float) -> GaugeMetricFamily:
        """The deprecated in-process rates (Prometheus computes rates from the counters)."""
        now = time.monotonic()
        self._history.append((now, pages))
        while len(self._history) > 1 and now - self._history[0][0] > RECENT_WINDOW:
            self._history.popleft()
        then, before = self._history[0]
        rate = GaugeMetricFamily("crawler_pages_per_second", _deprecated("crawler_pages_per_second"),
                                 labels=["crawl", "window"])
        rate.add_metric([self.crawl_id, "recent"], (pages - before) / (now - then) if now > then else 0.0)
        rate.add_metric([self.crawl_id, "overall"], pages / (now - self.started) if now > self.started else 0.0)
        return rate
