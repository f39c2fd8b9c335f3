"""``web``: the general crawler. Fetches pages, records them, follows every link.

Usage::

    scrapy crawl web -a seeds=seeds.txt
    scrapy crawl web -a urls=https://a.example/,https://b.example/
    scrapy crawl web            # resume the crawl id's frontier

Every response becomes a :class:`~crawler.items.PageItem`, whatever its status
(the spider sees them all: ``HTTPERROR_ALLOW_ALL``). HTML pages are parsed for
``<a href>`` links, which are followed through the frontier; a redirect's
``Location`` is followed the same way (as a new URL with its own politeness
and seen-check, the way archival crawlers record redirects), not by Scrapy's
redirect middleware. Other content types are recorded but not parsed.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any
from urllib.parse import urljoin

from scrapy import Request, Spider
from scrapy.http import Response

from crawler.bounded import BoundedSet
from crawler.items import PageItem
from crawler.links import LinkExtractor
from crawler.seeds import load_seeds
from crawler.settings_parsing import get_int

logger = logging.getLogger(__name__)

_HTML_TYPES = (b"text/html", b"application/xhtml+xml")
# An http(s) URL made only of RFC 3986 characters and valid percent-escapes.
_ALREADY_SAFE = re.compile(r"https?://(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*\Z")


class WebSpider(Spider):
    name = "web"
    custom_settings = {"HTTPERROR_ALLOW_ALL": True}

    def __init__(self, seeds: str | None = None, urls: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed_urls = load_seeds(seeds, urls)
        self.link_extractor = LinkExtractor()
        self._emitted = BoundedSet(0)
        self.max_redirects = 5

    @classmethod
    def validate_arguments(cls, **kwargs: Any) -> list[str]:
        """Check spider arguments before the crawl starts; returns the seeds (``crawl`` command)."""
        return load_seeds(kwargs.get("seeds"), kwargs.get("urls"))

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> WebSpider:
        spider: WebSpider = super().from_crawler(crawler, *args, **kwargs)
        # URLs this process has already handed to the scheduler: most links on
        # a site repeat (navigation), and skipping them here avoids building a
        # Request for each. The frontier's seen set stays the authority.
        spider._emitted = BoundedSet(get_int(crawler.settings, "WEB_LINK_CACHE_SIZE", 200_000, minimum=0))
        spider.max_redirects = get_int(crawler.settings, "REDIRECT_MAX_TIMES", 5, minimum=0)
        return spider

    async def start(self) -> AsyncIterator[Any]:
        if not self.seed_urls:
            logger.info("No seeds given: continuing the crawl from its frontier")
        for url in self.seed_urls:
            yield Request(url, callback=self.parse)

    def parse(self, response: Response) -> Iterator[Any]:
        headers = response.headers
        content_type = headers.get(b"Content-Type") or b""
        item = PageItem(
            url=response.url,
            status=response.status,
            headers=[
                (name.decode("latin-1"), value.decode("latin-1"))
                for name, values in headers.items()
                for value in values
            ],
            body=response.body,
            content_type=content_type.decode("latin-1"),
            fetched_at=time.time(),
            fetch_duration=response.meta.get("download_latency"),
            depth=response.meta.get("depth", 0),
        )
        depth = item.depth
        if 300 <= response.status < 400:
            location = headers.get(b"Location")
            if location:
                target = urljoin(response.url, location.decode("latin-1").strip())
                item.redirect_to = target
                hops = response.meta.get("redirect_times", 0) + 1
                if hops > self.max_redirects:
                    self.crawler.stats.inc_value("fetch/redirect_limit")
                    logger.info("Not following %s: more than REDIRECT_MAX_TIMES (%d) redirects",
                                target, self.max_redirects)
                else:
                    # A redirect is not a step deeper: the target keeps the depth.
                    yield Request(target, callback=self.parse, meta={"depth": depth, "redirect_times": hops})
        elif content_type.split(b";", 1)[0].strip().lower() in _HTML_TYPES and response.body:
            item.outlinks = self.link_extractor.extract(response.body, response.url)
            yield from self._follow(item.outlinks, depth + 1)
        yield item

    def _follow(self, urls: list[str], depth: int) -> Iterator[Request]:
        """Follow the URLs not followed before by this process.

        With the frontier scheduler they go to it in bulk (no Request per
        link); with any other scheduler they are yielded as Requests.
        """
        emitted = self._emitted
        new = [url for url in urls if url not in emitted]
        if not new:
            return
        for url in new:
            emitted.add(url)
        scheduler = self.crawler.engine.scheduler if self.crawler.engine else None
        enqueue_urls = getattr(scheduler, "enqueue_urls", None)
        if enqueue_urls is not None:
            enqueue_urls(new, depth=depth, callback="parse")
            return
        for url in new:
            meta = {"depth": depth, "verbatim_url": True} if _ALREADY_SAFE.match(url) else {"depth": depth}
            yield Request(url, callback=self.parse, meta=meta)
