"""Fingerprints of normalized URLs, and the positions a URL takes in the Bloom filter."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import lru_cache
from hashlib import blake2b

#: The packing of ``k`` Bloom positions (little-endian uint32), by ``k``.
POSITIONS = {k: struct.Struct(f"<{k}I") for k in range(1, 33)}


def url_fingerprint(normalized_url: str, method: str = "GET", body: bytes = b"") -> bytes:
    """128-bit (16-byte) BLAKE2b fingerprint of a normalized URL (plus method and body if not a plain GET)."""
    digest = blake2b(normalized_url.encode("utf-8", "surrogateescape"), digest_size=16)
    if method != "GET" or body:
        digest.update(b"\0" + method.encode("ascii", "replace") + b"\0" + body)
    return digest.digest()


def url_key(fingerprint: bytes) -> int:
    """A URL's key: its fingerprint's first 8 bytes as a signed integer. The exact seen store's member,
    the URL record's field and the recrawl schedule's member; Redis keeps it as an integer."""
    return int.from_bytes(fingerprint[:8], "big", signed=True)


@lru_cache(maxsize=1024)
def page_fingerprint(normalized_url: str) -> bytes:
    """:func:`url_fingerprint` of a fetched page's URL (a plain GET), remembered (bounded) for the item
    pipelines that each need it (duplicates, URL record and in-link sketch, recrawl)."""
    return url_fingerprint(normalized_url)


def bloom_offsets(fingerprint: bytes, bits: int, hashes: int) -> list[int]:
    """``hashes`` bit positions in a ``bits``-bit filter.

    Kirsch-Mitzenmacher double hashing: ``(h1 + i * h2) mod bits`` with ``h1``
    and ``h2`` two independent 32-bit words of the 128-bit fingerprint (a
    Redis bitmap has at most 2^32 bits, so 32-bit words cover it; small
    integers keep this cheap).
    """
    h1 = int.from_bytes(fingerprint[8:12], "little")
    h2 = int.from_bytes(fingerprint[12:16], "little") | 1
    return [(h1 + i * h2) % bits for i in range(hashes)]


def bloom_positions(fingerprint: bytes, bits: int, hashes: int) -> bytes:
    """:func:`bloom_offsets`, packed as little-endian uint32."""
    return POSITIONS[hashes].pack(*bloom_offsets(fingerprint, bits, hashes))


#: Bloom positions of a URL that are its in-link sketch cells (the first ones).
SKETCH_CELLS = 4


def sketch_offsets(positions: Sequence[int], cells: int) -> list[str]:
    """A URL's cells in the in-link sketch (a counting Bloom filter of ``cells`` 8-bit cells), as
    ``BITFIELD`` offsets (``#<cell>``): its first Bloom positions modulo ``cells``. Made here, not in
    the scripts: Redis' Lua writes a number as text with ``sprintf``, about 5,000 instructions."""
    return [f"#{position % cells}" for position in positions[:SKETCH_CELLS]]

