"""Digests as WARC writes them (``WARC-Payload-Digest``: ``sha1:<base32>``) and their bytes, which the
duplicate index and the URL records keep: used across the crawl, not only by the WARC writer."""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

#: Base32 (RFC 4648) of every 10-bit value: two characters each.
_BASE32_PAIRS = [a + b for a in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567" for b in "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"]
_SHA1_SHIFTS = tuple(range(150, -1, -10))


def sha1_base32(data: bytes, more: bytes = b"") -> str:
    """``sha1:<base32>`` of ``data`` followed by ``more``, the form of WARC's digests (``more``: a
    record's block is its HTTP head and its payload, digested without joining them first).
    ``base64.b32encode`` is pure Python: a SHA-1's 160 bits are 16 pairs of base32 characters,
    twice as fast this way."""
    sha1 = hashlib.sha1(data)
    if more:
        sha1.update(more)
    value = int.from_bytes(sha1.digest(), "big")
    return "sha1:" + "".join([_BASE32_PAIRS[(value >> shift) & 1023] for shift in _SHA1_SHIFTS])


#: RFC 4648's base32 alphabet, and its characters as ``int(..., 32)`` reads the same values.
_BASE32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_BASE32_AS_INT = str.maketrans(_BASE32, "0123456789abcdefghijklmnopqrstuv")


@lru_cache(maxsize=1024)
def sha1_bytes(digest: str) -> bytes:
    """The 20 bytes of a ``sha1:<base32>`` digest, the inverse of :func:`sha1_base32` (read as one
    base-32 integer: ``base64.b32decode`` is pure Python, 8 us a digest); a digest in another form is
    decoded by ``base64`` (or refused by it: ``binascii.Error``). Remembered (bounded): the duplicate
    check and the URL record each read a page's digest."""
    text = digest.removeprefix("sha1:")
    if len(text) != 32 or text.strip(_BASE32):
        return base64.b32decode(text)
    return int(text.translate(_BASE32_AS_INT), 32).to_bytes(20, "big")


def payload_digest(payload: bytes) -> str:
    """``sha1:<base32>``, the form of ``WARC-Payload-Digest``."""
    return sha1_base32(payload)
