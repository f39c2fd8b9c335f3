"""Read-only views of a crawl's shared frontier: its figures and its busiest hosts.

Everything here reads a bounded amount per shard (counters, the sizes of a
few keys; ``HSCAN`` of the per-host counters for :func:`top_hosts`), never
the queues themselves.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from crawler.crawlstate.shards import ShardRouter
from crawler.frontier import MAX_LEVELS, FrontierCounts, read_counts, shard_fixed_bytes
from crawler.ops.figures import FrontierFigures, ServerFigures
from crawler.redisconn.functions import crawler_library
from crawler.redisconn.memory import server_memory, servers_of
from crawler.redisconn.resp import text

if TYPE_CHECKING:
    from crawler.redisconn.link import AnyRedis


async def frontier_figures(client: AnyRedis, router: ShardRouter, memory_limit: int = 0,
                           before: FrontierFigures | None = None) -> FrontierFigures:
    """Queued, leased, active, ready, sleeping and parked hosts, seen, due and dead URLs, records, summed
    over shards; the memory of the servers holding them (``memory_limit``: REDIS_MEMORY_LIMIT, bytes,
    0: each server's maxmemory); with ``before`` (the previous look), the records' growth since."""
    read_at = time.time()
    shards = [await read_counts(client, keys) for keys in router.keys]
    meta = await client.hmget(router.crawl_keys.crawl_key("meta"), ["bloom_bits", "inlink_cells"])
    per_shard = shard_fixed_bytes(int(meta[0] or 0), int(meta[1] or 0))
    used = limit = 0
    share = 0.0
    servers = []
    for indexes in (await servers_of(client, [keys.leases for keys in router.keys])).values():
        memory = await server_memory(client, router.keys[indexes[0]].leases)
        server_limit = memory.limit(memory_limit)
        used, limit = used + memory.used, limit + server_limit
        if server_limit:
            share = max(share, memory.used / server_limit)
        servers.append(ServerFigures(memory.server, memory.used, server_limit,
                                     sum(shards[i].records for i in indexes), per_shard * len(indexes)))
    counts = FrontierCounts.summed(shards)
    return FrontierFigures(
        **counts, memory_used=used, memory_limit=limit, memory_share=share, servers=tuple(servers),
        read_at=read_at, growth=_growth(counts["records"], read_at, before),
        longest_park=await _longest_park(client, router, read_at) if counts["parked"] else 0.0,
    )


#: Parked hosts looked at per shard for the longest park (a sample: a broad crawl parks many).
PARK_SAMPLE = 1000


async def _longest_park(client: AnyRedis, router: ShardRouter, now: float) -> float:
    """Seconds until the parked host that waits longest may be contacted again (of a sample per shard)."""
    longest = 0.0
    for keys in router.keys:
        hosts = [text(host) for host in await client.srandmember(keys.parked, PARK_SAMPLE) or []]
        if hosts:
            wakes = await client.zmscore(keys.sleeping, hosts)
            longest = max([longest, *(float(wake) / 1000 - now for wake in wakes if wake is not None)])
    return longest


def _growth(records: int, read_at: float, before: FrontierFigures | None) -> float:
    if before is None or not before.read_at or read_at <= before.read_at:
        return 0.0
    return max(0.0, (records - before.records) / (read_at - before.read_at))


@dataclass(frozen=True)
class HostRow:
    host: str
    pages: int
    errors: int
    near_duplicates: int
    queued: int
    next_allowed: float | None
    delay: float | None

    @property
    def error_rate(self) -> float:
        return self.errors / self.pages if self.pages else 0.0

    @property
    def near_duplicate_rate(self) -> float:
        return self.near_duplicates / self.pages if self.pages else 0.0


class HostOrder(Enum):
    """What :func:`top_hosts` ranks hosts by."""

    PAGES = "pages"
    ERRORS = "errors"


async def top_hosts(client: AnyRedis, router: ShardRouter, count: int,
                    order: HostOrder = HostOrder.PAGES) -> list[HostRow]:
    """The ``count`` hosts with the most pages fetched (or errors), with their queue, timing and quality.

    Walks each shard's per-host counters (``hostq``) with HSCAN, keeping the
    top ``count`` in a heap (memory bounded by ``count``).
    """
    best: list[tuple[int, int, str, int, int, int]] = []  # (rank, pages, host, errors, near, shard)
    for keys in router.keys:
        counters: dict[str, list[int]] = {}
        cursor = 0
        while True:
            cursor, batch = await client.hscan(keys.host_quality, cursor, count=500)
            fields: dict[Any, Any] = dict(batch)  # type: ignore[arg-type]
            for field, value in fields.items():
                host, _, kind = text(field).rpartition("|")
                slot = {"n": 0, "e": 1, "d": 2}.get(kind)
                if slot is not None:
                    counters.setdefault(host, [0, 0, 0])[slot] = int(value)
            if cursor == 0:
                break
        for host, (pages, errors, near) in counters.items():
            rank = errors if order is HostOrder.ERRORS else pages
            if order is HostOrder.ERRORS and not errors:
                continue
            row = (rank, pages, host, errors, near, keys.shard)
            if len(best) < count:
                heapq.heappush(best, row)
            elif row > best[0]:
                heapq.heapreplace(best, row)
    rows = []
    for _, pages, host, errors, near, shard in sorted(best, reverse=True):
        keys = router.keys[shard]
        pipe = client.pipeline(transaction=False)
        pipe.zscore(keys.ready, host)
        pipe.zscore(keys.cool, host)
        pipe.zscore(keys.sleeping, host)
        pipe.hget(keys.host_delay, host)
        for level in range(MAX_LEVELS):
            pipe.llen(keys.queue(host, level))
        ready_at, cool_at, wake_at, delay_ms, *lengths = await pipe.execute()
        queued = sum(int(length) for length in lengths)
        at = next((t for t in (ready_at, wake_at, cool_at) if t is not None), None)
        rows.append(HostRow(
            host, pages, errors, near, int(queued or 0),
            float(at) / 1000 if at is not None else None,
            int(delay_ms) / 1000 if delay_ms is not None else None,
        ))
    return rows


def describe_next(next_allowed: float | None, now: float | None = None) -> str:
    if next_allowed is None:
        return "-"
    wait = next_allowed - (now if now is not None else time.time())
    return "now" if wait <= 0 else f"in {wait:.1f} s"




async def longest_queues(client: AnyRedis, router: ShardRouter, count: int,
                         levels: int = MAX_LEVELS) -> list[tuple[str, int]]:
    """The ``count`` hosts with the most URLs in their back queues, and how many (the hosts that own a
    back queue are read: a bounded set, at most the frontier's back queues per shard); ``levels``: the
    crawl's priority levels when known (each level of each host is a command)."""
    levels = min(levels, MAX_LEVELS)
    best: list[tuple[int, str]] = []
    for keys in router.keys:
        hosts = sorted(text(host) for host in await client.smembers(keys.active))
        for start in range(0, len(hosts), 500):
            chunk = hosts[start:start + 500]
            lengths = await crawler_library().call(client, "backlog", [keys.active], keys.prefix, levels, *chunk)
            for host, queued in zip(chunk, (int(n) for n in lengths)):
                if not queued:
                    continue
                if len(best) < count:
                    heapq.heappush(best, (queued, host))
                elif (queued, host) > best[0]:
                    heapq.heapreplace(best, (queued, host))
    return [(host, queued) for queued, host in sorted(best, reverse=True)]
