"""Shards: which part of the crawl's Redis state a host lives in.

The frontier is split into ``FRONTIER_SHARDS`` shards, a number fixed for the
life of a crawl (recorded in the crawl's metadata; a worker configured with
another number refuses to start). Each shard is a complete Mercator frontier
of its own (front queues, back queues, ready heap, leases, seen set, budgets,
due set, robots.txt cache, URL metadata) under one hash tag,
``{<crawl id>.<shard>}``, so on a Redis Cluster every key of a shard is in one
hash slot and every Lua script runs on one node.

A host belongs to shard ``crc32(registered domain) mod FRONTIER_SHARDS``: all
hosts of a registered domain share a shard, so the per-domain page budget is
one counter checked inside the enqueue script, and a host's politeness state
is in exactly one place. Shards are mapped to cluster nodes by Redis itself
(hash slots): adding a node and moving slots to it (``redis-cli --cluster
rebalance``, with the crawl drained: the scripts reach undeclared keys of
their slot, which a migration in progress may already have moved) moves
whole shards, and no host ever changes shard, so nothing is re-hashed or
copied by the crawler. Use several shards per primary (the
default on a cluster is 16) so that slots can be balanced.

The default is 1 shard on a single Redis (sharding buys nothing there) and
16 on a cluster.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from typing import Any

from scrapy.settings import BaseSettings

from crawler.crawlstate.keys import LAYOUT_VERSION, ShardKeys
from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_int, is_set
from crawler.urls import NORMALIZATION_VERSION
from crawler.urls.domains import RegisteredDomains

#: Shards on a cluster unless FRONTIER_SHARDS says otherwise.
CLUSTER_DEFAULT_SHARDS = 16
MAX_SHARDS = 1024


def shard_count(settings: BaseSettings, *, cluster: bool) -> int:
    """``FRONTIER_SHARDS``, or the default for the configured Redis (1; 16 on a ``cluster``)."""
    if not is_set(settings, "FRONTIER_SHARDS"):
        return CLUSTER_DEFAULT_SHARDS if cluster else 1
    count = get_int(settings, "FRONTIER_SHARDS", minimum=1)
    if count > MAX_SHARDS:
        raise ConfigurationError("FRONTIER_SHARDS", f"at most {MAX_SHARDS}, got {count}")
    return count


class ShardRouter:
    """Host -> shard, and each shard's keys. A worker's components share one: the Redis provider's
    (the Redis provider's ``router``)."""

    def __init__(self, crawl_id: str, count: int = 1, domain_of: Callable[[str], str] | None = None) -> None:
        if count < 1:
            raise ConfigurationError("FRONTIER_SHARDS", f"at least 1, got {count}")
        self.crawl_id = crawl_id
        self.count = count
        self.keys = [ShardKeys(crawl_id, shard, count) for shard in range(count)]
        self._domain_of = domain_of or RegisteredDomains.shared()

    @classmethod
    def from_settings(cls, settings: BaseSettings, crawl_id: str, *, cluster: bool) -> ShardRouter:
        return cls(crawl_id, shard_count(settings, cluster=cluster))

    def shard_of(self, host: str) -> int:
        if self.count == 1:
            return 0
        return zlib.crc32(self._domain_of(host).encode("utf-8", "surrogateescape")) % self.count

    def keys_for(self, host: str) -> ShardKeys:
        return self.keys[self.shard_of(host)]

    @property
    def crawl_keys(self) -> ShardKeys:
        """Keys of the whole crawl (:meth:`ShardKeys.crawl_key`) and of shard 0."""
        return self.keys[0]


#: Reads the crawl's metadata and records this worker's where none is, in one step: workers that
#: start together must not see each other's half-written metadata (a ``created`` without its
#: ``layout`` is what a worker of the first layout left). Answers ``{layout}`` for a crawl of the
#: first layout (nothing written), else ``{layout, normalization version, shards}`` as stored.
_RECORD_METADATA = """
local meta = KEYS[1]
if redis.call('HEXISTS', meta, 'layout') == 0 and redis.call('HEXISTS', meta, 'created') == 1 then
  return {'1'}
end
redis.call('HSETNX', meta, 'layout', ARGV[1])
redis.call('HSETNX', meta, 'normalization_version', ARGV[2])
redis.call('HSETNX', meta, 'created', ARGV[3])
redis.call('HSETNX', meta, 'shards', ARGV[4])
return redis.call('HMGET', meta, 'layout', 'normalization_version', 'shards')
"""


async def check_crawl_metadata(client: Any, router: ShardRouter) -> None:
    """Record the crawl's layout, normalization version and shard count once; refuse a worker that differs."""
    crawl_id = router.crawl_id
    key = router.crawl_keys.crawl_key("meta")
    stored = await client.eval(
        _RECORD_METADATA, 1, key, LAYOUT_VERSION, NORMALIZATION_VERSION, int(time.time()), router.count
    )
    layout = int(stored[0])
    if layout != LAYOUT_VERSION:
        raise ConfigurationError(
            "FRONTIER_CRAWL_ID",
            f"crawl {crawl_id!r} was started with frontier layout {layout}; this code keeps a crawl's state "
            f"in layout {LAYOUT_VERSION} and cannot read it. Start over with `scrapy frontier reset --crawl-id "
            f"{crawl_id} --yes` (or -s FRONTIER_RESET_ON_START=True), or use another crawl id",
        )
    normalization, shards = int(stored[1]), int(stored[2])
    if shards != router.count:
        raise ConfigurationError(
            "FRONTIER_SHARDS",
            f"crawl {crawl_id!r} has {shards} frontier shards, this worker is configured for "
            f"{router.count}; the number of shards is fixed for the life of a crawl",
        )
    if normalization != NORMALIZATION_VERSION:
        raise ConfigurationError(
            "FRONTIER_CRAWL_ID",
            f"crawl {crawl_id!r} was started with URL normalization version {normalization}, "
            f"this code uses {NORMALIZATION_VERSION}; start a new crawl id",
        )
