"""Building WARC/1.1 records from a fetch, separate from writing them.

For each fetch: a ``request`` record (the HTTP request as sent) and a
``response`` record (status line, headers, payload) that names the request in
``WARC-Concurrent-To``, or, for a payload already archived, a ``revisit``
record (profile ``identical-payload-digest``, with ``WARC-Refers-To-Target-URI``
and ``WARC-Refers-To-Date``) instead of a second copy; a ``304 Not Modified``
answer to a conditional revisit is a ``revisit`` record of profile
``server-not-modified`` referring to the capture it revalidated; optionally a
``metadata`` record (outlinks, fetch timing); for a page rendered in a
browser, a ``conversion`` record of the rendered DOM (``text/html``) that names
the response (or revisit) record in ``WARC-Refers-To``. ``warcinfo`` opens a
file.

The payload is what the server sent, decompressed by the crawler when it came
with a ``Content-Encoding``; then, as Common Crawl does, the original
``Content-Encoding``, ``Content-Length`` and ``Transfer-Encoding`` headers are
kept under ``X-Crawler-`` names and a true ``Content-Length`` is written, so
the headers agree with the stored payload and ``warcio check`` verifies every
block and payload digest.

Record ids and dates come from the caller (:class:`RecordIds`), so tests can
fix them and compare bytes.

A fetch's records are :class:`WarcRecord` values serialised to warcio's exact
bytes without warcio's objects (its record builder, header objects and
stream digesters cost more CPU per page than the rest of the archive);
``warcinfo`` records, one per file, are warcio's own. A request record keeps
the headers sent but for credentials (``Authorization``,
``Proxy-Authorization``: ``***``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import BufferWARCWriter

from crawler.urls.normalize import URL_PARTS
from crawler.warc.dates import warc_date
from crawler.warc.digests import payload_digest, sha1_base32

RENAMED_PREFIX = "X-Crawler-"
MASK = "***"


#: The variant digit of an RFC 4122 UUID for a random hex digit (its two high bits made 10).
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


class RandomIds:
    """``<urn:uuid:...>`` of random (version 4) UUIDs, as ``uuid.uuid4()`` makes them: 122 bits of
    ``os.urandom`` each, read 4 KiB (256 ids) at a time, not one system call per record. A forked child
    starts afresh (``os.register_at_fork``), so two processes never share the bytes."""

    __slots__ = ("_at", "_hex")

    BYTES = 4096

    def __init__(self) -> None:
        self._hex = ""
        self._at = 0

    def reset(self) -> None:
        self._hex, self._at = "", 0

    def __call__(self) -> str:
        at = self._at
        if at >= len(self._hex):
            self._hex, at = os.urandom(self.BYTES).hex(), 0
        text = self._hex[at:at + 32]
        self._at = at + 32
        return f"<urn:uuid:{text[:8]}-{text[8:12]}-4{text[13:16]}-{_VARIANT[text[16]]}{text[17:20]}-{text[20:]}>"


random_record_id = RandomIds()
os.register_at_fork(after_in_child=random_record_id.reset)


@dataclass
class RecordIds:
    """Where record ids come from: random UUIDs, or a fixed sequence in tests."""

    make: Callable[[], str] = random_record_id

    def __call__(self) -> str:
        return self.make()


@dataclass
class Fetch:
    """What the WARC needs of one fetch."""

    url: str
    method: str
    request_headers: list[tuple[str, str]]
    status: int
    reason: str
    protocol: str
    response_headers: list[tuple[str, str]]
    payload: bytes
    fetched_at: float
    #: The response's Content-Encoding as received (the payload is decoded), if any.
    original_encoding: str | None = None
    ip_address: str | None = None
    outlinks: list[str] = field(default_factory=list)
    fetch_duration: float | None = None
    #: Set for a revisit: the first capture of this payload (URL, WARC date).
    revisit_of: tuple[str, str] | None = None
    #: Why it is a revisit (with ``revisit_of``).
    revisit_profile: RevisitProfile = field(default_factory=lambda: RevisitProfile.IDENTICAL_PAYLOAD)
    #: The payload's digest when the caller has it already (the dedup pipeline's): not computed twice.
    payload_digest: str | None = None
    #: The DOM after a browser rendered the page (UTF-8 HTML), if it was rendered.
    rendered: bytes | None = None


class RevisitProfile(Enum):
    """WARC 1.1 revisit profiles."""

    #: The payload is byte for byte one already archived (``revisit_of`` names it).
    IDENTICAL_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
    #: The server answered a conditional request with 304 (``revisit_of``: the capture revalidated).
    SERVER_NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"


def stored_response_headers(fetch: Fetch) -> list[tuple[str, str]]:
    """Response headers that agree with the stored payload (see the module docstring).

    ``Transfer-Encoding`` is always renamed (the payload is stored de-chunked),
    ``Content-Encoding`` when the payload was decoded, ``Content-Length`` when
    it is not the stored length (a true one is then added).
    """
    headers = []
    true_length = str(len(fetch.payload))
    needs_length = True
    for name, value in fetch.response_headers:
        lowered = name.lower()
        if lowered == "transfer-encoding" or (lowered == "content-encoding" and fetch.original_encoding):
            headers.append((RENAMED_PREFIX + name, value))
        elif lowered == "content-length":
            if value.strip() == true_length and needs_length:
                headers.append((name, value))
                needs_length = False
            else:
                headers.append((RENAMED_PREFIX + name, value))
        else:
            headers.append((name, value))
    if needs_length:
        headers.append(("Content-Length", true_length))
    return headers


def url_target(url: str) -> tuple[str, str]:
    """The authority and request target (path or ``/``, then ``?query`` if any) of ``url``, as
    ``urlsplit`` gives them: a plain URL (printable ASCII, no space at either end, no IPv6 literal)
    read by the normalizer's regular expression (a crawled URL is new each time: ``urlsplit``'s cache
    never hits, 2 to 4 us a URL), any other by ``urlsplit``."""
    match = URL_PARTS.match(url) if url.isascii() and url.isprintable() and url[-1:] != " " else None
    authority = match[2] if match is not None else None
    if match is not None and authority is not None and "[" not in authority and "]" not in authority:
        netloc, path, query = authority, match[3], match[4]
    else:
        parts = urlsplit(url)
        netloc, path, query = parts.netloc, parts.path, parts.query
    target = path or "/"
    return netloc, f"{target}?{query}" if query else target


def _request_line(fetch: Fetch) -> tuple[str, list[tuple[str, str]]]:
    netloc, target = url_target(fetch.url)
    # Credentials sent (a proxy's, HTTP authentication's) are never archived.
    headers = [(name, MASK if name.lower() in _CREDENTIAL_HEADERS else value) for name, value in fetch.request_headers]
    if not any(name.lower() == "host" for name, _ in headers):
        headers.insert(0, ("Host", netloc))
    return f"{fetch.method} {target} {fetch.protocol}", headers


#: Request headers whose values are credentials: archived as ``***``.
_CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization"})
_EMPTY_DIGEST = payload_digest(b"")
_HTTP_CONTENT_TYPE = {"request": "application/http; msgtype=request", "response": "application/http; msgtype=response",
                      "revisit": "application/http; msgtype=response"}


@dataclass(slots=True)
class WarcRecord:
    """One fetch record (request, response, revisit, metadata), ready to be serialised.

    The bytes are warcio's, header for header (``tests/test_storage_units.py``
    compares them with warcio's own writer): the WARC headers in the order
    warcio's record builder adds them, then ``WARC-Block-Digest``,
    ``Content-Type`` and ``Content-Length``; the HTTP header block as warcio
    writes it (ASCII; a header that is not is %-encoded by warcio's own rule).
    A revisit's block is its HTTP headers alone.
    """

    rec_type: str
    #: WARC headers up to (without) the block digest, content type and length.
    headers: list[tuple[str, str]]
    content_type: str
    #: The HTTP status line and headers, as written (empty for metadata).
    http: bytes
    payload: bytes
    #: For the CDXJ index (response and revisit records).
    url: str = ""
    date: str = ""
    status: str = ""
    mime: str = ""
    #: The payload digest, if known: the CDXJ index's (response and revisit records), and the block
    #: digest of a record whose block is its payload (metadata, conversion: not computed twice).
    digest: str = ""

    def to_bytes(self) -> bytes:
        payload = b"" if self.rec_type == "revisit" else self.payload
        # Without an HTTP head the block is the payload: its digest is the payload's, if the record has it.
        digest = sha1_base32(self.http, payload) if self.http else self.digest or sha1_base32(payload)
        head = "".join([f"{name}: {value}\r\n" for name, value in self.headers])
        head = (f"WARC/1.1\r\n{head}WARC-Block-Digest: {digest}\r\nContent-Type: {self.content_type}\r\n"
                f"Content-Length: {len(self.http) + len(payload)}\r\n\r\n")
        return b"".join((head.encode("utf-8"), self.http, payload, b"\r\n\r\n"))


def http_block(first_line: str, headers: list[tuple[str, str]]) -> bytes:
    """An HTTP message's head as warcio writes it into a record."""
    text = first_line + "\r\n" + "".join([f"{name}: {value}\r\n" for name, value in headers]) + "\r\n"
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        # warcio's rule for headers that are not ASCII (RFC 8187 %-encoding); rare, so its own code.
        return bytes(StatusAndHeaders(first_line, list(headers)).to_ascii_bytes())


def _mime(headers: list[tuple[str, str]]) -> str:
    for name, value in headers:
        if name.lower() == "content-type":
            return value.split(";")[0].strip()
    return ""


class RecordBuilder:
    """Builds the records of a fetch; holds no file. Thread-safe."""

    def __init__(self, ids: RecordIds | None = None) -> None:
        self.ids = ids or RecordIds()
        # For warcinfo records only (one per file): its record factory needs a writer instance.
        self._factory = BufferWARCWriter(gzip=False, warc_version="WARC/1.1")

    @staticmethod
    def _start(fetch: Fetch, record_id: str, date: str, *extra: tuple[str, str]) -> list[tuple[str, str]]:
        headers = [("WARC-Record-ID", record_id), ("WARC-Date", date)]
        if fetch.ip_address:
            headers.append(("WARC-IP-Address", fetch.ip_address))
        headers += extra
        return headers

    def request(self, fetch: Fetch, concurrent_to: str, date: str) -> WarcRecord:
        line, headers = _request_line(fetch)
        warc = self._start(fetch, self.ids(), date, ("WARC-Concurrent-To", concurrent_to))
        warc += [("WARC-Type", "request"), ("WARC-Target-URI", fetch.url), ("WARC-Payload-Digest", _EMPTY_DIGEST)]
        return WarcRecord("request", warc, _HTTP_CONTENT_TYPE["request"], http_block(line, headers), b"")

    def _status(self, fetch: Fetch) -> tuple[str, list[tuple[str, str]]]:
        return f"{fetch.protocol} {f'{fetch.status} {fetch.reason}'.strip()}", stored_response_headers(fetch)

    def response(self, fetch: Fetch, record_id: str, date: str) -> WarcRecord:
        line, headers = self._status(fetch)
        digest = fetch.payload_digest or payload_digest(fetch.payload)
        warc = self._start(fetch, record_id, date)
        warc += [("WARC-Type", "response"), ("WARC-Target-URI", fetch.url), ("WARC-Payload-Digest", digest)]
        return WarcRecord("response", warc, _HTTP_CONTENT_TYPE["response"], http_block(line, headers),
                          fetch.payload, fetch.url, date, str(fetch.status), _mime(headers), digest)

    def revisit(self, fetch: Fetch, record_id: str, date: str) -> WarcRecord:
        assert fetch.revisit_of is not None
        refers_to_uri, refers_to_date = fetch.revisit_of
        line, headers = self._status(fetch)
        refers = [("WARC-Profile", fetch.revisit_profile.value), ("WARC-Refers-To-Target-URI", refers_to_uri),
                  ("WARC-Refers-To-Date", refers_to_date)]
        if fetch.revisit_profile is RevisitProfile.SERVER_NOT_MODIFIED:
            # No payload to digest: the record holds the 304's status line and headers.
            warc = self._start(fetch, record_id, date, *refers)
            warc += [("WARC-Type", "revisit"), ("WARC-Target-URI", fetch.url)]
            digest = ""
        else:
            digest = fetch.payload_digest or payload_digest(fetch.payload)
            warc = self._start(fetch, record_id, date)
            warc += [("WARC-Type", "revisit"), ("WARC-Target-URI", fetch.url), *refers,
                     ("WARC-Payload-Digest", digest)]
        return WarcRecord("revisit", warc, _HTTP_CONTENT_TYPE["revisit"], http_block(line, headers), b"",
                          fetch.url, date, str(fetch.status), "warc/revisit", digest)

    def metadata(self, fetch: Fetch, concurrent_to: str, date: str) -> WarcRecord | None:
        lines = []
        if fetch.fetch_duration is not None:
            lines.append(f"fetchTimeMs: {int(fetch.fetch_duration * 1000)}")
        lines += [f"outlink: {link}" for link in fetch.outlinks]
        if not lines:
            return None
        body = ("\r\n".join(lines) + "\r\n").encode("utf-8", "surrogateescape")
        warc = self._start(fetch, self.ids(), date, ("WARC-Concurrent-To", concurrent_to))
        digest = payload_digest(body)
        warc += [("WARC-Type", "metadata"), ("WARC-Target-URI", fetch.url), ("WARC-Payload-Digest", digest)]
        return WarcRecord("metadata", warc, "application/warc-fields", b"", body, digest=digest)

    def conversion(self, fetch: Fetch, refers_to: str, date: str) -> WarcRecord:
        """The rendered DOM, derived from the record ``refers_to`` (WARC 1.1 ``conversion``)."""
        assert fetch.rendered is not None
        body = fetch.rendered
        digest = payload_digest(body)
        warc = [("WARC-Record-ID", self.ids()), ("WARC-Date", date), ("WARC-Refers-To", refers_to),
                ("WARC-Type", "conversion"), ("WARC-Target-URI", fetch.url), ("WARC-Payload-Digest", digest)]
        return WarcRecord("conversion", warc, "text/html; charset=utf-8", b"", body, digest=digest)

    def fetch_records(self, fetch: Fetch, with_metadata: bool = True) -> list[WarcRecord]:
        """Request, response (or revisit), conversion, metadata: in the order they are written."""
        response_id = self.ids()
        date = warc_date(fetch.fetched_at)
        main = self.revisit(fetch, response_id, date) if fetch.revisit_of else self.response(fetch, response_id, date)
        records = [self.request(fetch, response_id, date), main]
        if fetch.rendered is not None:
            records.append(self.conversion(fetch, response_id, date))
        if with_metadata:
            metadata = self.metadata(fetch, response_id, date)
            if metadata is not None:
                records.append(metadata)
        return records

    def warcinfo(self, filename: str, info: dict[str, Any], date: float) -> ArcWarcRecord:
        record = self._factory.create_warcinfo_record(filename, info)
        record.rec_headers.replace_header("WARC-Record-ID", self.ids())
        record.rec_headers.replace_header("WARC-Date", warc_date(date))
        return record
