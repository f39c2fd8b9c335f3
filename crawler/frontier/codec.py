"""A versioned, pickle-free codec for requests stored in the frontier.

A stored request is a msgpack array whose first element is the codec version:

    [1, url, method, headers, body, priority, callback, errback, meta,
     cb_kwargs, dont_filter]

``method`` is ``None`` for GET, ``headers``/``body``/``meta``/``cb_kwargs``
are ``None`` when empty. Callbacks are stored by name and looked up on the
spider when decoding, so stored data never names arbitrary code. Only plain
data (None, bool, int, float, str, bytes, and lists/dicts of those) survives
in ``meta`` and ``cb_kwargs``; other values are dropped and reported, because
an object that cannot cross a process boundary safely must not be stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack
from scrapy import Request, Spider

from crawler.exceptions import CodecError, UnstorableCallbackError
from crawler.requestmeta import CONTACTED_META, LEASE_META, RENDERED_META, VERBATIM_URL_META

CODEC_VERSION = 1

#: Meta keys that only make sense inside one process and are never stored.
PROCESS_LOCAL_META = frozenset(
    {LEASE_META, "download_slot", "download_latency", "_slot", VERBATIM_URL_META, CONTACTED_META, RENDERED_META}
)

_SCALARS = (str, bytes, int, float, bool, type(None))


def is_plain_data(value: Any, depth: int = 0) -> bool:
    """True if ``value`` is made only of msgpack-safe scalars, lists and str-keyed dicts."""
    if isinstance(value, _SCALARS):
        return True
    if depth > 16:
        return False
    if isinstance(value, (list, tuple)):
        return all(is_plain_data(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain_data(v, depth + 1) for k, v in value.items())
    return False


@dataclass(frozen=True)
class EncodedRequest:
    blob: bytes
    #: Meta or cb_kwargs keys that were dropped because they are not plain data.
    dropped_keys: tuple[str, ...] = ()


def _callback_name(spider: Spider, callback: Callable[..., Any] | None, what: str) -> str | None:
    if callback is None:
        return None
    name = getattr(callback, "__name__", None)
    if name is None or getattr(callback, "__self__", None) is not spider:
        raise UnstorableCallbackError(
            f"{what} {callback!r} is not a method of the spider; it cannot be stored by name"
        )
    return str(name)


def _plain_mapping(mapping: Mapping[str, Any], dropped: list[str]) -> dict[str, Any] | None:
    out = {}
    for key, value in mapping.items():
        if key in PROCESS_LOCAL_META:
            continue
        if isinstance(key, str) and is_plain_data(value):
            out[key] = value
        else:
            dropped.append(str(key))
    return out or None


class RequestCodec:
    """Encodes :class:`scrapy.Request` objects to bytes and back."""

    def __init__(self, spider: Spider) -> None:
        self.spider = spider
        self._packer = msgpack.Packer(use_bin_type=True)

    def encode(self, request: Request) -> EncodedRequest:
        dropped: list[str] = []
        headers = None
        if request.headers:
            headers = {
                key.decode("latin-1"): [v for v in values] for key, values in request.headers.items()
            }
        blob = self._packer.pack(
            [
                CODEC_VERSION,
                request.url,
                None if request.method == "GET" else request.method,
                headers,
                request.body or None,
                request.priority,
                _callback_name(self.spider, request.callback, "callback"),
                _callback_name(self.spider, request.errback, "errback"),
                _plain_mapping(request.meta, dropped) if request.meta else None,
                _plain_mapping(request.cb_kwargs, dropped) if request.cb_kwargs else None,
                request.dont_filter,
            ]
        )
        return EncodedRequest(blob, tuple(dropped))

    def encode_link(self, url: str, callback: str | None, meta: dict[str, Any], priority: int = 0) -> bytes:
        """Encode a plain GET of ``url`` without building a Request first.

        The same bytes ``encode`` gives for ``Request(url, callback=...,
        priority=..., meta=meta)`` with plain-data ``meta``; for links followed in bulk.
        """
        fields = [CODEC_VERSION, url, None, None, None, priority, callback, None, meta, None, False]
        blob: bytes = self._packer.pack(fields)
        return blob

    def decode(self, blob: bytes) -> Request:
        try:
            fields = msgpack.unpackb(blob, raw=False, strict_map_key=True)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise CodecError(f"corrupt stored request: {exc}") from None
        if not isinstance(fields, list) or not fields:
            raise CodecError("corrupt stored request: not an array")
        if fields[0] != CODEC_VERSION:
            raise CodecError(f"stored request has codec version {fields[0]!r}, this code reads {CODEC_VERSION}")
        if len(fields) != 11:
            raise CodecError(f"stored request has {len(fields)} fields, expected 11")
        _, url, method, headers, body, priority, callback, errback, meta, cb_kwargs, dont_filter = fields
        # The stored URL is the one a Request already made safe when it was
        # first created; Scrapy's `verbatim_url` skips escaping it again.
        meta = {**meta, VERBATIM_URL_META: True} if meta else {VERBATIM_URL_META: True}
        return Request(
            url,
            method=method or "GET",
            headers=headers,
            body=body,
            priority=priority,
            callback=self._method(callback, "callback"),
            errback=self._method(errback, "errback"),
            meta=meta,
            cb_kwargs=cb_kwargs,
            dont_filter=dont_filter,
        )

    def _method(self, name: str | None, what: str) -> Callable[..., Any] | None:
        if name is None:
            return None
        method = getattr(self.spider, name, None)
        if not callable(method):
            raise CodecError(f"stored request names {what} {name!r}, which spider {self.spider.name!r} lacks")
        return method  # type: ignore[no-any-return]


def without_meta(blob: bytes, keys: tuple[str, ...]) -> bytes:
    """A stored request with some meta keys removed (no spider needed)."""
    try:
        fields = msgpack.unpackb(blob, raw=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise CodecError(f"corrupt stored request: {exc}") from None
    if not isinstance(fields, list) or len(fields) != 11 or fields[0] != CODEC_VERSION:
        raise CodecError("stored request of an unknown format")
    meta = fields[8]
    if isinstance(meta, dict) and any(key in meta for key in keys):
        fields[8] = {k: v for k, v in meta.items() if k not in keys} or None
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed
