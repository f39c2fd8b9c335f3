"""Pure helpers of the lean client's exchanges: request targets, response headers, the peer's
address and certificate, the ``bytes_received`` hook, transfer codings (no I/O of their own)."""

from __future__ import annotations

import ipaddress
import re
import zlib
from typing import TYPE_CHECKING, cast
from urllib.parse import quote

from scrapy import signals
from scrapy.exceptions import StopDownload
from scrapy.http import Headers

from crawler.scrapy_internals import check_stop_download

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler

    from crawler.downloader import http11

#: zlib window bits per transfer coding the lean client decodes (gzip header, zlib header, or either).
TRANSFER_WBITS = {b"gzip": 31, b"x-gzip": 31, b"deflate": 47}
#: Characters a request target may carry as they are (RFC 3986 plus ``%``).
UNSAFE_TARGET = re.compile(r"[^A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]")


def decode_transfer(body: bytes, codings: list[bytes], maxsize: int) -> bytes:
    """Undo the transfer codings besides ``chunked`` (``gzip``, ``deflate``), last applied first.

    Returns at most ``maxsize + 1`` bytes (0: no limit), so the caller can
    tell a body over its limit. Raises ``KeyError`` for a coding it cannot
    undo, ``zlib.error`` for a body that is not what its coding says.
    """
    for coding in reversed(codings):
        decoder = zlib.decompressobj(TRANSFER_WBITS[coding])
        body = decoder.decompress(body, maxsize + 1 if maxsize else 0)
    return body


def request_target(path: str, query: str) -> str:
    """The request target (origin form) of a URL's path and query, any unsafe character escaped."""
    target = path or "/"
    if query:
        target = f"{target}?{query}"
    if UNSAFE_TARGET.search(target) is not None:
        target = quote(target, safe="-._~:/?#[]@!$&'()*+,;=%")
    return target


def response_headers(pairs: list[tuple[bytes, bytes]]) -> Headers:
    """Scrapy ``Headers`` from received pairs, without re-normalizing every value."""
    grouped: dict[bytes, list[bytes]] = {}
    for name, value in pairs:
        key = name.title()
        values = grouped.get(key)
        if values is None:
            grouped[key] = [value]
        else:
            values.append(value)
    headers = Headers()
    dict.update(headers, grouped)
    return headers


class BytesReceived:
    """Per piece of a body: the ``bytes_received`` signal (``signal``: when anything listens), and
    the request's body limit (``limit`` bytes, 0: none). Keeps the ``StopDownload`` that ends it."""

    __slots__ = ("crawler", "limit", "received", "request", "signal", "stop")

    def __init__(self, crawler: Crawler, request: Request, *, signal: bool = True, limit: int = 0) -> None:
        self.crawler = crawler
        self.request = request
        self.signal = signal
        self.limit = limit
        self.received = 0
        self.stop: StopDownload | None = None

    def __call__(self, data: bytes) -> bool:
        if self.signal:
            self.stop = check_stop_download(signals.bytes_received, self.crawler, self.request, data=data)
            if self.stop is not None:
                return True
        self.received += len(data)
        if self.limit and self.received > self.limit:
            self.stop = StopDownload(fail=False)
            return True
        return False


_ADDRESSES: dict[str, ipaddress.IPv4Address | ipaddress.IPv6Address] = {}


def peer_address(peer: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The peer's address as an ``ipaddress`` object (memoized, at most 10,000)."""
    if peer is None:
        return None
    address = _ADDRESSES.get(peer)
    if address is None:
        address = ipaddress.ip_address(peer.split("%", 1)[0])
        if len(_ADDRESSES) >= 10_000:
            _ADDRESSES.clear()
        _ADDRESSES[peer] = address
    return address


def peer_certificate(connection: http11.HttpConnection) -> bytes | None:
    transport = connection.transport
    if transport is None:
        return None
    ssl_object = transport.get_extra_info("ssl_object")
    if ssl_object is None:
        return None
    return cast("bytes | None", ssl_object.getpeercert(binary_form=True))
