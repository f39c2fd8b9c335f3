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

from typing import TYPE_CHECKING, Any, Self

from scrapy import Request
from scrapy.downloadermiddlewares.redirect import MetaRefreshMiddleware, RedirectMiddleware
from scrapy.exceptions import IgnoreRequest

from crawler.archiving import Archive, archive_answer
from crawler.settings_parsing import get_bool

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.http import Response


class _ArchivingHops:
    """What both middlewares add to Scrapy's: the answer they consume, archived."""

    archive: Archive | None = None
    kind = "redirect"

    def _join(self, crawler: Crawler) -> None:
        if get_bool(crawler.settings, "ARCHIVE_RESPONSES"):
            self.archive = Archive.for_crawler(crawler)

    async def _hop(self, request: Request, response: Response, result: Any) -> None:
        if isinstance(result, Request) and self.archive is not None:
            await archive_answer(self.archive, response, request, self.kind)
            crawler: Crawler = self.crawler  # type: ignore[attr-defined]
            assert crawler.stats is not None
            crawler.stats.inc_value(f"archive/{self.kind}")


class ArchivingRedirectMiddleware(_ArchivingHops, RedirectMiddleware):
    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        middleware = super().from_crawler(crawler)
        middleware._join(crawler)
        return middleware

    async def process_response(self, request: Request, response: Response) -> Request | Response:  # type: ignore[override]
        try:
            result = super().process_response(request, response)
        except IgnoreRequest:  # past REDIRECT_MAX_TIMES: the answer came all the same
            await self._hop(request, response, request)
            raise
        await self._hop(request, response, result)
        return result


class ArchivingMetaRefreshMiddleware(_ArchivingHops, MetaRefreshMiddleware):
    kind = "meta_refresh"

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        middleware = super().from_crawler(crawler)
        middleware._join(crawler)
        return middleware

    async def process_response(self, request: Request, response: Response) -> Request | Response:  # type: ignore[override]
        try:
            result = super().process_response(request, response)
        except IgnoreRequest:
            await self._hop(request, response, request)
            raise
        await self._hop(request, response, result)
        return result
