"""The page: what the crawler records of every fetch (:func:`page_item` builds it from a response)."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from crawler.requestmeta import ORIGINAL_ENCODING_AT_META, ORIGINAL_ENCODING_META, RENDERED_META, REVISIT_META

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

_REASONS = {status.value: status.phrase for status in HTTPStatus}


class FeedBody(StrEnum):
    """How a page's body is written to feed exports (``WEB_FEED_PAGE_BODY``)."""

    OMIT = "omit"
    TEXT = "text"
    BASE64 = "base64"


def _omit(body: bytes) -> None:
    return None


def _text(body: bytes) -> str:
    return body.decode("utf-8", "replace")


def _base64(body: bytes) -> str:
    return base64.b64encode(body).decode("ascii")


_SERIALIZERS: dict[FeedBody, Callable[[bytes], str | None]] = {
    FeedBody.OMIT: _omit, FeedBody.TEXT: _text, FeedBody.BASE64: _base64,
}
_FEED_BODY: Callable[[bytes], str | None] = _omit


def _serialize_body(body: bytes) -> str | None:
    return _FEED_BODY(body)


def _serialize_optional_body(body: bytes | None) -> str | None:
    return None if body is None else _FEED_BODY(body)


def set_feed_body(mode: FeedBody) -> None:
    """How this process's feed exports write page bodies (set from ``WEB_FEED_PAGE_BODY`` when a crawl opens)."""
    global _FEED_BODY
    _FEED_BODY = _SERIALIZERS[mode]


@dataclass(slots=True)
class PageItem:
    """One fetched resource (any status, any content type).

    ``headers`` keeps every response header as ``(name, value)`` pairs in the
    order received, ``Content-Encoding`` included; ``body`` is the payload as
    the downloader delivered it (decompressed if it came with
    ``original_encoding``, that header's value). ``outlinks`` are the
    absolute links found in HTML. ``canonical_url`` is the page's
    rel="canonical", normalized; ``primary`` is False when the page names
    another URL of the same registered domain as its canonical (that URL is
    crawled as the primary copy). ``text`` and ``simhash`` come from the text
    module; ``payload_digest``, ``duplicate_of`` (first capture: URL, WARC
    date) and ``near_duplicate_of`` from the dedup pipeline; ``changed``,
    ``observations``, ``changes``, ``first_fetch``, ``previous_fetch``,
    ``inlinks`` and ``next_visit`` from the URL metadata store.
    """

    url: str
    status: int
    headers: list[tuple[str, str]]
    #: Feed exports write it as ``WEB_FEED_PAGE_BODY`` says (:func:`set_feed_body`).
    body: bytes = field(metadata={"serializer": _serialize_body})
    content_type: str
    fetched_at: float
    fetch_duration: float | None
    depth: int
    outlinks: list[str] = field(default_factory=list)
    redirect_to: str | None = None
    canonical_url: str | None = None
    primary: bool = True
    # -- the exchange, for the WARC records
    method: str = "GET"
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    protocol: str = "HTTP/1.1"
    reason: str = ""
    ip_address: str | None = None
    original_encoding: str | None = None
    # -- modules and pipelines
    text: str | None = None
    simhash: int | None = None
    payload_digest: str | None = None
    duplicate_of: tuple[str, str] | None = None
    #: A 304 answer to a conditional revisit: the WARC date of the capture it revalidates.
    revalidated: str | None = None
    near_duplicate_of: str | None = None
    near_distance: int | None = None
    changed: bool | None = None
    observations: int = 0
    changes: int = 0
    #: Crawl-clock seconds of this URL's first observation and of the fetch before this one (0: none).
    first_fetch: int = 0
    previous_fetch: int = 0
    #: Links to this URL the crawl has found so far (the in-link sketch's estimate).
    inlinks: int = 0
    #: The fetch's time in the crawl clock (:mod:`crawler.policy.clock`), set by the metadata pipeline.
    crawl_time: float = 0.0
    #: Crawl-clock seconds of the URL's next visit, planned as the metadata store recorded this fetch
    #: (the recrawl pipeline's policy); 0: none.
    next_visit: int = 0
    #: Set by a page module for resources it fetched (e.g. "png").
    module: str | None = None
    #: The spider callback that made the item ("parse", "parse_sitemap", "parse_resource").
    callback: str = "parse"
    #: The DOM after the page was rendered in a browser (UTF-8 HTML; None: not rendered).
    rendered_html: bytes | None = field(default=None, metadata={"serializer": _serialize_optional_body})
    #: Archived as an exchange only (its WARC records, duplicates): not part of its URL's history nor of
    #: its host's quality, never revisited (a robots.txt answer).
    record_only: bool = False


def _pairs(headers: Any) -> list[tuple[str, str]]:
    # dict.items: Scrapy's Headers keeps each name's list of values as they are (its own items()
    # would look each name up again, three times the cost).
    return [(name.decode("latin-1"), value.decode("latin-1"))
            for name, values in dict.items(headers) for value in values]


def page_item(response: Response, request: Request | None = None) -> PageItem:
    """The page of ``response``: the exchange as fetched (modules and pipelines fill in the rest).
    ``request``: the request it answers, where the response does not say it yet (a downloader middleware)."""
    headers = response.headers
    content_type = headers.get(b"Content-Type") or b""
    request = request or response.request
    meta = response.meta
    pairs = _pairs(headers)
    decoded = meta.get(ORIGINAL_ENCODING_META)
    if decoded:
        # The body was decoded and Scrapy deleted the header: back where the server sent it.
        at = meta.get(ORIGINAL_ENCODING_AT_META, len(pairs))
        pairs[at:at] = [("Content-Encoding", value) for value in decoded]
    item = PageItem(
        url=response.url,
        status=response.status,
        headers=pairs,
        body=response.body,
        content_type=content_type.decode("latin-1"),
        fetched_at=time.time(),
        fetch_duration=meta.get("download_latency"),
        depth=meta.get("depth", 0),
        method=request.method if request else "GET",
        request_headers=_pairs(request.headers) if request else [],
        protocol=response.protocol or "HTTP/1.1",
        reason=_REASONS.get(response.status, ""),
        ip_address=str(response.ip_address) if response.ip_address else None,
        original_encoding=", ".join(decoded) if decoded else None,
    )
    rendered = meta.get(RENDERED_META)
    if rendered is not None:
        item.rendered_html = rendered.html
    if response.status == 304:
        revisit = meta.get(REVISIT_META)
        if isinstance(revisit, dict) and isinstance(revisit.get("date"), str):
            item.revalidated = revisit["date"]
    return item
