"""The URL metadata record: its fields, their order, its states (pure data, no I/O).

One record per fetched URL, stored as a msgpack array in the host's
``urlmeta:<host>`` hash (see :mod:`crawler.metadata.store`); the Lua scripts
read and write its fields by the positions :data:`RECORD_FIELDS` gives them
(``URLMETA`` in the generated prelude, :mod:`crawler.schema`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import msgpack

RECORD_VERSION = 1
#: A stored record's fields, in order (the Lua scripts index them through ``URLMETA``, see :mod:`crawler.schema`).
RECORD_FIELDS = (
    "version", "state", "fetched_at", "status", "digest8", "simhash8", "etag", "last_modified", "length",
    "outlinks", "observations", "changes", "next_visit", "first_fetch",
)


class UrlState(IntEnum):
    QUEUED = 0
    FETCHED = 1
    FAILED = 2
    DEAD = 3


@dataclass(frozen=True)
class UrlRecord:
    state: UrlState
    fetched_at: int
    status: int = 0
    digest8: bytes = b""
    simhash8: bytes = b""
    etag: str = ""
    #: Last-Modified as epoch seconds (0: none); an HTTP-date again with email.utils.formatdate.
    last_modified: int = 0
    length: int = 0
    outlinks: int = 0
    observations: int = 0
    changes: int = 0
    next_visit: int = 0
    first_fetch: int = 0

    def fields(self) -> list[object]:
        """The record as stored, in :data:`RECORD_FIELDS` order."""
        return [RECORD_VERSION, int(self.state), self.fetched_at, self.status, self.digest8, self.simhash8, self.etag,
                self.last_modified, self.length, self.outlinks, self.observations, self.changes, self.next_visit,
                self.first_fetch]

    def pack(self) -> bytes:
        # Redis's Lua cmsgpack reads the old "raw" type only, not "bin".
        packed: bytes = msgpack.packb(self.fields(), use_bin_type=False)
        return packed

    @classmethod
    def unpack(cls, blob: bytes) -> UrlRecord:
        fields = msgpack.unpackb(blob, raw=True)
        if len(fields) == 13:  # written before first_fetch was kept
            fields.append(0)
        _, state, fetched_at, status, digest8, simhash8, etag, last_modified, length, outlinks = fields[:10]
        obs, changes, nxt, first = fields[10:14]
        return cls(UrlState(state), fetched_at, status, digest8, simhash8, etag.decode("utf-8", "replace"),
                   last_modified, length, outlinks, obs, changes, nxt, first)

    @property
    def simhash(self) -> int | None:
        return int.from_bytes(self.simhash8, "big") if len(self.simhash8) == 8 else None
