"""Reading response headers kept as ``(name, value)`` pairs (:attr:`crawler.items.PageItem.headers`)."""

from __future__ import annotations

from email.utils import parsedate_to_datetime


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
