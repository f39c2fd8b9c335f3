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

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.settings import default_settings
from selectolax.lexbor import LexborHTMLParser

from crawler.bounded import BoundedSet
from crawler.exceptions import ConfigurationError
from crawler.frontier import FrontierContext
from crawler.httpheaders import is_html
from crawler.items import FeedBody, page_item, set_feed_body
from crawler.modules.base import Follow, Page, PageModule, build_modules
from crawler.policy.recrawl import RecrawlMode
from crawler.requestmeta import (
    FROM_SITEMAP_META,
    MODULE_META,
    SITEMAP_LASTMOD_META,
    VERBATIM_URL_META,
)
from crawler.seeds import iter_seeds, seed_hosts
from crawler.settings_parsing import get_choice, get_dict, get_int
from crawler.sitemaps import (
    SitemapContent,
    SitemapError,
    SitemapKind,
    SitemapSettings,
    parse_sitemap,
    sitemap_meta,
)
from crawler.urls import UrlError, clean_reference, normalize_url
from crawler.urls.domains import RegisteredDomains
from crawler.urls.filters import BROAD_CRAWL_DENY_EXTENSIONS

logger = logging.getLogger(__name__)

DEFAULT_MODULES = {
    "crawler.modules.links.LinksModule": 100,
    "crawler.modules.png.PngImagesModule": 200,
    "crawler.modules.text.TextModule": 900,
}


#: Seeds handed to the frontier's intake at once (and at most waiting in it).
SEED_BATCH = 10_000

# An http(s) URL made only of RFC 3986 characters and valid percent-escapes.
_ALREADY_SAFE = re.compile(r"https?://(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*\Z")


class WebSpider(Spider):
    name = "web"
    #: A broad crawl's choices, beside the crawler add-on's (which leaves Scrapy's behaviour to other spiders).
    custom_settings = {
        # Every status reaches the callback and is recorded.
        "HTTPERROR_ALLOW_ALL": True,
        # A broad crawl's URLs out of retries are counted (retry/max_reached) and dead-lettered, not
        # errors: a crawl of millions of pages meets thousands of dead servers.
        "RETRY_GIVE_UP_LOG_LEVEL": "INFO",
        # Broad crawls do not keep sessions.
        "COOKIES_ENABLED": False,
        # Redirects are recorded and followed as new URLs by the spider, through
        # the frontier (robots.txt, politeness, seen set), not re-fetched at once
        # by the middleware; REDIRECT_MAX_TIMES still bounds a chain.
        "REDIRECT_ENABLED": False,
        "METAREFRESH_ENABLED": False,
        "REDIRECT_MAX_TIMES": 5,
        # HTML is parsed for links; other types are recorded (their head) but not downloaded.
        "FETCH_ALLOWED_CONTENT_TYPES": ["text/html", "application/xhtml+xml"],
        # Media, archives and documents are not enqueued (a page module can ask for its types).
        "URL_DENY_EXTENSIONS": list(BROAD_CRAWL_DENY_EXTENSIONS),
        # Every middleware costs time on every page. Scope is the crawler's own
        # (URL filters, budgets), the spider handles every status and sets the
        # depth of its requests, and URL limits are the crawler's filters.
        "DOWNLOADER_MIDDLEWARES": {
            "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
            "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,
        },
        # (Those of the running Scrapy: MetaCopyDetectionMiddleware came with 2.18.)
        "SPIDER_MIDDLEWARES": {
            name: None for name in (
                "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware",
                "scrapy.spidermiddlewares.referer.RefererMiddleware",
                "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware",
                "scrapy.spidermiddlewares.depth.DepthMiddleware",
                "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware",
            ) if name in default_settings.SPIDER_MIDDLEWARES_BASE
        },
    }

    def __init__(self, seeds: str | None = None, urls: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if seeds is not None and not Path(seeds).is_file():
            raise ConfigurationError("seeds", f"seeds file {seeds!r} does not exist")
        #: The seeds file and URLs given, read as a stream when the crawl starts (``crawler.seeds``).
        self.seed_sources = (seeds, urls)
        self.domains = RegisteredDomains.shared()
        self.modules: list[PageModule] = []
        self._emitted = BoundedSet(0)
        self.max_redirects = 5
        self.sitemaps = SitemapSettings()

    @classmethod
    def validate_arguments(cls, **kwargs: Any) -> list[str]:
        """Check spider arguments before the crawl starts (``crawl`` command): every seed, read as a
        stream; returns the first seed of each host."""
        if kwargs.get("mode") is not None:
            RecrawlMode.parse(kwargs["mode"], "mode (spider argument)")
        return seed_hosts(kwargs.get("seeds"), kwargs.get("urls"))

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> WebSpider:
        spider: WebSpider = super().from_crawler(crawler, *args, **kwargs)
        # URLs this process has already handed to the scheduler: most links on
        # a site repeat (navigation), and skipping them here avoids building a
        # Request for each. The frontier's seen set stays the authority.
        spider._emitted = BoundedSet(get_int(crawler.settings, "WEB_LINK_CACHE_SIZE", minimum=0))
        spider.max_redirects = get_int(crawler.settings, "REDIRECT_MAX_TIMES", minimum=0)
        spider.sitemaps = SitemapSettings.from_settings(crawler.settings)
        set_feed_body(get_choice(crawler.settings, "WEB_FEED_PAGE_BODY", FeedBody))
        modules = get_dict(crawler.settings, "WEB_PAGE_MODULES")
        spider.modules = build_modules(crawler, [path for path, order in sorted(modules.items(), key=lambda kv: kv[1])
                                                 if order is not None])
        return spider

    async def start(self) -> AsyncIterator[Any]:
        if self.seed_sources == (None, None):
            logger.info("No seeds given: continuing the crawl from its frontier")
            return
        intake = FrontierContext.for_crawler(self.crawler).intake
        if intake is None:
            for url in iter_seeds(*self.seed_sources):
                yield Request(url, callback=self.parse)
            return
        # Through the frontier's intake in batches, the file read as a stream: a list of millions
        # of seeds is never held whole; each batch waits until the frontier has taken the last one.
        batch: list[str] = []
        for url in iter_seeds(*self.seed_sources):
            batch.append(url)
            if len(batch) >= SEED_BATCH:
                await self._hand_seeds(intake, batch)
                batch = []
        if batch:
            await self._hand_seeds(intake, batch)

    async def _hand_seeds(self, intake: Any, urls: list[str]) -> None:
        while intake.pending() >= SEED_BATCH:
            await asyncio.sleep(0.05)
        intake.urls(urls, depth=0)

    def parse(self, response: Response) -> Iterator[Any]:
        item = page_item(response)
        headers = response.headers
        content_type = headers.get(b"Content-Type") or b""
        depth = item.depth
        if 300 <= response.status < 400:
            location = headers.get(b"Location")
            if location:
                target = urljoin(response.url, clean_reference(location.decode("latin-1")))
                item.redirect_to = target
                hops = response.meta.get("redirect_times", 0) + 1
                if hops > self.max_redirects:
                    self.crawler.stats.inc_value("fetch/redirect_limit")
                    logger.info("Not following %s: more than REDIRECT_MAX_TIMES (%d) redirects",
                                target, self.max_redirects)
                else:
                    # A redirect is not a step deeper: the target keeps the depth.
                    yield Request(target, callback=self.parse, meta={"depth": depth, "redirect_times": hops})
        elif is_html(content_type) and response.body:
            # A page the render middleware rendered: its links and text come from the rendered DOM.
            page = Page(response, LexborHTMLParser(item.rendered_html or response.body), item)
            for module in self.modules:
                for out in module.process(page):
                    if type(out) is Follow:
                        yield from self._follow(out.urls, out.depth, callback=out.callback, priority=out.priority,
                                                meta=out.meta)
                    else:
                        yield out
            # The parsed tree (C memory, far larger than the page) is let go before the item is
            # handed on: the item pipelines may take a while, and this frame waits for them.
            del page
        yield item

    def parse_resource(self, response: Response) -> Iterator[Any]:
        """A resource a page module asked for (an image...): recorded, not parsed."""
        item = page_item(response)
        item.module = response.meta.get(MODULE_META)
        item.callback = "parse_resource"
        yield item

    def parse_sitemap(self, response: Response) -> Iterator[Any]:
        """A sitemap (listed in robots.txt): follow its sitemaps or its URLs, with their lastmod."""
        item = page_item(response)
        item.callback = "parse_sitemap"
        stats = self.crawler.stats
        if response.status == 200 and response.body:
            try:
                content = parse_sitemap(response.body, self.sitemaps.max_urls, self.sitemaps.max_bytes)
            except SitemapError as exc:
                stats.inc_value("sitemaps/invalid")
                logger.info("Not a usable sitemap: %s (%s)", response.url, exc)
            else:
                stats.inc_value(f"sitemaps/{content.kind}")
                if content.truncated:
                    stats.inc_value("sitemaps/truncated")
                yield from self._sitemap_entries(response, content)
        yield item

    def _sitemap_entries(self, response: Response, content: SitemapContent) -> Iterator[Request]:
        if content.kind is SitemapKind.INDEX:
            children = [entry.loc for entry in content.entries]
            child_meta = sitemap_meta(self.sitemaps.max_bytes)
            yield from self._follow(
                children, 0, callback="parse_sitemap", priority=self.sitemaps.priority, meta=child_meta
            )
            return
        try:
            home = self.domains(normalize_url(response.url)[1])
        except UrlError:
            return
        by_lastmod: dict[str | None, list[str]] = {}
        for entry in content.entries:
            try:
                host = normalize_url(entry.loc)[1]
            except UrlError:
                self.crawler.stats.inc_value("sitemaps/bad_url")
                continue
            if self.domains(host) != home:
                # The protocol: a sitemap lists URLs of its own site only.
                self.crawler.stats.inc_value("sitemaps/foreign_url")
                continue
            by_lastmod.setdefault(entry.lastmod, []).append(entry.loc)
        for lastmod, urls in by_lastmod.items():
            self.crawler.stats.inc_value("sitemaps/urls", len(urls))
            meta: dict[str, Any] = {FROM_SITEMAP_META: True}
            if lastmod:
                meta[SITEMAP_LASTMOD_META] = lastmod
            yield from self._follow(urls, 1, priority=self.sitemaps.priority, meta=meta, exact_seen=True, fresh=True)

    def _follow(
        self,
        urls: list[str],
        depth: int,
        *,
        callback: str = "parse",
        priority: int = 0,
        meta: dict[str, Any] | None = None,
        exact_seen: bool = False,
        fresh: bool = False,
    ) -> Iterator[Request]:
        """Follow the URLs not followed before by this process (all of them if ``fresh``).

        With the frontier scheduler they go to it in bulk (no Request per
        link); with any other scheduler they are yielded as Requests.
        """
        emitted = self._emitted
        new = urls if fresh else [url for url in urls if url not in emitted]
        if not new:
            return
        for url in new:
            emitted.add(url)
        intake = FrontierContext.for_crawler(self.crawler).intake
        if intake is not None:
            intake.urls(new, depth=depth, callback=callback, priority=priority, meta=meta, exact_seen=exact_seen)
            return
        method = getattr(self, callback)
        for url in new:
            request_meta = {"depth": depth, **(meta or {})}
            if _ALREADY_SAFE.match(url):
                request_meta[VERBATIM_URL_META] = True
            yield Request(url, callback=method, priority=priority, meta=request_meta)
