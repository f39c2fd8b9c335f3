"""HTTP/1.1 messages as the lean client writes and reads them: limits, errors, heads (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass

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



def header_pairs(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    """The (name, value) pairs of a head's lines after the first; obsolete line folding unfolded."""
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


def transfer_codings(headers: list[tuple[bytes, bytes]]) -> list[bytes]:
    """The transfer codings applied to a body besides ``chunked`` (and ``identity``), in the order applied."""
    codings: list[bytes] = []
    for name, value in headers:
        if len(name) == 17 and name.lower() == b"transfer-encoding":
            codings += (part.strip().lower() for part in value.split(b","))
    return [coding for coding in codings if coding and coding not in (b"chunked", b"identity")]
