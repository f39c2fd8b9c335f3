"""A lean HTTP/1.1 client: one request at a time per connection, kept alive.

The crawl path fetches millions of small pages one at a time per host; a
general-purpose client (aiohttp) spends ~0.45 ms of CPU per fetch on this
machine in layers a crawler does not use (cookie jars, URL objects, payload
writers, stream readers). This module is the mechanism only: it speaks
HTTP/1.1 over asyncio transports (plain or TLS) and keeps idle connections
per origin. Scrapy's glue (signals, size limits, errors, responses) is in
:mod:`crawler.downloader.handler`; timeouts are the caller's
(``asyncio.timeout`` around a whole exchange).

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

Connections are opened with Happy Eyeballs (RFC 8305, ``aiohappyeyeballs``,
as aiohttp does): the addresses of a name are tried in turn, each after
:data:`HAPPY_EYEBALLS_DELAY` without waiting for the previous one to fail, so
an address that swallows connection attempts (a black-holed IPv6 route) does
not spend the whole connect timeout.

Every answer is hostile until checked; each violation is a
:class:`ProtocolError` with a short reason, and the connection is dropped:

* a response head over :data:`MAX_HEAD_BYTES` or :data:`MAX_HEADER_LINES`;
* a chunk-size line over :data:`MAX_CHUNK_LINE` or not hexadecimal, more
  than :data:`MAX_CHUNKS` chunks, more than :data:`MAX_INTERIM` 1xx answers;
* bytes arriving while no request is outstanding;
* a body over the exchange's limit (:class:`BodyTooLarge`, counted by size).

A connection closed before the answer is complete raises
:class:`ConnectionClosed`, which says whether any byte of the answer had
arrived (a reused keep-alive connection the server had closed can be retried
safely only if none had) and carries the part of the body received.
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohappyeyeballs

if TYPE_CHECKING:
    import ssl

#: Largest response head (status line and headers) accepted.
MAX_HEAD_BYTES = 64 * 1024
#: Most header lines accepted in one response head (trailers included).
MAX_HEADER_LINES = 256
#: Longest chunk-size line (size and extensions) accepted.
MAX_CHUNK_LINE = 4096
#: Most chunks in one body (a body of one-byte chunks costs a parse per byte).
MAX_CHUNKS = 100_000
#: Most interim (1xx) answers before the final one.
MAX_INTERIM = 10

_STATUS_LINE = re.compile(rb"HTTP/(\d)\.(\d) +(\d{3})(?:[ \t].*)?", re.DOTALL)
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_DIGITS = re.compile(rb"[0-9]{1,18}")

# Protocol states of a connection.
_IDLE, _HEAD, _BODY, _CLOSED = 0, 1, 2, 3
# Body framings.
_NONE, _LENGTH, _CHUNKED, _EOF = 0, 1, 2, 3

#: Called with each piece of body as it arrives; returns True to stop reading.
ChunkHook = Callable[[bytes], bool]


class FetchError(Exception):
    """An HTTP exchange that could not complete."""


class ProtocolError(FetchError):
    """The server's answer is not HTTP/1.x as this client reads it."""


class BodyTooLarge(FetchError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"body over {limit} bytes ({size} received)")
        self.size = size
        self.limit = limit


class ConnectionClosed(FetchError):
    def __init__(self, message: str, *, started: bool, partial: bytes = b"") -> None:
        super().__init__(message)
        #: Whether any byte of the answer had arrived.
        self.started = started
        #: The part of the body received (decoded from chunks).
        self.partial = partial


@dataclass(slots=True)
class ResponseHead:
    status: int
    #: ``b"HTTP/1.1"`` or ``b"HTTP/1.0"``.
    version: bytes
    #: Header (name, value) pairs as received, values stripped.
    headers: list[tuple[bytes, bytes]]
    #: The declared Content-Length (of the body not sent, after HEAD, 204 or 304).
    content_length: int | None


def request_head(method: str, target: str, host: str, headers: list[tuple[bytes, bytes]], body: bytes) -> bytes:
    """The bytes of a request head; ``Host`` and ``Content-Length`` added unless given."""
    lines = [f"{method} {target} HTTP/1.1\r\n".encode("latin-1")]
    has_host = has_length = False
    for name, value in headers:
        if b"\r" in value or b"\n" in value or b"\r" in name or b"\n" in name:
            raise ValueError(f"line break in the request header {name!r}")
        lowered = name.lower()
        if lowered == b"host":
            has_host = True
        elif lowered == b"content-length":
            has_length = True
        lines.append(name + b": " + value + b"\r\n")
    if not has_host:
        lines.insert(1, b"Host: " + host.encode("ascii") + b"\r\n")
    if not has_length and (body or method in ("POST", "PUT", "PATCH")):
        lines.append(b"Content-Length: %d\r\n" % len(body))
    lines.append(b"\r\n")
    if body:
        lines.append(body)
    return b"".join(lines)


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
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
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
        headers = _header_pairs(lines)
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


def _header_pairs(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    headers: list[tuple[bytes, bytes]] = []
    for index in range(1, len(lines)):
        line = lines[index]
        if not line:
            continue
        if line[0] in (32, 9):  # obsolete line folding: continues the previous value
            if headers:
                name, value = headers[-1]
                headers[-1] = (name, value + b" " + line.strip())
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name or name[-1] in (32, 9):
            raise ProtocolError(f"invalid header line {line[:80]!r}")
        headers.append((name, value.strip()))
    return headers


Key = tuple[str, str, int]


class ConnectionPool:
    """Idle keep-alive connections by (scheme, host, port), bounded, least recently used out.

    A connection idle longer than ``idle_timeout`` is closed when the pool is
    next used; at most ``max_idle`` wait in all; one the server closes
    leaves the pool by itself.
    """

    def __init__(self, max_idle: int, idle_timeout: float) -> None:
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self._idle: dict[Key, list[HttpConnection]] = {}
        self._order: OrderedDict[HttpConnection, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._order)

    def acquire(self, key: Key) -> HttpConnection | None:
        self._expire(time.monotonic())
        connections = self._idle.get(key)
        while connections:
            connection = connections.pop()
            del self._order[connection]
            if not connections:
                del self._idle[key]
            connection.on_lost = None
            if connection.reusable:
                return connection
            connection.abort()
            connections = self._idle.get(key)
        return None

    def release(self, connection: HttpConnection) -> None:
        """Keep ``connection`` for its origin's next request, or close it."""
        if not connection.reusable or self.max_idle <= 0:
            connection.abort()
            return
        now = time.monotonic()
        connection.idle_since = now
        connection.on_lost = self._lost
        self._idle.setdefault(connection.key, []).append(connection)
        self._order[connection] = None
        while len(self._order) > self.max_idle:
            self._evict(next(iter(self._order)))
        self._expire(now)

    def close(self) -> None:
        for connection in list(self._order):
            self._evict(connection)

    def _expire(self, now: float) -> None:
        order = self._order
        while order:
            oldest = next(iter(order))
            if now - oldest.idle_since < self.idle_timeout:
                return
            self._evict(oldest)

    def _evict(self, connection: HttpConnection) -> None:
        self._discard(connection)
        connection.on_lost = None
        connection.abort()

    def _lost(self, connection: HttpConnection) -> None:
        self._discard(connection)

    def _discard(self, connection: HttpConnection) -> None:
        if self._order.pop(connection, 0) is None:
            connections = self._idle.get(connection.key)
            if connections is not None:
                connections.remove(connection)
                if not connections:
                    del self._idle[connection.key]


#: Seconds before the next address is tried while the previous attempt is still pending (RFC 8305: 250 ms).
HAPPY_EYEBALLS_DELAY = 0.25


def _address_info(address: str, port: int) -> tuple[Any, ...]:
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))


async def connect(
    key: Key,
    addresses: list[str],
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None,
    local_addr: tuple[str, int] | None,
) -> HttpConnection:
    """A new connection to the first of ``addresses`` that answers (Happy Eyeballs), TLS on top if asked.

    Raises ``OSError`` when no address answers, ``ssl.SSLError`` when the TLS
    handshake fails (a certificate that does not verify, say).
    """
    loop = asyncio.get_running_loop()
    sock = await aiohappyeyeballs.start_connection(
        [_address_info(address, key[2]) for address in addresses],
        local_addr_infos=[_address_info(*local_addr)] if local_addr else None,
        happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
        interleave=1,
    )
    try:
        _, protocol = await loop.create_connection(
            lambda: HttpConnection(key), sock=sock,
            ssl=ssl_context, server_hostname=server_hostname if ssl_context is not None else None,
        )
    except BaseException:
        sock.close()
        raise
    return protocol


def transfer_codings(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The transfer codings applied to a body besides ``chunked`` (and ``identity``), in the order applied."""
    codings: list[bytes] = []
    for name, value in headers:
        if len(name) == 17 and name.lower() == b"transfer-encoding":
            codings += (part.strip().lower() for part in value.split(b","))
    return [coding for coding in codings if coding and coding not in (b"chunked", b"identity")]
