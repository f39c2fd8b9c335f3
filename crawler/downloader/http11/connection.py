"""One HTTP/1.1 connection of the lean client: an asyncio protocol that reads one answer at a time.

Its parser enforces the limits of :mod:`crawler.downloader.http11.message`;
every violation fails the exchange with a :class:`ProtocolError` and drops
the connection.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any, cast

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
    header_pairs,
)

_STATUS_LINE = re.compile(rb"HTTP/(\d)\.(\d) +(\d{3})(?:[ \t].*)?", re.DOTALL)
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_DIGITS = re.compile(rb"[0-9]{1,18}")

# Protocol states of a connection.
_IDLE, _HEAD, _BODY, _CLOSED = 0, 1, 2, 3
# Body framings.
_NONE, _LENGTH, _CHUNKED, _EOF = 0, 1, 2, 3

#: Called with each piece of body as it arrives; returns True to stop reading.
ChunkHook = Callable[[bytes], bool]


class HttpConnection(asyncio.Protocol):
    """One persistent connection; one exchange at a time."""

    def __init__(self, key: Any) -> None:
        self.key = key
        self.transport: asyncio.Transport | None = None
        #: Peer address, set when connected.
        self.peer: str | None = None
        #: Set by the pool while the connection waits there.
        self.idle_since = 0.0
        self.on_lost: Callable[[HttpConnection], None] | None = None
        self._state = _IDLE
        self._buffer = bytearray()
        self._keep_alive = True
        # Set by each response head (_frame):
        self._framing = _NONE
        self._remaining = 0
        self._chunk_left = 0
        self._trailers = False
        self._trailer_lines = 0
        self._chunks = 0
        self._head_waiter: asyncio.Future[ResponseHead] | None = None
        self._new_exchange(head_only=False, limit=0, on_chunk=None)

    # -- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: uvloop's (ASYNCIO_EVENT_LOOP = "uvloop.Loop") has asyncio.Transport's methods
        # without being its subclass, so the type is taken, not checked.
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = peer[0] if peer else None

    def data_received(self, data: bytes) -> None:
        state = self._state
        if state == _BODY and self._framing == _LENGTH and not self._buffer:
            # The common case: the rest of a Content-Length body.
            remaining = self._remaining
            if len(data) <= remaining:
                self._remaining = remaining - len(data)
                self._piece(data)
                if self._remaining == 0 and self._state == _BODY:
                    self._finish()
                return
        if state in (_IDLE, _CLOSED):
            if state == _IDLE and self.transport is not None:
                # Nothing was asked: a server speaking out of turn is not reused.
                self.transport.abort()
            return
        self._started = True
        self._buffer += data
        try:
            self._advance()
        except FetchError as exc:
            self._fail(exc)

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost settles the exchange

    def connection_lost(self, exc: Exception | None) -> None:
        state = self._state
        self._state = _CLOSED
        if self.on_lost is not None:
            self.on_lost(self)
        if state == _HEAD:
            what = "the connection closed before the response" if not self._started else \
                "the connection closed within the response head"
            self._fail(ConnectionClosed(what, started=self._started))
        elif state == _BODY:
            if self._framing == _EOF and exc is None:
                self._finish()
            else:
                partial = b"".join(self._pieces)
                self._fail(ConnectionClosed(
                    f"the connection closed after {len(partial)} bytes of the body", started=True, partial=partial,
                ))

    # -- one exchange ---------------------------------------------------------------------

    @property
    def reusable(self) -> bool:
        return self._state == _IDLE and self._keep_alive and self.transport is not None \
            and not self.transport.is_closing()

    def start(
        self, payload: bytes, *, head_only: bool, limit: int, on_chunk: ChunkHook | None,
    ) -> asyncio.Future[ResponseHead]:
        """Send a request; the future gives the response head."""
        if self._state != _IDLE or self.transport is None:
            raise ConnectionClosed("the connection is not idle", started=False)
        self._new_exchange(head_only=head_only, limit=limit, on_chunk=on_chunk)
        self._state = _HEAD
        waiter: asyncio.Future[ResponseHead] = asyncio.get_running_loop().create_future()
        self._head_waiter = waiter
        self.transport.write(payload)
        return waiter

    def _new_exchange(self, *, head_only: bool, limit: int, on_chunk: ChunkHook | None) -> None:
        """The state of one request and its answer, fresh."""
        self._head_only = head_only
        self._limit = limit
        self._on_chunk = on_chunk
        self._started = False
        self._received = 0
        self._interim = 0
        self._pieces: list[bytes] = []
        self._body: bytes | None = None
        self._error: FetchError | None = None
        self._body_waiter: asyncio.Future[bytes] | None = None
        #: True when the body hook asked to stop (the body is what came before).
        self.stopped = False

    def read_body(self) -> asyncio.Future[bytes]:
        """The body of the current exchange (after its head)."""
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if self._error is not None:
            waiter.set_exception(self._error)
        elif self._body is not None:
            waiter.set_result(self._body)
        else:
            self._body_waiter = waiter
        return waiter

    def abort(self) -> None:
        """Drop the connection at once (an exchange given up)."""
        if self.transport is not None:
            self.transport.abort()
        self._state = _CLOSED

    # -- parsing ----------------------------------------------------------------------------

    def _advance(self) -> None:
        buffer = self._buffer
        while True:
            state = self._state
            if state == _HEAD:
                if not self._read_head():
                    return
            elif state == _BODY:
                framing = self._framing
                if framing == _CHUNKED:
                    self._read_chunks()
                    return
                if not buffer:
                    return
                data = bytes(buffer)
                buffer.clear()
                if framing == _LENGTH:
                    if len(data) > self._remaining:
                        # More than declared: the connection cannot carry another exchange.
                        self._keep_alive = False
                        data = data[:self._remaining]
                    self._remaining -= len(data)
                    self._piece(data)
                    if self._remaining == 0 and self._state == _BODY:
                        self._finish()
                else:  # until the connection closes
                    self._piece(data)
                return
            else:
                return

    def _read_head(self) -> bool:
        """Parse a complete response head in the buffer, if there is one."""
        buffer = self._buffer
        end = buffer.find(b"\r\n\r\n")
        size = 4
        # A head ended by bare line feeds (tolerated) may come first.
        bare = buffer.find(b"\n\n", 0, end if end >= 0 else len(buffer))
        if bare >= 0:
            end, size = bare, 2
        elif end < 0:
            if len(buffer) > MAX_HEAD_BYTES:
                raise ProtocolError(f"response head over {MAX_HEAD_BYTES} bytes")
            return False
        if end > MAX_HEAD_BYTES:
            raise ProtocolError(f"response head over {MAX_HEAD_BYTES} bytes")
        raw = bytes(buffer[:end])
        del buffer[:end + size]
        lines = raw.split(b"\r\n") if size == 4 else [line.rstrip(b"\r") for line in raw.split(b"\n")]
        match = _STATUS_LINE.fullmatch(lines[0])
        if match is None:
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
        if len(lines) > MAX_HEADER_LINES:
            raise ProtocolError(f"more than {MAX_HEADER_LINES} header lines")
        status = int(match.group(3))
        if 100 <= status < 200:
            if status == 101:
                raise ProtocolError("101 Switching Protocols was not asked for")
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise ProtocolError(f"more than {MAX_INTERIM} interim (1xx) answers")
            return True  # an interim answer: the final one follows
        headers = header_pairs(lines)
        version = b"HTTP/" + match.group(1) + b"." + match.group(2)
        self._frame(status, version, headers)
        return True

    def _frame(self, status: int, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        lengths: list[bytes] = []
        chunked = coded = False
        connection = b""
        for name, value in headers:
            if len(name) == 14 and name.lower() == b"content-length":
                lengths.extend(part.strip() for part in value.split(b","))
            elif len(name) == 17 and name.lower() == b"transfer-encoding":
                coded = True
                chunked = value.rsplit(b",", 1)[-1].strip().lower() == b"chunked"
            elif len(name) == 10 and name.lower() == b"connection":
                connection = value.lower()
        if version == b"HTTP/1.1":
            self._keep_alive = b"close" not in connection
        else:
            self._keep_alive = b"keep-alive" in connection
        content_length: int | None = None
        valid_length = bool(lengths) and len(set(lengths)) == 1 and _DIGITS.fullmatch(lengths[0]) is not None
        if valid_length:
            content_length = int(lengths[0])
        if self._head_only or status == 204 or status == 304:
            framing = _NONE  # a declared length describes the body not sent
        elif coded:
            framing = _CHUNKED if chunked else _EOF
            content_length = None
        elif lengths:
            if content_length is None:
                raise ProtocolError(f"invalid Content-Length {b','.join(lengths)[:80]!r}")
            if self._limit and content_length > self._limit:
                # The caller refuses it from the head; nothing more is read.
                self._keep_alive = False
            framing = _LENGTH if content_length else _NONE
        else:
            framing = _EOF
        if framing == _EOF or (coded and lengths):
            self._keep_alive = False
        self._framing = framing
        self._remaining = content_length or 0
        self._chunk_left = 0
        self._chunks = 0
        self._trailers = False
        self._trailer_lines = 0
        self._state = _BODY
        waiter = self._head_waiter
        self._head_waiter = None
        if waiter is not None and not waiter.done():
            waiter.set_result(ResponseHead(status, version, headers, content_length))
        if framing == _NONE:
            self._finish()

    def _read_chunks(self) -> None:
        buffer = self._buffer
        while self._state == _BODY:
            left = self._chunk_left
            if left > 0:
                if not buffer:
                    return
                take = min(left, len(buffer))
                piece = bytes(buffer[:take])
                del buffer[:take]
                self._chunk_left = left - take
                self._piece(piece)
                if self._chunk_left:
                    return
                self._chunk_left = -1
                continue
            if left < 0:  # the CRLF that ends a chunk's data
                if len(buffer) < 2:
                    first = bytes(buffer[:1])
                    if first not in (b"", b"\r", b"\n"):
                        raise ProtocolError("chunk data longer than its size")
                    if first == b"\n":
                        del buffer[:1]
                        self._chunk_left = 0
                    return
                if buffer[:2] == b"\r\n":
                    del buffer[:2]
                elif buffer[:1] == b"\n":
                    del buffer[:1]
                else:
                    raise ProtocolError("chunk data longer than its size")
                self._chunk_left = 0
                continue
            end = buffer.find(b"\n")
            if end < 0:
                if len(buffer) > MAX_CHUNK_LINE:
                    raise ProtocolError(f"chunk line over {MAX_CHUNK_LINE} bytes")
                return
            if end > MAX_CHUNK_LINE:
                raise ProtocolError(f"chunk line over {MAX_CHUNK_LINE} bytes")
            line = bytes(buffer[:end]).rstrip(b"\r")
            del buffer[:end + 1]
            if self._trailers:
                if not line:
                    self._finish()
                    return
                self._trailer_lines += 1
                if self._trailer_lines > MAX_HEADER_LINES:
                    raise ProtocolError(f"more than {MAX_HEADER_LINES} trailer lines")
                continue
            size = line.split(b";", 1)[0].strip()
            if _HEX.fullmatch(size) is None:
                raise ProtocolError(f"invalid chunk size {size[:40]!r}")
            self._chunk_left = int(size, 16)
            if self._chunk_left == 0:
                self._trailers = True
            else:
                self._chunks += 1
                if self._chunks > MAX_CHUNKS:
                    raise ProtocolError(f"more than {MAX_CHUNKS} chunks")

    def _piece(self, data: bytes) -> None:
        if not data:
            return
        self._received += len(data)
        if self._limit and self._received > self._limit:
            self._fail(BodyTooLarge(self._received, self._limit))
            return
        self._pieces.append(data)
        hook = self._on_chunk
        if hook is not None and hook(data):
            self.stopped = True
            self._keep_alive = False
            self._finish()

    def _finish(self) -> None:
        body = self._pieces[0] if len(self._pieces) == 1 else b"".join(self._pieces)
        self._pieces = []
        self._state = _IDLE
        if self._buffer or not self._keep_alive:
            # Bytes beyond the answer, or a server that closes: not reusable.
            self._keep_alive = False
            self._buffer.clear()
        waiter = self._body_waiter
        if waiter is not None:
            self._body_waiter = None
            if not waiter.done():
                waiter.set_result(body)
        else:
            self._body = body

    def _fail(self, error: FetchError) -> None:
        """End the exchange with ``error`` and drop the connection."""
        self._keep_alive = False
        if self.transport is not None and self._state != _CLOSED:
            self.transport.abort()
        self._state = _CLOSED
        head = self._head_waiter
        if head is not None:
            self._head_waiter = None
            if not head.done():
                head.set_exception(error)
            return
        body = self._body_waiter
        if body is not None:
            self._body_waiter = None
            if not body.done():
                body.set_exception(error)
        elif self._body is None:
            self._error = error
