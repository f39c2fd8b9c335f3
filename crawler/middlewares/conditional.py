"""Conditional requests for revisits (``If-None-Match``, ``If-Modified-Since``).

A revisit carries the validators of its last capture in ``meta["revisit"]``
(the ETag and the Last-Modified the URL metadata store kept); they become the
request's conditional headers, so an unchanged page costs a ``304 Not
Modified`` and no body. Headers the request already has are left alone.
Counted in ``recrawl/conditional``.
"""

from __future__ import annotations

from email.utils import formatdate
from typing import TYPE_CHECKING, Any, Self

from crawler.requestmeta import REVISIT_META

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler


class ConditionalRequestMiddleware:
    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler.stats)

    def process_request(self, request: Request) -> None:
        revisit = request.meta.get(REVISIT_META)
        if not isinstance(revisit, dict):
            return
        headers = request.headers
        conditional = False
        etag = revisit.get("etag")
        if isinstance(etag, str) and etag and b"If-None-Match" not in headers:
            headers[b"If-None-Match"] = etag.encode("latin-1", "replace")
            conditional = True
        last_modified = revisit.get("lm")
        if isinstance(last_modified, int) and last_modified > 0 and b"If-Modified-Since" not in headers:
            headers[b"If-Modified-Since"] = formatdate(last_modified, usegmt=True).encode("ascii")
            conditional = True
        if conditional:
            self.stats.inc_value("recrawl/conditional")
