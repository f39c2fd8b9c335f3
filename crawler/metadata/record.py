"""The URL record: one per fetched URL, its URL stored once (pure data, no I/O).

A record is a fixed binary head (:data:`RECORD_STRUCT`, little-endian; the Lua
scripts read and write its fields by the positions :data:`RECORD_FIELDS` gives
them, ``URLREC`` in the generated prelude, :mod:`crawler.crawlstate.schema`), then the
ETag, then the URL after its ``scheme://``: the host it is queued under
(which the scripts read: the first ``host_len`` bytes), then the rest of the
URL, packed six bits to a character when every character of it is one of the
63 most common in URLs (:func:`pack_url_part`: a quarter smaller; Python alone
reads it). The URL is the only copy the crawl keeps of it once fetched: the recrawl schedule and a revisit waiting in a
queue refer to the record by its URL key (:func:`url_key`), and the revisit
request is built from it (:func:`crawler.frontier.codec.RequestCodec.decode`).

About 55 bytes plus the ETag, the host and three quarters of the rest of the URL; stored in small hashes of the host's
shard (``url:<bucket>``, linear hashing) that stay listpacks.
"""

from __future__ import annotations

import binascii
import struct
from dataclasses import dataclass

from crawler.crawlstate.schema import (
    FLAG_DIGEST,
    FLAG_HOST_APART,
    FLAG_HOST_ID,
    FLAG_HTTPS,
    FLAG_PACKED,
    FLAG_SIMHASH,
    KIND_MASK,
    KIND_OTHER,
    KIND_PARSE,
    KIND_SITEMAP,
    RECORD_FIELDS,
    RECORD_FLAGS,
    RECORD_LUA_FORMAT,
    RECORD_STRUCT,
    RECORD_VERSION,
    UrlState,
)
from crawler.urls.fingerprint import url_key

__all__ = [
    "FLAG_DIGEST", "FLAG_HOST_APART", "FLAG_HOST_ID", "FLAG_HTTPS", "FLAG_PACKED", "FLAG_SIMHASH", "KIND_MASK",
    "KIND_OTHER", "KIND_PARSE", "KIND_SITEMAP", "RECORD_FIELDS", "RECORD_FLAGS", "RECORD_LUA_FORMAT", "RECORD_STRUCT",
    "RECORD_VERSION", "UrlRecord", "UrlState", "url_key",
]

#: The characters a packed URL part may hold: the 63 most common in URLs after normalization, and
#: NUL (never in a URL), the padding. Each is mapped to a base64 digit, and base64 decoding (in C)
#: packs four of them into three bytes.
_URL_ALPHABET = b"\0abcdefghijklmnopqrstuvwxyz0123456789/-._~?=&%:+,;!*'()@$ABCDEFG"
_BASE64_DIGITS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
assert len(_URL_ALPHABET) == len(set(_URL_ALPHABET)) == 64
_TO_DIGITS = bytes.maketrans(_URL_ALPHABET, _BASE64_DIGITS)
_FROM_DIGITS = bytes.maketrans(_BASE64_DIGITS, _URL_ALPHABET)
_PACKABLE = _URL_ALPHABET[1:]


def pack_url_part(part: bytes) -> bytes | None:
    """``part`` in six bits per character (padded at the front with NULs to a multiple of four
    characters), or None when a character of it is not in the alphabet."""
    if part.translate(None, _PACKABLE):
        return None
    padded = bytes((-len(part)) % 4) + part
    return binascii.a2b_base64(padded.translate(_TO_DIGITS), strict_mode=True)


def unpack_url_part(packed: bytes) -> bytes:
    return binascii.b2a_base64(packed, newline=False).translate(_FROM_DIGITS).lstrip(b"\0")

_MAX_U16 = 0xFFFF
_MAX_U32 = 0xFFFFFFFF


def _u16(value: int) -> int:
    return max(0, min(_MAX_U16, value))


def _u32(value: int) -> int:
    return max(0, min(_MAX_U32, value))


@dataclass(frozen=True)
class UrlRecord:
    state: UrlState
    #: Crawl-clock seconds of the last fetch.
    fetched_at: int
    status: int = 0
    #: The first 4 bytes of the payload's SHA-1 (enough to tell a change), b"" when there is none.
    digest: bytes = b""
    #: The page's SimHash (8 bytes, big-endian), b"" when there is none.
    simhash8: bytes = b""
    etag: str = ""
    #: Last-Modified as epoch seconds (0: none).
    last_modified: int = 0
    length: int = 0
    outlinks: int = 0
    observations: int = 0
    changes: int = 0
    #: The crawl-clock second the URL is due again (0: not scheduled).
    next_visit: int = 0
    first_fetch: int = 0
    #: Epoch microseconds of the capture holding the payload (the revisit's WARC-Refers-To-Date).
    captured: int = 0
    #: The front-queue level of its revisit, and its depth.
    level: int = 0
    depth: int = 0
    kind: int = KIND_PARSE
    #: The normalized URL, and the host it is queued under ("" for a record without a URL).
    url: str = ""
    host: str = ""

    def pack(self) -> bytes:
        flags = self.kind & KIND_MASK
        url_part = b""
        host_len = 0
        if self.url:
            scheme, _, rest = self.url.partition("://")
            if scheme == "https":
                flags |= FLAG_HTTPS
            tail = rest.encode("utf-8", "surrogateescape")
            host = self.host.encode("utf-8", "surrogateescape")[:255]
            host_len = len(host)
            if tail[:host_len] == host and tail[host_len : host_len + 1] in (b"", b":", b"/", b"?"):
                after = tail[host_len:]
            else:
                flags |= FLAG_HOST_APART
                after = tail
            packed = pack_url_part(after)
            if packed is not None and len(packed) < len(after):
                flags |= FLAG_PACKED
                after = packed
            url_part = host + after
        if self.digest:
            flags |= FLAG_DIGEST
        if self.simhash8:
            flags |= FLAG_SIMHASH
        etag = self.etag.encode("utf-8", "surrogateescape")[:255] if self.etag else b""
        digest, simhash8 = self.digest, self.simhash8
        try:
            head = RECORD_STRUCT.pack(
                RECORD_VERSION, self.state, self.status, self.fetched_at, self.first_fetch, self.next_visit,
                self.last_modified, self.captured, digest if len(digest) == 4 else digest[:4].ljust(4, b"\0"),
                simhash8 if len(simhash8) == 8 else simhash8[:8].ljust(8, b"\0"), self.length, self.outlinks,
                self.observations, self.changes, self.level, self.depth, flags, len(etag), host_len,
            )
        except struct.error:  # a field out of its range: clamped to it
            head = RECORD_STRUCT.pack(
                RECORD_VERSION, int(self.state), _u16(self.status), _u32(self.fetched_at), _u32(self.first_fetch),
                _u32(self.next_visit), _u32(self.last_modified), max(0, self.captured),
                digest[:4].ljust(4, b"\0"), simhash8[:8].ljust(8, b"\0"), _u32(self.length),
                _u16(self.outlinks), _u16(self.observations), _u16(self.changes), min(255, max(0, self.level)),
                min(255, max(0, self.depth)), flags, len(etag), host_len,
            )
        return head + etag + url_part

    @classmethod
    def unpack(cls, blob: bytes) -> UrlRecord:
        (version, state, status, fetched_at, first_fetch, next_visit, last_modified, captured, digest,
         simhash8, length, outlinks, observations, changes, level, depth, flags, etag_len,
         host_len) = RECORD_STRUCT.unpack_from(blob)
        if version != RECORD_VERSION:
            raise ValueError(f"URL record of version {version}, this code reads {RECORD_VERSION}")
        if flags & FLAG_HOST_ID:
            raise ValueError("URL record with a host number: read it through the record script")
        start = RECORD_STRUCT.size
        etag = blob[start : start + etag_len].decode("utf-8", "replace")
        tail = blob[start + etag_len :]
        url = host = ""
        if tail:
            host_bytes = tail[:host_len]
            after = tail[host_len:]
            if flags & FLAG_PACKED:
                after = unpack_url_part(after)
            rest = after if flags & FLAG_HOST_APART else host_bytes + after
            host = host_bytes.decode("utf-8", "surrogateescape")
            url = ("https://" if flags & FLAG_HTTPS else "http://") + rest.decode("utf-8", "surrogateescape")
        return cls(
            UrlState(state), fetched_at, status, digest if flags & FLAG_DIGEST else b"",
            simhash8 if flags & FLAG_SIMHASH else b"", etag, last_modified, length, outlinks, observations, changes,
            next_visit, first_fetch, captured, level, depth, flags & KIND_MASK, url, host,
        )

    @property
    def simhash(self) -> int | None:
        return int.from_bytes(self.simhash8, "big") if len(self.simhash8) == 8 else None

