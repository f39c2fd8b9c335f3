"""Building WARC/1.1 records from a fetch (warcio), separate from writing them.

For each fetch: a ``request`` record (the HTTP request as sent) and a
``response`` record (status line, headers, payload) that names the request in
``WARC-Concurrent-To``, or, for a payload already archived, a ``revisit``
record (profile ``identical-payload-digest``, with ``WARC-Refers-To-Target-URI``
and ``WARC-Refers-To-Date``) instead of a second copy; a ``304 Not Modified``
answer to a conditional revisit is a ``revisit`` record of profile
``server-not-modified`` referring to the capture it revalidated; optionally a
``metadata`` record (outlinks, fetch timing). ``warcinfo`` opens a file.

The payload is what the server sent, decompressed by the crawler when it came
with a ``Content-Encoding``; then, as Common Crawl does, the original
``Content-Encoding``, ``Content-Length`` and ``Transfer-Encoding`` headers are
kept under ``X-Crawler-`` names and a true ``Content-Length`` is written, so
the headers agree with the stored payload and ``warcio check`` verifies every
block and payload digest.

Record ids and dates come from the caller (:class:`RecordIds`), so tests can
fix them and compare bytes.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from io import BytesIO
from typing import Any
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import BufferWARCWriter

RENAMED_PREFIX = "X-Crawler-"


def payload_digest(payload: bytes) -> str:
    """``sha1:<base32>``, the form of ``WARC-Payload-Digest``."""
    return "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode("ascii")


def warc_date(epoch: float) -> str:
    """ISO 8601 UTC with microseconds, as WARC/1.1 allows."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class RecordIds:
    """Where record ids come from: random UUIDs, or a fixed sequence in tests."""

    make: Callable[[], str] = field(default=lambda: f"<urn:uuid:{uuid.uuid4()}>")

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


def _request_line(fetch: Fetch) -> tuple[str, list[tuple[str, str]]]:
    parts = urlsplit(fetch.url)
    target = parts.path or "/"
    if parts.query:
        target = f"{target}?{parts.query}"
    headers = list(fetch.request_headers)
    if not any(name.lower() == "host" for name, _ in headers):
        headers.insert(0, ("Host", parts.netloc))
    return f"{fetch.method} {target} {fetch.protocol}", headers


class RecordBuilder:
    """Builds the records of a fetch; holds no file. Thread-safe."""

    def __init__(self, ids: RecordIds | None = None) -> None:
        self.ids = ids or RecordIds()
        # Only its record factories are used: they need a writer instance.
        self._factory = BufferWARCWriter(gzip=False, warc_version="WARC/1.1")

    def _warc_headers(self, fetch: Fetch, record_id: str, **extra: str) -> dict[str, str]:
        headers = {"WARC-Record-ID": record_id, "WARC-Date": warc_date(fetch.fetched_at)}
        if fetch.ip_address:
            headers["WARC-IP-Address"] = fetch.ip_address
        headers.update(extra)
        return headers

    def request(self, fetch: Fetch, concurrent_to: str) -> ArcWarcRecord:
        line, headers = _request_line(fetch)
        http = StatusAndHeaders(line, headers, is_http_request=True)
        return self._factory.create_warc_record(
            fetch.url, "request", payload=BytesIO(b""), length=0, http_headers=http,
            warc_headers_dict=self._warc_headers(fetch, self.ids(), **{"WARC-Concurrent-To": concurrent_to}),
        )

    def response(self, fetch: Fetch, record_id: str) -> ArcWarcRecord:
        http = StatusAndHeaders(f"{fetch.status} {fetch.reason}".strip(), stored_response_headers(fetch),
                                protocol=fetch.protocol)
        return self._factory.create_warc_record(
            fetch.url, "response", payload=BytesIO(fetch.payload), length=len(fetch.payload), http_headers=http,
            warc_headers_dict=self._warc_headers(fetch, record_id),
        )

    def revisit(self, fetch: Fetch, record_id: str) -> ArcWarcRecord:
        assert fetch.revisit_of is not None
        refers_to_uri, refers_to_date = fetch.revisit_of
        http = StatusAndHeaders(f"{fetch.status} {fetch.reason}".strip(), stored_response_headers(fetch),
                                protocol=fetch.protocol)
        if fetch.revisit_profile is RevisitProfile.SERVER_NOT_MODIFIED:
            # No payload to digest: the record holds the 304's status line and headers.
            headers = self._warc_headers(fetch, record_id, **{
                "WARC-Profile": fetch.revisit_profile.value,
                "WARC-Refers-To-Target-URI": refers_to_uri,
                "WARC-Refers-To-Date": refers_to_date,
            })
            return self._factory.create_warc_record(
                fetch.url, "revisit", payload=BytesIO(b""), length=0, http_headers=http, warc_headers_dict=headers,
            )
        return self._factory.create_revisit_record(
            fetch.url, payload_digest(fetch.payload), refers_to_uri, refers_to_date, http_headers=http,
            warc_headers_dict=self._warc_headers(fetch, record_id),
        )

    def metadata(self, fetch: Fetch, concurrent_to: str) -> ArcWarcRecord | None:
        lines = []
        if fetch.fetch_duration is not None:
            lines.append(f"fetchTimeMs: {int(fetch.fetch_duration * 1000)}")
        lines += [f"outlink: {link}" for link in fetch.outlinks]
        if not lines:
            return None
        body = ("\r\n".join(lines) + "\r\n").encode("utf-8", "surrogateescape")
        return self._factory.create_warc_record(
            fetch.url, "metadata", payload=BytesIO(body), length=len(body), warc_content_type="application/warc-fields",
            warc_headers_dict=self._warc_headers(fetch, self.ids(), **{"WARC-Concurrent-To": concurrent_to}),
        )

    def fetch_records(self, fetch: Fetch, with_metadata: bool = True) -> list[ArcWarcRecord]:
        """Request, response (or revisit), metadata: in the order they are written."""
        response_id = self.ids()
        main = self.revisit(fetch, response_id) if fetch.revisit_of else self.response(fetch, response_id)
        records = [self.request(fetch, response_id), main]
        if with_metadata:
            metadata = self.metadata(fetch, response_id)
            if metadata is not None:
                records.append(metadata)
        return records

    def warcinfo(self, filename: str, info: dict[str, Any], date: float) -> ArcWarcRecord:
        record = self._factory.create_warcinfo_record(filename, info)
        record.rec_headers.replace_header("WARC-Record-ID", self.ids())
        record.rec_headers.replace_header("WARC-Date", warc_date(date))
        return record
