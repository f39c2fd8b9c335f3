"""Per-URL metadata in Redis, compact and sharded by host.

One Redis hash per host (``urlmeta:<host>`` under the host's frontier shard
prefix, so it moves with the host's queues), one field per fetched URL: the
first 8 bytes of the URL's fingerprint, valued by a msgpack array (no None:
missing strings are ``""``, missing numbers ``0``)::

    [version, state, fetched_at, status, digest8, simhash8, etag,
     last_modified, length, outlinks, observations, changes, next_visit,
     first_fetch]

``digest8`` is the first 8 bytes of the payload's SHA-1 (enough to tell a
change), ``simhash8`` the page's SimHash (8 bytes, big-endian),
``last_modified`` epoch seconds, ``next_visit`` the crawl-clock second the
URL is due again (0: not scheduled), ``first_fetch`` the time of its first
observation (with ``fetched_at`` and ``observations``, the span the recrawl
estimator needs). Times are in the crawl clock (:mod:`crawler.policy.clock`).
A record is about 60 bytes, so a host's hash
stays a compact listpack under Redis's default ``hash-max-listpack-value``
(64) while the host has at most ``hash-max-listpack-entries`` URLs (128 by
default, 512 in the embedded server). The record
script (``lua/urlmeta.lua``) keeps the change history: ``observations``
(fetches with content, a ``304 Not Modified`` included) and ``changes``
(fetches whose content changed: digest differs and SimHash distance above
``METADATA_CHANGE_DISTANCE``; a 304 is unchanged). It also counts the host's
pages, errors and near duplicates (``hostq``, the host quality the priority
policy reads) and reads the URL's in-link estimate. Measured
with ``benchmarks/metadata.py``. URLs queued but not yet fetched have no
record.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawler.metadata.record import RECORD_FIELDS, RECORD_VERSION, UrlRecord, UrlState
from crawler.redisconn.batch import BatchedScripts
from crawler.schema import script_source
from crawler.urls import url_fingerprint

__all__ = [
    "PAGE_ERROR",
    "PAGE_NEAR_DUPLICATE",
    "RECORD_FIELDS",
    "RECORD_VERSION",
    "Observation",
    "UrlMetadataStore",
    "UrlRecord",
    "UrlState",
    "digest8",
    "url_field",
]

if TYPE_CHECKING:
    from crawler.frontier.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis

@dataclass(frozen=True)
class Observation:
    """What a recorded fetch says about change (for the recrawl policy)."""

    changed: bool | None  # None: the first fetch of the URL, or no content
    observations: int
    changes: int
    previous_fetch: int
    first_fetch: int = 0
    #: Estimated links to the URL seen so far (the frontier's in-link sketch).
    inlinks: int = 0
    #: The host's counters after this fetch: pages, errors, near duplicates.
    host_pages: int = 0
    host_errors: int = 0
    host_near_duplicates: int = 0
    #: A repeat delivery (same status and payload within the repeat window): nothing was recorded.
    repeat: bool = False


#: Flags of a recorded fetch, for the host's quality counters.
PAGE_ERROR = 1
PAGE_NEAR_DUPLICATE = 2


def digest8(payload_digest: str) -> bytes:
    """The first 8 bytes of a ``sha1:<base32>`` payload digest."""
    return base64.b32decode(payload_digest.removeprefix("sha1:"))[:8]


def url_field(url: str) -> bytes:
    return url_fingerprint(url)[:8]


class UrlMetadataStore:
    def __init__(
        self, client: AnyRedis, router: ShardRouter, change_distance: int = 3, inlink_cells: int = 0,
        repeat_window: int = 0,
    ) -> None:
        # The frontier's shared helpers (the in-link sketch) come first.
        source = script_source("crawler.metadata", "urlmeta")
        self.client = client
        self.scripts = BatchedScripts(client, {"urlmeta": source})
        self.router = router
        self.change_distance = change_distance
        self.inlink_cells = inlink_cells
        #: Seconds (crawl clock) within which the same status and payload again is a repeat delivery.
        self.repeat_window = repeat_window

    def host_key(self, host: str) -> str:
        return self.router.keys_for(host).urlmeta(host)

    async def open(self) -> None:
        await self.scripts.load()

    async def record(
        self, url: str, host: str, record: UrlRecord, *, flags: int = 0, inlink_positions: bytes = b""
    ) -> Observation:
        """Record a fetch; ``inlink_positions`` are the URL's in-link sketch cells (little-endian uint32)."""
        keys = self.router.keys_for(host)
        reply = await self.scripts.call(
            "urlmeta",
            [keys.urlmeta(host)],
            [url_field(url), record.pack(), self.change_distance, keys.prefix, host, flags, inlink_positions,
             self.inlink_cells, self.repeat_window],
        )
        changed, observations, changes, previous, first, inlinks, pages, errors, near, repeat = (int(x) for x in reply)
        return Observation(
            None if changed < 0 else bool(changed), observations, changes, previous, first, inlinks, pages, errors,
            near, bool(repeat),
        )

    async def get(self, url: str, host: str) -> UrlRecord | None:
        blob = await self.client.hget(self.host_key(host), url_field(url))
        return UrlRecord.unpack(blob) if isinstance(blob, bytes) else None

    async def close(self) -> None:
        await self.scripts.close()
