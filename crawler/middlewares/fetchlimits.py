"""Bounded cost per fetch: content types, sizes, decompression bombs.

* **Content type** (``FETCH_ALLOWED_CONTENT_TYPES``: every type by default, HTML and XHTML for the web spider):
  when the headers of a response arrive with a ``Content-Type`` outside the
  list, the download stops there (Scrapy's ``StopDownload``): the response
  reaches the spider with the headers and the few bytes already read, flagged
  ``download_stopped``, and is recorded without being parsed. A ``.html`` URL
  serving gigabytes of ``application/octet-stream`` costs one read. A missing
  Content-Type is allowed (the page is sniffed by the parser). robots.txt
  and sitemap fetches are always allowed. Counted in ``fetch/content_type_skipped``.
* **Size**: Scrapy's ``DOWNLOAD_MAXSIZE`` aborts a body while it streams (and
  a declared ``Content-Length`` over it before reading); counted in
  ``fetch/size_exceeded`` by the retry middleware, never retried.
  ``DOWNLOAD_WARNSIZE``: counted in ``fetch/size_warning``.
* **Decompression**: a gzip/deflate/br/zstd body is decompressed at most to
  ``DOWNLOAD_MAXSIZE``; a bomb is dropped and counted in
  ``fetch/decompression_bomb`` (:class:`BoundedHttpCompressionMiddleware`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import IgnoreRequest, StopDownload
from scrapy.http import Response

from crawler.httpheaders import HTML_TYPES, media_type
from crawler.requestmeta import (
    EXPECTED_TYPES_META,
    ORIGINAL_ENCODING_AT_META,
    ORIGINAL_ENCODING_META,
    ROBOTS_META,
    SITEMAP_META,
)
from crawler.settings_parsing import get_int, get_list

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Headers
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

DEFAULT_CONTENT_TYPES = HTML_TYPES


class FetchLimitsMiddleware:
    def __init__(self, allowed_types: frozenset[str], warn_size: int, stats: StatsCollector) -> None:
        self.allowed_types = allowed_types
        self.warn_size = warn_size
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        types = get_list(settings, "FETCH_ALLOWED_CONTENT_TYPES")
        assert crawler.stats is not None
        middleware = cls(
            frozenset(t.strip().lower() for t in types if t.strip()),
            get_int(settings, "DOWNLOAD_WARNSIZE", minimum=0),
            crawler.stats,
        )
        crawler.signals.connect(middleware._headers_received, signal=signals.headers_received)
        return middleware

    def _headers_received(self, headers: Headers, body_length: int, request: Request, spider: Any = None) -> None:
        meta = request.meta
        if ROBOTS_META in meta or SITEMAP_META in meta:
            return
        kind = media_type(headers.get(b"Content-Type"))
        if self.allowed_types and kind and kind not in self.allowed_types \
                and kind not in meta.get(EXPECTED_TYPES_META, ()):
            self.stats.inc_value("fetch/content_type_skipped")
            logger.debug("Not downloading %s body of %s", kind, request.url)
            raise StopDownload(fail=False)

    def process_response(self, request: Request, response: Response) -> Response:
        if self.warn_size and len(response.body) >= self.warn_size:
            self.stats.inc_value("fetch/size_warning")
        return response


class BoundedHttpCompressionMiddleware(HttpCompressionMiddleware):
    """Scrapy's decompression, which stops at ``DOWNLOAD_MAXSIZE``, plus a counter."""

    stats: StatsCollector

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        middleware = super().from_crawler(crawler)
        assert crawler.stats is not None
        middleware.stats = crawler.stats
        return middleware

    def process_response(self, request: Request, response: Response, spider: Any = None) -> Request | Response:
        sent = response.headers.getlist(b"Content-Encoding")
        # Where the header stood among the response's (name, value) pairs: Scrapy deletes it once
        # the body is decoded, and the page item puts it back there (the WARC keeps headers as sent).
        at = _pair_index(response.headers, b"Content-Encoding") if sent else 0
        try:
            result = super().process_response(request, response)
        except IgnoreRequest:
            self.stats.inc_value("fetch/decompression_bomb")
            raise
        if sent and isinstance(result, Response) and result.headers.getlist(b"Content-Encoding") != sent:
            request.meta[ORIGINAL_ENCODING_META] = [value.decode("latin-1") for value in sent]
            request.meta[ORIGINAL_ENCODING_AT_META] = at
        else:
            # Not decoded (no header, HEAD, an unknown coding): stored as received. A retry's copy
            # of the request must not carry an earlier answer's coding either.
            request.meta.pop(ORIGINAL_ENCODING_META, None)
            request.meta.pop(ORIGINAL_ENCODING_AT_META, None)
        return result


def _pair_index(headers: Headers, name: bytes) -> int:
    """The position of ``name``'s first value among the (name, value) pairs of ``headers``."""
    at = 0
    for key, values in dict.items(headers):
        if key == name:
            return at
        at += len(values)
    return at
