"""Reading response headers: the media type of a ``Content-Type``, and headers kept as ``(name, value)``
pairs (:attr:`crawler.items.PageItem.headers`)."""

from __future__ import annotations

from email.utils import parsedate_to_datetime

#: The media types parsed as HTML (links, text, SimHash, rendering).
HTML_TYPES = ("text/html", "application/xhtml+xml")
_HTML_TYPES_BYTES = tuple(kind.encode() for kind in HTML_TYPES)


def media_type(content_type: bytes | None) -> str:
    """``text/html`` from ``Text/HTML; charset=utf-8``; empty if absent."""
    if not content_type:
        return ""
    return content_type.split(b";", 1)[0].strip().lower().decode("latin-1")


def is_html(content_type: bytes | None) -> bool:
    """Is a ``Content-Type`` header value one of :data:`HTML_TYPES` (any case, any parameters)?"""
    if not content_type:
        return False
    return content_type.split(b";", 1)[0].strip().lower() in _HTML_TYPES_BYTES


def header_value(headers: list[tuple[str, str]], name: str) -> str:
    """The first value of header ``name`` (any case), stripped; "" if absent."""
    lowered = name.lower()
    for key, value in headers:
        if key.lower() == lowered:
            return value.strip()
    return ""


def http_date_epoch(http_date: str) -> int:
    """An HTTP-date (``Last-Modified``, ``If-Modified-Since``) as epoch seconds; 0 if absent or unreadable."""
    if not http_date:
        return 0
    try:
        return int(parsedate_to_datetime(http_date).timestamp())
    except (TypeError, ValueError, IndexError, OverflowError):
        return 0
