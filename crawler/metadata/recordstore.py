"""URL records in Redis: one per fetched URL, in its host's frontier shard (``lua/urlmeta.lua``).

A record (:mod:`crawler.metadata.record`) keeps a URL's state, last fetch,
status, payload digest, SimHash, validators, length, outlink count, change
history and recrawl schedule, and the URL itself, about 55 bytes plus the
ETag and the URL. Records live in small hashes of the host's shard
(``url:<bucket>``, field: the URL key), which grow by linear hashing so each
stays a listpack (``crawlstate/lua/lhash.lua``; :mod:`crawler.crawlstate.compact`).

The record script keeps the change history: ``observations`` (fetches with
content, a ``304 Not Modified`` included) and ``changes`` (fetches whose
content changed: digest differs and SimHash distance above
``METADATA_CHANGE_DISTANCE``; a 304 is unchanged). It also counts the host's
pages, errors and near duplicates (``hostq``, the host quality the priority
policy reads) and reads the URL's in-link estimate. URLs queued but not yet
fetched have no record. Measured with ``benchmarks/memory.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from crawler.crawlstate.compact import BucketSizes
from crawler.metadata.record import RECORD_FIELDS, RECORD_VERSION, UrlRecord, UrlState
from crawler.redisconn.batch import BatchedScripts
from crawler.urls import page_fingerprint, sketch_offsets, url_fingerprint, url_key
from crawler.warc.digests import sha1_bytes

__all__ = [
    "PAGE_ERROR",
    "PAGE_NEAR_DUPLICATE",
    "RECORD_FIELDS",
    "RECORD_VERSION",
    "Observation",
    "RevisitRequest",
    "UrlMetadataStore",
    "UrlRecord",
    "UrlState",
    "digest4",
]

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
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
    #: The next visit planned with the record (crawl-clock seconds; 0: none asked) and its level.
    next_visit: int = 0
    level: int = 0


class RevisitRequest(NamedTuple):
    """What the record script needs to plan a URL's next visit as it records the fetch."""

    #: The recrawl policy's numbers (:func:`crawler.policy.recrawl.revisit_terms`).
    terms: str
    depth: int
    #: The host's importance, 0..1 (:meth:`crawler.policy.priority.PriorityPolicy.importance_of`).
    host_importance: float
    #: This fetch's time, crawl-clock seconds.
    now: float
    #: Epoch microseconds of the capture holding the payload (the revisit's validators' date).
    captured: int


#: Flags of a recorded fetch, for the host's quality counters.
PAGE_ERROR = 1
PAGE_NEAR_DUPLICATE = 2


def digest4(payload_digest: str) -> bytes:
    """The first 4 bytes of a ``sha1:<base32>`` payload digest (enough to tell a change)."""
    return sha1_bytes(payload_digest)[:4]


class UrlMetadataStore:
    def __init__(
        self, client: AnyRedis, router: ShardRouter, change_distance: int = 3, inlink_cells: int = 0,
        repeat_window: int = 0, sizes: BucketSizes | None = None,
    ) -> None:
        self.client = client
        self.scripts = BatchedScripts(client)
        self.router = router
        self.change_distance = change_distance
        self.inlink_cells = inlink_cells
        #: Seconds (crawl clock) within which the same status and payload again is a repeat delivery.
        self.repeat_window = repeat_window
        self.sizes = sizes or BucketSizes()

    async def open(self) -> None:
        await self.scripts.load()

    async def record(
        self, url: str, host: str, record: UrlRecord, *, flags: int = 0, inlink_positions: Sequence[int] = (),
        revisit: RevisitRequest | None = None,
    ) -> Observation:
        """Record a fetch; ``inlink_positions`` are the URL's Bloom positions (:func:`bloom_offsets`), for its
        in-link estimate (none: no estimate). With ``revisit``, the URL's next visit is planned from its
        history after this fetch and put in the recrawl schedule, in the same call and the same write of
        the record (:class:`crawler.frontier.due.DueSchedule` is the same schedule)."""
        keys = self.router.keys_for(host)
        args: list[Any] = [url_key(page_fingerprint(url)), record.pack(), self.change_distance, keys.prefix, host,
                           flags, self.repeat_window, self.sizes.records]
        if inlink_positions and self.inlink_cells:
            cells = sketch_offsets(inlink_positions, self.inlink_cells)
            args.append(len(cells))
            args += cells
        else:
            args.append(0)
        if revisit is not None:
            args += (revisit.terms, self.sizes.due, revisit.depth, repr(float(revisit.host_importance)),
                     repr(float(revisit.now)), revisit.captured)
        reply = await self.scripts.call("urlmeta", [keys.lh("url")], args)
        (changed, observations, changes, previous, first, inlinks, pages, errors, near, repeat, next_visit,
         level) = (int(x) for x in reply)
        return Observation(
            None if changed < 0 else bool(changed), observations, changes, previous, first, inlinks, pages, errors,
            near, bool(repeat), next_visit, level,
        )

    async def get(self, url: str, host: str) -> UrlRecord | None:
        """The record of a normalized URL of ``host``, or None."""
        return await self.get_key(url_key(url_fingerprint(url)), self.router.shard_of(host))

    async def get_key(self, key: int, shard: int) -> UrlRecord | None:
        """The record of a URL key in a shard, or None."""
        keys = self.router.keys[shard]
        (packed,) = await self.scripts.call("record", [keys.lh("url")], [keys.prefix, key])
        return UrlRecord.unpack(packed) if packed else None

    async def close(self) -> None:
        await self.scripts.close()
