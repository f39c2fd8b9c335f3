"""Every response any spider receives is archived, whatever the spider yields (``ARCHIVE_RESPONSES``).

A spider middleware, outermost (it sees a callback's output last, after
Scrapy's HTTP error, offsite and depth middlewares). The ``web`` spider
yields a :class:`~crawler.items.PageItem` per response, which the archive
stages process as an item pipeline. For a response whose output holds no
page (a team's spider yielding dicts, Items, requests or nothing; a response
Scrapy's HTTP error middleware kept from the callback), this middleware
builds the page from the response (its visible text and SimHash too, for
near-duplicates, if it is HTML) and runs it through the crawl's
:class:`~crawler.archiving.Archive` once the callback's output has gone by,
still within the response's processing, so the request's lease is acked only
once its response is archived. The page
never reaches the spider's own pipelines or feeds.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import NotConfigured
from selectolax.lexbor import LexborHTMLParser

from crawler.archiving import Archive
from crawler.dedup.text import content_simhash, visible_text
from crawler.httpheaders import is_html
from crawler.items import PageItem, page_item
from crawler.requestmeta import ROBOTS_META
from crawler.settings_parsing import get_bool, get_int

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)


class ArchiveMiddleware:
    def __init__(self, archive: Archive, stats: StatsCollector, max_words: int, min_block_words: int = 10) -> None:
        self.archive = archive
        self.stats = stats
        self.max_words = max_words
        self.min_block_words = min_block_words

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not get_bool(crawler.settings, "ARCHIVE_RESPONSES"):
            raise NotConfigured
        assert crawler.stats is not None
        settings = crawler.settings
        return cls(Archive.for_crawler(crawler), crawler.stats, get_int(settings, "DEDUP_MAX_WORDS", minimum=1),
                   get_int(settings, "DEDUP_MIN_BLOCK_WORDS", minimum=0))

    async def process_spider_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        paged = False
        try:
            async for entry in result:
                if isinstance(entry, PageItem):
                    paged = True
                yield entry
        except Exception:
            # A callback that fails: what was fetched is archived all the same.
            if not paged:
                await self._archive(response)
            raise
        # Still within the response's processing: its lease is acked after this.
        if not paged:
            await self._archive(response)

    async def _archive(self, response: Response) -> None:
        if self.archive.stages and ROBOTS_META not in response.meta:
            await self.archive.process(self.page(response))
            self.stats.inc_value("archive/responses")

    def page(self, response: Response) -> PageItem:
        """The page of a response no callback made a page of."""
        item = page_item(response)
        item.callback = "response"
        if is_html(response.headers.get(b"Content-Type")) and response.body:
            tree = LexborHTMLParser(response.body)
            text = visible_text(tree)
            item.text = text
            item.simhash = content_simhash(tree, text, self.max_words, self.min_block_words)
        return item
