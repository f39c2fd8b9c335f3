"""Admission by Redis memory: how full each server is, and what its shards still admit.

Every ``FRONTIER_MEMORY_CHECK_INTERVAL`` seconds the pump asks
:class:`MemoryWatch` to look at each server (each cluster primary) holding the
crawl's shards: its ``used_memory``, its limit (``REDIS_MEMORY_LIMIT`` or its
maxmemory) and the URLs its shards have queued. The policy
(:class:`~crawler.policy.memory.MemoryPolicy`) turns them into what each
shard's enqueue script admits; the watch says so once in the log when it
changes, and keeps the figures for the progress line, metrics and stats
(``redis/memory_used``, ``redis/memory_limit``, ``redis/memory_share``: of
the fullest server).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawler.policy.memory import Admission, MemoryPolicy
from crawler.redisconn.memory import ServerMemory, server_memory, servers_of

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from crawler.crawlstate.shards import ShardRouter
    from crawler.frontier.redisfrontier import RedisFrontier
    from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServerFill:
    """One server's memory as the watch last saw it."""

    memory: ServerMemory
    limit: int
    queued: int
    admission: Admission

    @property
    def share(self) -> float:
        return self.memory.used / self.limit if self.limit else 0.0


async def server_fills(client: AnyRedis, router: ShardRouter, configured_limit: int, levels: int,
                       page_bytes: int) -> list[tuple[list[int], ServerFill]]:
    """Each server holding the crawl's shards (each cluster primary): its shards, how full it is and
    what it admits (``configured_limit``: REDIS_MEMORY_LIMIT, 0: its maxmemory)."""
    by_server = await servers_of(client, [keys.leases for keys in router.keys])
    pipe = client.pipeline(transaction=False)
    for keys in router.keys:
        pipe.get(keys.queued)
    queued = [int(value or 0) for value in await pipe.execute()]
    fills = []
    for shards in by_server.values():
        memory = await server_memory(client, router.keys[shards[0]].leases)
        limit = memory.limit(configured_limit)
        waiting = sum(queued[shard] for shard in shards)
        admission = MemoryPolicy(limit, levels, page_bytes).admission(memory.used, waiting)
        fills.append((shards, ServerFill(memory, limit, waiting, admission)))
    return fills


class MemoryWatch:
    def __init__(
        self, client: AnyRedis, router: ShardRouter, configured_limit: int, levels: int, page_bytes: int,
        interval: float, stats: StatsCollector,
    ) -> None:
        self.client = client
        self.router = router
        self.configured_limit = configured_limit
        self.levels = levels
        self.page_bytes = page_bytes
        self.interval = interval
        self.stats = stats
        #: Per server: what the last look saw.
        self.servers: dict[str, ServerFill] = {}
        self.checked = 0.0
        self._said: dict[str, str] = {}

    def due(self, now: float) -> bool:
        return now - self.checked >= self.interval

    async def refresh(self, frontiers: list[RedisFrontier], now: float) -> None:
        """Look at every server's memory and set what each shard admits."""
        self.checked = now
        servers: dict[str, ServerFill] = {}
        for shards, fill in await server_fills(self.client, self.router, self.configured_limit, self.levels,
                                               self.page_bytes):
            servers[fill.memory.server] = fill
            for shard in shards:
                frontiers[shard].admission = fill.admission
            self._say(fill.memory.server, fill)
        self.servers = servers
        fullest = self.fullest
        if fullest is not None:
            self.stats.set_value("redis/memory_used", fullest.memory.used)
            self.stats.set_value("redis/memory_limit", fullest.limit)
            self.stats.set_value("redis/memory_share", round(fullest.share, 4))
            self.stats.max_value("redis/memory_used_max", fullest.memory.used)
            self.stats.set_value("redis/admission", fullest.admission.reason)

    def _say(self, server: str, fill: ServerFill) -> None:
        reason = fill.admission.reason
        if reason == self._said.get(server, ""):
            return
        self._said[server] = reason
        if reason:
            logger.warning("Redis at %s: %s (%.0f MiB used of %.0f MiB; %d URLs queued). Fetching and recrawling "
                           "go on; see docs/sizing.md to give the crawl more room.", server, reason,
                           fill.memory.used / 2**20, fill.limit / 2**20, fill.queued)
        else:
            logger.warning("Redis at %s: memory back below the admission thresholds (%.0f%% of the limit): every "
                           "new URL admitted again", server, 100 * fill.share)

    @property
    def fullest(self) -> ServerFill | None:
        if not self.servers:
            return None
        return max(self.servers.values(), key=lambda fill: fill.share)
