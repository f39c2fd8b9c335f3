"""What a frontier step sends and what it answers (plain data, no I/O), and the stats its answer adds to.

The enqueue entries, leases, completions and sitemap touches a worker sends
to :meth:`crawler.frontier.redisfrontier.RedisFrontier.step` (together, a
:class:`Step`), the results it reads back, and the counts of a shard (:func:`read_counts`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, NamedTuple

from crawler.crawlstate.compact import LinearHash, lh_hash
from crawler.frontier.outcome import Completion

if TYPE_CHECKING:
    from collections.abc import Sequence

    from scrapy.statscollectors import StatsCollector

    from crawler.crawlstate.keys import ShardKeys
    from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)

#: The request id of a robots.txt lease (``ROBOTS_ID`` in ``lua/hosts.lua``): the
#: host's robots.txt, fetched before its pages; its claimed blob is the host's
#: first queued request, which stays queued.
ROBOTS_REQUEST_ID = 0

#: EnqueueEntry flags.
DONT_FILTER = 1
EXACT_ONLY = 2


class EnqueueEntry(NamedTuple):
    """One request for the enqueue script (see ``lua/enqueue.lua``)."""

    #: The URL key (:func:`crawler.metadata.record.url_key`) and the Bloom positions of its fingerprint.
    key: int
    bloom_positions: bytes
    host: str
    domain: str
    level: int
    flags: int
    #: The queue entry: the encoded request (:mod:`crawler.frontier.codec`).
    blob: bytes
    #: The politeness group, when it is given per request (``FRONTIER_POLITENESS_KEY = "ip"``: the address).
    group: str = ""

    @property
    def lh(self) -> int:
        """The URL key's linear-hashing hash (its bucket in the exact seen store)."""
        return lh_hash(self.key)


@dataclass(frozen=True, slots=True)
class Lease:
    """A claimed URL. ``member`` is the lease's identity in Redis."""

    member: bytes
    level: int
    #: The lease's number, or ROBOTS_REQUEST_ID for a robots.txt lease.
    request_id: int
    host: str
    #: The frontier shard the lease was claimed from (its ack goes there).
    shard: int = 0

    @property
    def robots(self) -> bool:
        """A robots.txt lease: the host's robots.txt is fetched before its pages."""
        return self.request_id == ROBOTS_REQUEST_ID

    @classmethod
    def from_member(cls, member: bytes, shard: int = 0) -> Lease:
        _leaseno, level, request_id, host = member.decode("utf-8", "surrogateescape").split(" ", 3)
        return cls(member, int(level), int(request_id), host, shard)


@dataclass(frozen=True)
class DeadLetter:
    request_id: int
    host: str
    level: int
    died_at: float
    error: str
    message: str
    blob: bytes


@dataclass(frozen=True)
class ClaimResult:
    claimed: list[tuple[Lease, bytes]]
    expired: int
    moved: int
    next_ready_ms: int | None
    next_expiry_ms: int | None
    queued: int
    leased: int
    missing: int
    #: Hosts given a back queue and ready at once (the active set grew by need).
    opened: int = 0
    #: Sleeping hosts woken.
    woken: int = 0


@dataclass(frozen=True)
class StepResult:
    added: int = 0
    duplicates: int = 0
    over_host_budget: int = 0
    over_domain_budget: int = 0
    bloom_false_positives: int = 0
    #: New URLs refused because Redis memory runs out (:mod:`crawler.policy.memory`).
    refused_memory: int = 0
    acked: int = 0
    stale: int = 0
    released: int = 0
    claim: ClaimResult | None = None
    requeued: int = 0
    dead: int = 0
    parked: int = 0
    drain: DrainResult | None = None
    touched: int = 0


@dataclass(frozen=True)
class DrainResult:
    """What a drain of the due set did and left (times in crawl-clock ms)."""

    moved: int
    due_now: int
    next_due_ms: int | None
    scheduled: int


class Touch(NamedTuple):
    """A sitemap lastmod for a URL: due now if fetched before it (``lua/touch.lua``)."""

    #: The URL key (:func:`crawler.metadata.record.url_key`).
    key: int
    lastmod: int


@dataclass(frozen=True, slots=True)
class Step:
    """What one step sends, applied in this order: enqueues, acks, releases, lease renewal, sitemap touches,
    drain, claim.

    ``claim`` is the number of URLs to claim (``None``: do not call the claim
    script at all; ``0``: only expire leases, refill and report counts).
    ``drain_at_ms`` (crawl clock) moves the revisits due by then into the
    frontier before the claim (``None``: no drain); ``touches`` make
    revisits due at ``crawl_now_ms`` (sitemap lastmods).
    """

    enqueues: list[EnqueueEntry] | None = None
    completions: list[Completion] | None = None
    releases: list[bytes] | None = None
    renew: list[bytes] | None = None
    claim: int | None = None
    now_ms: int = 0
    drain_at_ms: int | None = None
    touches: list[Touch] | None = None
    crawl_now_ms: int = 0


@dataclass(frozen=True)
class FrontierCounts:
    """A frontier's counts: one shard's (:func:`read_counts`), or a crawl's summed over its shards."""

    #: URLs queued, URLs leased, hosts holding a back queue, hosts in the ready heap, URLs ever enqueued.
    queued: int = 0
    leased: int = 0
    active_hosts: int = 0
    ready_hosts: int = 0
    seen: int = 0
    #: Revisits in the due set.
    due: int = 0
    #: Hosts that own a back queue but sleep (wait beyond the sleep horizon), and parked ones among them.
    sleeping: int = 0
    parked: int = 0
    #: URLs in the dead-letter queue.
    dead_letters: int = 0
    #: URL records (one per URL fetched or dead-lettered).
    records: int = 0
    #: The length of each front queue (one shard's, when asked for).
    front: tuple[int, ...] = field(default=())

    @property
    def awake_hosts(self) -> int:
        return self.active_hosts - self.sleeping

    @classmethod
    def summed(cls, shards: Sequence[FrontierCounts]) -> dict[str, Any]:
        """Each count summed over ``shards`` (front queue lengths apart), as keyword arguments."""
        return {f.name: sum(getattr(shard, f.name) for shard in shards) for f in fields(cls) if f.name != "front"}


async def read_counts(client: AnyRedis, keys: ShardKeys, levels: int = 0) -> FrontierCounts:
    """One shard's counters and sizes (a few O(1) reads), with the length of ``levels`` front queues."""
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.queued)
    # The ready heap and the leases hold an anchor at +inf (schema.ZSET_ANCHOR): counted below it.
    pipe.zcount(keys.leases, "-inf", "(inf")
    pipe.scard(keys.active)
    pipe.zcount(keys.ready, "-inf", "(inf")
    pipe.get(keys.seen_count)
    pipe.get(keys.due_count)
    pipe.zcard(keys.sleeping)
    pipe.scard(keys.parked)
    pipe.hlen(keys.dead)
    pipe.get(keys.lh("url"))
    for level in range(levels):
        pipe.llen(keys.front(level))
    replies = await pipe.execute()
    return FrontierCounts(
        queued=int(replies[0] or 0),
        leased=int(replies[1]),
        active_hosts=int(replies[2]),
        ready_hosts=int(replies[3]),
        seen=int(replies[4] or 0),
        front=tuple(int(x) for x in replies[10:]),
        due=int(replies[5] or 0),
        sleeping=int(replies[6]),
        parked=int(replies[7]),
        dead_letters=int(replies[8]),
        records=LinearHash.parse(replies[9]).entries,
    )


#: A step's counts and the stat each adds to (zeros are not counted).
_STEP_STATS = (
    ("added", "frontier/enqueued"),
    ("duplicates", "frontier/duplicate"),
    ("over_host_budget", "urls/dropped/host_budget"),
    ("over_domain_budget", "urls/dropped/domain_budget"),
    ("bloom_false_positives", "frontier/bloom_false_positive"),
    ("refused_memory", "frontier/refused/memory"),
    ("acked", "frontier/acked"),
    ("stale", "frontier/ack_stale"),
    ("parked", "frontier/hosts_parked"),
    ("touched", "recrawl/sitemap_due"),
)
#: The same for a step's claim.
_CLAIM_STATS = (
    ("expired", "frontier/lease_expired"),
    ("missing", "frontier/missing_request"),
    ("opened", "frontier/hosts_opened"),
    ("woken", "frontier/hosts_woken"),
)


def count_step(stats: StatsCollector, result: StepResult) -> None:
    """Add what one step did to the crawl's stats (``frontier/*``, ``recrawl/*``)."""
    inc = stats.inc_value
    for field_name, key in _STEP_STATS:
        count = getattr(result, field_name)
        if count:
            inc(key, count)
    claim = result.claim
    if claim is not None:
        if claim.claimed:
            inc("frontier/claimed", len(claim.claimed))
        for field_name, key in _CLAIM_STATS:
            count = getattr(claim, field_name)
            if count:
                inc(key, count)
        if claim.expired:
            logger.info("Frontier: %d expired leases returned their URLs to the queues", claim.expired)
    if result.drain is not None and result.drain.moved:
        inc("recrawl/drained", result.drain.moved)
