"""Scrapy's redirect middlewares, with every hop archived (``ARCHIVE_RESPONSES``).

Scrapy's :class:`~scrapy.downloadermiddlewares.redirect.RedirectMiddleware`
and :class:`~scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware`
turn a 301, 302, 303, 307 or 308 with a ``Location`` (or a page with a
``<meta http-equiv="refresh">``) into the next request: the answer never
reaches a spider callback, so the archive's spider middleware would never
see it, and a web archive without its redirects cannot replay them. These
subclasses keep Scrapy's behaviour and settings (``REDIRECT_ENABLED``,
``REDIRECT_MAX_TIMES``, ``METAREFRESH_*``, ``dont_redirect``,
``handle_httpstatus_list``) exactly, and archive each answer they consume
(its request and response records, the URL's history) before the next hop
goes out; a hop past ``REDIRECT_MAX_TIMES`` is archived too. The add-on puts
them in the place of Scrapy's; the ``web`` spider, which follows redirects
itself, turns both off.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Self

from scrapy import Request
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware, RedirectMiddleware
from scrapy.exceptions import IgnoreRequest

from crawler.archiving import Archive, archive_answer
from crawler.settings_parsing import get_bool

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class _ArchivingHops:
    """What both middlewares add to Scrapy's: the answer they consume, archived (mixed in before Scrapy's)."""

    archive: Archive | None = None
    crawler: Crawler
    kind = "redirect"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        middleware = super().from_crawler(crawler)  # type: ignore[misc]
        if get_bool(crawler.settings, "ARCHIVE_RESPONSES"):
            middleware.archive = Archive.for_crawler(crawler)
        return middleware  # type: ignore[no-any-return]

    async def process_response(self, request: Request, response: Response) -> Request | Response:
        try:
            result = super().process_response(request, response)  # type: ignore[misc]
        except IgnoreRequest:  # past REDIRECT_MAX_TIMES: the answer came all the same
            await self._hop(request, response)
            raise
        if isinstance(result, Request):
            await self._hop(request, response)
        return result  # type: ignore[no-any-return]

    async def _hop(self, request: Request, response: Response) -> None:
        if self.archive is not None:
            await archive_answer(self.archive, response, request, self.kind)
            assert self.crawler.stats is not None
            self.crawler.stats.inc_value(f"archive/{self.kind}")


class ArchivingRedirectMiddleware(_ArchivingHops, RedirectMiddleware):  # type: ignore[misc]
    pass


class ArchivingMetaRefreshMiddleware(_ArchivingHops, MetaRefreshMiddleware):  # type: ignore[misc]
    kind = "meta_refresh"
