"""A versioned, pickle-free codec for requests stored in the frontier.

A stored request (a queue entry) is one of:

* a request, a msgpack array whose first element is the codec version::

    [1, url, method, headers, body, priority, callback, errback, meta,
     cb_kwargs, dont_filter]

  ``method`` is ``None`` for GET, ``headers``/``body``/``meta``/``cb_kwargs``
  are ``None`` when empty;
* a link (a plain GET of a discovered URL, most of a broad crawl's queue),
  compact: ``[3, form, port, path, depth, priority, callback, meta]``, the URL
  without its ``scheme://host`` when that is the host it is queued under
  (``form`` 0 http, 1 https; 2: ``path`` is the whole URL), ``meta`` the rest
  of its meta or ``None``;
* a revisit: ``#`` and the URL's record (:mod:`crawler.metadata.record`), from
  which the request is built (its URL, callback, depth and the validators of
  its last capture).

Callbacks are stored by name and looked up on the spider when decoding, so
stored data never names arbitrary code. Only plain data (None, bool, int,
float, str, bytes, and lists/dicts of those) survives in ``meta`` and
``cb_kwargs``; other values are dropped and reported, because an object that
cannot cross a process boundary safely must not be stored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from struct import error as struct_error
from typing import Any

import msgpack
from scrapy import Request, Spider

from crawler.exceptions import CodecError, UnstorableCallbackError
from crawler.metadata.record import KIND_SITEMAP, UrlRecord
from crawler.requestmeta import (
    CONTACTED_META,
    LEASE_META,
    ORIGINAL_ENCODING_AT_META,
    ORIGINAL_ENCODING_META,
    RENDERED_META,
    REVISIT_META,
    VERBATIM_URL_META,
)
from crawler.sitemaps import sitemap_meta
from crawler.warc.dates import warc_date_micros

CODEC_VERSION = 1
#: The compact form of a link.
LINK_VERSION = 3
#: The first byte of a revisit (``#`` and a URL record).
REVISIT_MARK = b"#"[0]
_FORM_HTTP, _FORM_HTTPS, _FORM_URL = 0, 1, 2

#: Meta keys that only make sense inside one process and are never stored.
PROCESS_LOCAL_META = frozenset(
    {LEASE_META, "download_slot", "download_latency", "_slot", VERBATIM_URL_META, CONTACTED_META, RENDERED_META,
     ORIGINAL_ENCODING_META, ORIGINAL_ENCODING_AT_META}
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
    """Encodes :class:`scrapy.Request` objects to bytes and back.

    ``sitemap_max_bytes`` is the body limit a revisited sitemap gets (``SITEMAP_MAX_BYTES``).
    """

    def __init__(self, spider: Spider, sitemap_max_bytes: int = 50 * 1024 * 1024) -> None:
        self.spider = spider
        self.sitemap_max_bytes = sitemap_max_bytes
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

    def encode_link(self, url: str, host: str, callback: str | None, meta: dict[str, Any], priority: int = 0) -> bytes:
        """Encode a plain GET of ``url`` (a normalized URL of ``host``) without building a Request first.

        The compact link form (see the module's docstring): ``decode`` gives
        back ``Request(url, callback=..., priority=..., meta=meta)`` for
        plain-data ``meta``; for links followed in bulk.
        """
        form, port, path = _FORM_URL, 0, url
        scheme, sep, rest = url.partition("://")
        if sep and scheme in ("http", "https") and rest.startswith(host):
            after = rest[len(host):]
            if after[:1] in ("/", "?"):
                form, path = (_FORM_HTTPS if scheme == "https" else _FORM_HTTP), after
            elif after[:1] == ":":
                end = len(after)
                for stop in ("/", "?"):
                    found = after.find(stop)
                    if 0 < found < end:
                        end = found
                if after[1:end].isdigit() and end < len(after):
                    form = _FORM_HTTPS if scheme == "https" else _FORM_HTTP
                    port, path = int(after[1:end]), after[end:]
        depth = meta.get("depth", 0)
        extra = {key: value for key, value in meta.items() if key != "depth"} or None
        blob: bytes = self._packer.pack([LINK_VERSION, form, port, path, depth, priority, callback, extra])
        return blob

    def decode(self, blob: bytes, host: str = "") -> Request:
        """The request a queue entry stands for; ``host`` is the host it was queued under."""
        if blob[:1] == b"#":
            return self._revisit(blob[1:])
        try:
            fields = msgpack.unpackb(blob, raw=False, strict_map_key=True)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
            raise CodecError(f"corrupt stored request: {exc}") from None
        if not isinstance(fields, list) or not fields:
            raise CodecError("corrupt stored request: not an array")
        if fields[0] == LINK_VERSION:
            return self._link(fields, host)
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

    def _link(self, fields: list[Any], host: str) -> Request:
        if len(fields) != 8:
            raise CodecError(f"stored link has {len(fields)} fields, expected 8")
        _, form, port, path, depth, priority, callback, extra = fields
        if form == _FORM_URL:
            url = path
        elif not host:
            raise CodecError("a stored link without its host")
        else:
            url = ("https://" if form == _FORM_HTTPS else "http://") + host + (f":{port}" if port else "") + path
        meta = {"depth": depth, **(extra or {}), VERBATIM_URL_META: True}
        return Request(url, callback=self._method(callback, "callback"), priority=priority, meta=meta)

    def _revisit(self, packed: bytes) -> Request:
        """A revisit's request, from the URL's record: its callback, depth and last capture's validators."""
        try:
            record = UrlRecord.unpack(packed)
        except (ValueError, struct_error) as exc:
            raise CodecError(f"corrupt stored revisit: {exc}") from None
        if not record.url:
            raise CodecError("a stored revisit without its URL")
        sitemap = record.kind == KIND_SITEMAP
        validators: dict[str, Any] = {"date": warc_date_micros(record.captured or record.fetched_at * 1_000_000)}
        if record.etag:
            validators["etag"] = record.etag
        if record.last_modified:
            validators["lm"] = record.last_modified
        meta: dict[str, Any] = {"depth": record.depth, REVISIT_META: validators, VERBATIM_URL_META: True}
        if sitemap:
            meta.update(sitemap_meta(self.sitemap_max_bytes))
        callback = self._method("parse_sitemap" if sitemap else "parse", "callback")
        return Request(record.url, callback=callback, meta=meta)

    def _method(self, name: str | None, what: str) -> Callable[..., Any] | None:
        if name is None:
            return None
        method = getattr(self.spider, name, None)
        if not callable(method):
            raise CodecError(f"stored request names {what} {name!r}, which spider {self.spider.name!r} lacks")
        return method  # type: ignore[no-any-return]


def _fields(blob: bytes) -> list[Any]:
    try:
        fields = msgpack.unpackb(blob, raw=False, strict_map_key=True)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise CodecError(f"corrupt stored request: {exc}") from None
    if isinstance(fields, list) and len(fields) == 11 and fields[0] == CODEC_VERSION:
        return fields
    if isinstance(fields, list) and len(fields) == 8 and fields[0] == LINK_VERSION:
        return fields
    raise CodecError("stored request of an unknown format")


def without_meta(blob: bytes, keys: tuple[str, ...]) -> bytes:
    """A stored request with some meta keys removed (no spider needed); a revisit is returned as it is."""
    if blob[:1] == b"#":
        return blob
    fields = _fields(blob)
    index = 8 if fields[0] == CODEC_VERSION else 7
    meta = fields[index]
    if isinstance(meta, dict) and any(key in meta for key in keys):
        fields[index] = {k: v for k, v in meta.items() if k not in keys} or None
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return packed


def stored_url(blob: bytes, host: str) -> str:
    """The URL of a stored request queued under ``host`` (no spider needed)."""
    if blob[:1] == b"#":
        try:
            return UrlRecord.unpack(blob[1:]).url
        except (ValueError, struct_error) as exc:
            raise CodecError(f"corrupt stored revisit: {exc}") from None
    fields = _fields(blob)
    if fields[0] == CODEC_VERSION:
        return str(fields[1])
    _, form, port, path, *_ = fields
    if form == _FORM_URL:
        return str(path)
    return ("https://" if form == _FORM_HTTPS else "http://") + host + (f":{port}" if port else "") + str(path)
