"""A lean HTTP/1.1 client: one request at a time per connection, kept alive.

The mechanism only: HTTP/1.1 over asyncio transports (plain or TLS), idle
connections kept per origin, opened with Happy Eyeballs (RFC 8305). Scrapy's
glue (signals, size limits, errors, responses) is in
:mod:`crawler.downloader.handler`; timeouts are the caller's. Why a client of
its own, and what it costs: docs/citizenship.md, "The HTTP client".

What it reads:
* a status line ``HTTP/1.x NNN reason`` and header lines, CRLF or bare LF;
  interim ``1xx`` answers are skipped; obsolete line folding is unfolded;
* bodies framed by ``Transfer-Encoding: chunked`` (trailers read and
  dropped), by ``Content-Length`` (several differing values are an error), or
  by the end of the connection; none after ``HEAD``, ``204`` and ``304``. An
  answer with both ``Transfer-Encoding`` and ``Content-Length`` is framed by
  the former and its connection closed after it (RFC 9112 6.3); transfer
  codings other than ``chunked`` (``gzip, chunked``) are the caller's to
  decode (:func:`transfer_codings`).

Every answer is hostile until checked; each violation is a
:class:`ProtocolError` with a short reason, and the connection is dropped:
* a response head over :data:`MAX_HEAD_BYTES` or :data:`MAX_HEADER_LINES`;
* a chunk-size line over :data:`MAX_CHUNK_LINE` or not hexadecimal, over
  :data:`MAX_CHUNKS` chunks or :data:`MAX_INTERIM` 1xx answers, bytes unasked for;
* a body over the exchange's limit (:class:`BodyTooLarge`, counted by size).

A connection closed before the answer is complete raises
:class:`ConnectionClosed`: whether any byte had arrived (only then is a reused
connection unsafe to retry), and the part of the body received.
"""

from crawler.downloader.http11.connection import ChunkHook, HttpConnection
from crawler.downloader.http11.message import (
    MAX_CHUNK_LINE,
    MAX_CHUNKS,
    MAX_HEAD_BYTES,
    MAX_HEADER_LINES,
    MAX_INTERIM,
    BodyTooLarge,
    ConnectionClosed,
    FetchError,
    ProtocolError,
    ResponseHead,
    request_head,
    transfer_codings,
)
from crawler.downloader.http11.pool import HAPPY_EYEBALLS_DELAY, ConnectionPool, Key, connect

__all__ = [
    "HAPPY_EYEBALLS_DELAY",
    "MAX_CHUNKS",
    "MAX_CHUNK_LINE",
    "MAX_HEADER_LINES",
    "MAX_HEAD_BYTES",
    "MAX_INTERIM",
    "BodyTooLarge",
    "ChunkHook",
    "ConnectionClosed",
    "ConnectionPool",
    "FetchError",
    "HttpConnection",
    "Key",
    "ProtocolError",
    "ResponseHead",
    "connect",
    "request_head",
    "transfer_codings",
]
