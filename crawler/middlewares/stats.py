"""Download counters at a fraction of the cost of Scrapy's ``DownloaderStats``.

Keeps Scrapy's stat names (``downloader/request_count``,
``downloader/response_status_count/<status>``, ``downloader/exception_type_count/<class>``...)
but counts ``downloader/response_bytes`` as the body length only and does not
count request bytes: Scrapy's middleware serializes every request and every
response's headers again just to measure them.

It also keeps a histogram of fetch latency (Scrapy's ``download_latency``,
time to the response headers) in the stats: ``downloader/latency_le/<bound>``
counts responses in each bucket (not cumulative), ``downloader/latency_sum``
their total seconds. The progress line, the metrics endpoint and the crawl
report read it from there.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector


#: Upper bounds (s) of the latency buckets; the last bucket is "+Inf".
LATENCY_BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
LATENCY_KEYS = (*(f"downloader/latency_le/{bound:g}" for bound in LATENCY_BOUNDS), "downloader/latency_le/+Inf")


class FetchStats:
    def __init__(self, stats: StatsCollector) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        assert crawler.stats is not None
        return cls(crawler.stats)

    def process_request(self, request: Request) -> None:
        self.stats.inc_value("downloader/request_count")

    def process_response(self, request: Request, response: Response) -> Response:
        inc = self.stats.inc_value
        inc("downloader/response_count")
        inc(f"downloader/response_status_count/{response.status}")
        inc("downloader/response_bytes", len(response.body))
        latency = request.meta.get("download_latency")
        if latency is not None:
            inc(LATENCY_KEYS[bisect_left(LATENCY_BOUNDS, latency)])
            inc("downloader/latency_sum", latency)
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        inc = self.stats.inc_value
        inc("downloader/exception_count")
        inc(f"downloader/exception_type_count/{type(exception).__module__}.{type(exception).__name__}")
