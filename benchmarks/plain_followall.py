"""The baseline: a plain Scrapy follow-all spider (run with ``scrapy runspider``).

Nothing of the crawler project is used; the benchmark runs it from a directory
without ``scrapy.cfg`` so that Scrapy's defaults apply, plus the settings the
issue names (``DownloaderAwarePriorityQueue``, one request per domain).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy


class FollowAllSpider(scrapy.Spider):
    name = "followall"

    def __init__(self, seeds: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        with open(seeds) as handle:
            self.seed_urls = [line.strip() for line in handle if line.strip()]

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for url in self.seed_urls:
            yield scrapy.Request(url, callback=self.parse)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
        yield {"url": response.url, "status": response.status}
