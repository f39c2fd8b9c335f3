"""The archive of a crawl: the stages every fetched page goes through, whatever the spider yields.

The archive stages are item pipelines (dedup, WARC, URL metadata, recrawl:
``ITEM_PIPELINES``), opened and closed by Scrapy with the others. Each one
joins its crawl's :class:`Archive` when it is built, so a page can go through
them in their pipeline order two ways: as a :class:`~crawler.items.PageItem`
a spider yields (the ``web`` spider's pages), or, for a response whose
callback yields none (any other spider's: dicts, Items, nothing),
through :class:`~crawler.middlewares.archive.ArchiveMiddleware`, which builds
the page from the response and hands it to :meth:`Archive.process`. Answers
no callback sees are archived where they end (:func:`archive_answer`): a
redirect hop by the redirect middlewares, robots.txt by the robots.txt
middleware. A team's own pipelines and feeds never see those pages.
"""

from __future__ import annotations

import inspect
import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import DropItem
from scrapy.utils.misc import load_object

from crawler.items import page_item
from crawler.percrawler import PerCrawler

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from crawler.items import PageItem

logger = logging.getLogger(__name__)

class Archive:
    def __init__(self, order: dict[type, int]) -> None:
        self._order = order
        self.stages: list[Any] = []

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> Archive:
        return _archives(crawler)

    def join(self, stage: Any) -> None:
        """A stage (an item pipeline with ``process_item``) joins, in its ``ITEM_PIPELINES`` order."""
        self.stages.append(stage)
        self.stages.sort(key=lambda s: self._order.get(type(s), 0))

    async def process(self, page: PageItem) -> PageItem | None:
        """Run ``page`` through every stage; ``None`` if a stage dropped it."""
        for stage in self.stages:
            try:
                result = stage.process_item(page)
                page = await result if inspect.isawaitable(result) else result
            except DropItem as exc:
                logger.debug("Archive: %s dropped %s (%s)", type(stage).__name__, page.url, exc)
                return None
        return page


def _archive_of(crawler: Crawler) -> Archive:
    order: dict[type, int] = {}
    for path, number in crawler.settings.getwithbase("ITEM_PIPELINES").items():
        if number is not None:
            order[load_object(path) if isinstance(path, str) else path] = int(number)
    return Archive(order)


_archives: PerCrawler[Archive] = PerCrawler(_archive_of)


async def archive_answer(archive: Archive, response: Response, request: Request, callback: str, *,
                         record_only: bool = False) -> None:
    """An answer no spider callback sees (a redirect hop, robots.txt), archived as it came: its
    request and response records (or a revisit); ``record_only``: not in its URL's history."""
    if not archive.stages:
        return
    if response.request is None:
        response.request = request  # (the engine sets it after the downloader middlewares; the page reads it)
    page = page_item(response, request)
    page.callback = callback
    page.record_only = record_only
    await archive.process(page)
