"""Rotating ``.warc.gz`` files with a CDXJ index beside each.

Writing is split in three: :meth:`WarcFileWriter.encode` serialises and gzips
a fetch's records (CPU only); :meth:`WarcFileWriter.fill` appends them to the
open file and flushes it (into the page cache: the crawl runs both on the
event loop); a file that reaches ``WARC_MAX_SIZE`` comes back as a
:class:`FullFile`, whose :meth:`~FullFile.finish` (``fsync``, the CDXJ index,
the rename) the crawl runs in a thread. :meth:`WarcFileWriter.append` does it
all in the calling thread.

A file is written as ``<name>.warc.gz.open`` in the spool directory, one gzip
member per record, flushed before the fetches it holds count as stored (a
killed process loses nothing acknowledged), and closed when it reaches ``WARC_MAX_SIZE`` or when the
crawl closes: renamed to ``<name>.warc.gz``, with ``<name>.cdxj`` beside it.
Names follow the usual pattern and never collide between workers::

    <prefix>-<YYYYmmddHHMMSS>-<serial:05d>-<host>-<pid>-<random>.warc.gz

An ``.open`` file left by a crashed process is recovered at start-up: cut
back to its last complete record, indexed and closed like any other. Workers
on one machine may share a spool: a writer holds an exclusive ``flock`` on its
open file (the kernel drops it when the process dies, however it dies), and
recovery skips every file whose lock is held, so a starting worker never
touches the file of a live one.

The CDXJ index has one line per response or revisit record, keyed as replay
tools (pywb, OutbackCDX) look records up (:func:`surt`)::

    <SURT key> <14-digit timestamp> {"url": ..., "mime": ..., "status": ...,
      "digest": ..., "length": ..., "offset": ..., "filename": ...}
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import secrets
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from warcio.archiveiterator import ArchiveIterator
from warcio.exceptions import ArchiveLoadFailed
from warcio.recordloader import ArcWarcRecord
from warcio.warcwriter import WARCWriter

from crawler.warc.gzip import Gzip
from crawler.warc.records import RecordBuilder, WarcRecord
from crawler.warc.surtkey import surt

OPEN_SUFFIX = ".open"


@dataclass(frozen=True)
class ClosedFile:
    """A finished WARC file and its index, ready for the store."""

    warc: Path
    index: Path


@dataclass
class FullFile:
    """A WARC file no longer written to, to be finished (in a thread: it blocks on the disk)."""

    handle: IO[bytes]
    path: Path
    name: str
    #: (index fields, offset, length) of each indexed record.
    index: list[tuple[IndexFields, int, int]]

    def finish(self) -> ClosedFile:
        """Flush and ``fsync`` the file, write its CDXJ index, rename it to its final name."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        return _finish(self.path, [fields.line(offset, length, self.name) for fields, offset, length in self.index])


class WarcFileWriter:
    def __init__(
        self,
        spool: Path,
        prefix: str,
        max_size: int,
        builder: RecordBuilder,
        warcinfo: dict[str, Any],
        clock: Any = time.time,
        worker_id: str | None = None,
        gzip: Gzip | None = None,
    ) -> None:
        self.spool = spool
        self.prefix = prefix
        self.max_size = max_size
        self.builder = builder
        self.warcinfo = warcinfo
        self.clock = clock
        self.worker_id = worker_id or f"{socket.gethostname().split('.')[0]}-{os.getpid()}-{secrets.token_hex(3)}"
        self.serial = 0
        self.gzip = gzip or Gzip()
        self._handle: IO[bytes] | None = None
        self._path: Path | None = None
        self._name = ""
        self._index: list[tuple[IndexFields, int, int]] = []
        spool.mkdir(parents=True, exist_ok=True)

    @property
    def current(self) -> Path | None:
        return self._path

    def _open(self) -> None:
        self.serial += 1
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime(self.clock()))
        name = f"{self.prefix}-{stamp}-{self.serial:05d}-{self.worker_id}.warc.gz"
        self._path = self.spool / (name + OPEN_SUFFIX)
        self._handle = open(self._path, "wb")  # noqa: SIM115 - closed in close()
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)  # ours alone: see recover_open_files
        self._name = name
        self._index = []
        warcinfo = self.builder.warcinfo(name, self.warcinfo, self.clock())
        self._handle.write(encode_record(warcinfo, self.gzip).data)

    def encode(self, records: list[WarcRecord]) -> list[EncodedRecord]:
        """Serialise and gzip one fetch's records, one gzip member each (no I/O, no shared state)."""
        return [encode_record(record, self.gzip) for record in records]

    def append(self, fetches: list[list[EncodedRecord]]) -> list[ClosedFile]:
        """Append encoded fetches, each whole in one file; flushed; returns files closed by rotation."""
        return [full.finish() for full in self.fill(fetches)]

    def fill(self, fetches: list[list[EncodedRecord]]) -> list[FullFile]:
        """Append encoded fetches, each whole in one file, and flush; files that reached the size, to finish."""
        full = []
        for records in fetches:
            if self._handle is None:
                self._open()
            handle = self._handle
            assert handle is not None
            index = self._index
            for record in records:
                if record.index is not None:
                    index.append((record.index, handle.tell(), len(record.data)))
                handle.write(record.data)
            if handle.tell() >= self.max_size:
                full.append(self.detach())
        if self._handle is not None:
            self._handle.flush()
        return full

    def write(self, records: list[WarcRecord]) -> list[ClosedFile]:
        """Encode and append one fetch (for callers without an event loop to spare)."""
        return self.append([self.encode(records)])

    def detach(self) -> FullFile:
        """Stop writing to the current file (the next fetch opens another); it is finished by the caller."""
        assert self._handle is not None and self._path is not None
        full = FullFile(self._handle, self._path, self._name, self._index)
        self._handle = self._path = None
        self._index = []
        return full

    def close(self) -> ClosedFile:
        """Close the current file: rename it and write its CDXJ index."""
        return self.detach().finish()

    def close_if_open(self) -> list[ClosedFile]:
        return [self.close()] if self._handle is not None else []


def _finish(path: Path, index_lines: list[str]) -> ClosedFile:
    final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
    index = final.with_name(final.name.removesuffix(".warc.gz") + ".cdxj")
    index.write_text("".join(line + "\n" for line in sorted(index_lines)), encoding="utf-8")
    path.rename(final)
    return ClosedFile(final, index)


def recover_open_files(spool: Path) -> list[ClosedFile]:
    """Close the ``.open`` files a crashed writer left: keep every complete record, index them.

    A file whose writer is alive (its ``flock`` is held) is left alone.
    """
    recovered = []
    for path in sorted(spool.glob(f"*.warc.gz{OPEN_SUFFIX}")):
        try:
            handle = open(path, "r+b")  # noqa: SIM115 - closed below
        except FileNotFoundError:
            continue  # closed by its writer meanwhile
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live worker's file
            if not path.exists():
                continue  # renamed by its writer between the open and the lock
            recovered.append(_recover(path, handle))
        finally:
            handle.close()
    return recovered


def _recover(path: Path, handle: IO[bytes]) -> ClosedFile:
    """Cut a crashed writer's file back to its last complete record, index it and close it."""
    good = 0
    lines: list[str] = []
    name = path.name.removesuffix(OPEN_SUFFIX)
    iterator = ArchiveIterator(handle)
    try:
        for record in iterator:
            if record.rec_type in ("response", "revisit"):
                record.content_stream().read()
            end = iterator.get_record_offset() + iterator.get_record_length()
            if record.rec_type in ("response", "revisit"):
                start = iterator.get_record_offset()
                lines.append(_index_line(record, start, end - start, name))
            good = end
    except (ArchiveLoadFailed, EOFError, OSError, ValueError):
        pass
    handle.truncate(good)
    handle.flush()
    return _finish(path, lines)


@dataclass(frozen=True, slots=True)
class IndexFields:
    """A record's CDXJ line, but for its place in a file."""

    key: str
    timestamp: str
    fields: dict[str, str | None]

    def line(self, offset: int, length: int, filename: str) -> str:
        fields = {**self.fields, "length": str(length), "offset": str(offset), "filename": filename}
        return f"{self.key} {self.timestamp} {json.dumps(fields, sort_keys=True)}"


@dataclass(frozen=True, slots=True)
class EncodedRecord:
    """One record as it goes into the file: a gzip member, and its index entry if it has one."""

    data: bytes
    index: IndexFields | None


def record_bytes(record: WarcRecord | ArcWarcRecord) -> bytes:
    """A record serialised, uncompressed (a fetch's own, or warcio's for a warcinfo record)."""
    if isinstance(record, WarcRecord):
        return record.to_bytes()
    buffer = io.BytesIO()
    WARCWriter(buffer, gzip=False, warc_version="1.1").write_record(record)
    return buffer.getvalue()


#: What a WARC date has besides its digits up to the seconds (``2026-12-06T17:42:21``): the CDXJ timestamp
#: is the digits.
_DATE_PUNCTUATION = str.maketrans("", "", "-T:")


def encode_record(record: WarcRecord | ArcWarcRecord, gzip: Gzip) -> EncodedRecord:
    """One record serialised, then gzipped as a member of its own.

    Not warcio's gzip writer: it is zlib fixed at level 9, many times slower
    for a few percent of size (see :mod:`crawler.warc.gzip`).
    """
    data = gzip(record_bytes(record))
    index = None
    if isinstance(record, WarcRecord) and record.rec_type in ("response", "revisit"):
        timestamp = record.date[:19].translate(_DATE_PUNCTUATION)
        index = IndexFields(surt(record.url), timestamp, {"url": record.url, "mime": record.mime,
                                                          "status": record.status, "digest": record.digest or None})
    return EncodedRecord(data, index)


def _index_fields(record: ArcWarcRecord) -> IndexFields:
    """The index entry of a record read back from a file (recovery)."""
    url = record.rec_headers.get_header("WARC-Target-URI")
    date = record.rec_headers.get_header("WARC-Date")
    http = record.http_headers
    fields = {
        "url": url,
        "mime": "warc/revisit" if record.rec_type == "revisit"
        else ((http.get_header("Content-Type") or "").split(";")[0].strip() if http else ""),
        "status": http.get_statuscode() if http else "",
        "digest": record.rec_headers.get_header("WARC-Payload-Digest"),
    }
    timestamp = "".join(ch for ch in date[:19] if ch.isdigit())
    return IndexFields(surt(url), timestamp, fields)


def _index_line(record: ArcWarcRecord, offset: int, length: int, filename: str) -> str:
    return _index_fields(record).line(offset, length, filename)
