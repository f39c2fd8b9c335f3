"""Download counters at a fraction of the cost of Scrapy's ``DownloaderStats``.

Keeps Scrapy's stat names (``downloader/request_count``,
``downloader/response_status_count/<status>``, ``downloader/exception_type_count/<class>``...)
but counts ``downloader/response_bytes`` as the body length only and does not
count request bytes: Scrapy's middleware serializes every request and every
response's headers again just to measure them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector


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
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        inc = self.stats.inc_value
        inc("downloader/exception_count")
        inc(f"downloader/exception_type_count/{type(exception).__module__}.{type(exception).__name__}")
