"""A crawl's fixed sizes (its Bloom filters and in-link sketches), chosen once, within its memory limit.

The Bloom filter of each shard is sized for its share of
``SEEN_EXPECTED_URLS`` at ``SEEN_FALSE_POSITIVE_RATE`` with
``SEEN_BLOOM_HASHES`` hashes, and at most
``SEEN_BLOOM_SHARE`` of the memory limit (``REDIS_MEMORY_LIMIT`` or the
server's maxmemory; on a cluster, per primary, shared by the shards it
holds); the in-link sketch has ``PRIORITY_INLINK_CELLS`` cells per shard, at
most a sixteenth of the limit. Both are recorded in the crawl's metadata by
the first worker and read from there by every other, so a worker with other
settings, or a later run with another limit, keeps the crawl's own sizes (the
filter's bit positions depend on its size and count). A crawl recorded before
the hash count was keeps the count its size gave then (the size's optimum). A
limit too small for these fixed costs stops the crawl before it starts, with
the figure it needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.frontier.seen import SeenConfig, legacy_hashes
from crawler.redisconn.memory import primaries, server_memory
from crawler.settings_parsing import get_float, get_int

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis

#: Room a crawl needs beside its fixed costs to do anything (its first queues and records).
WORKING_ROOM = 16 * 1024 * 1024


def shard_fixed_bytes(bloom_bits: int, inlink_cells: int) -> int:
    """Bytes one shard holds whatever the crawl's size: its Bloom filter and in-link sketch."""
    return bloom_bits // 8 + inlink_cells


@dataclass(frozen=True)
class CrawlSizes:
    #: Each shard's seen set (its Bloom filter).
    seen: SeenConfig
    #: Each shard's in-link sketch cells (0: in-links not counted).
    inlink_cells: int
    #: The memory limit (bytes, 0: none) of the server holding the shards, per primary on a cluster.
    memory_limit: int = 0

    def fixed_bytes(self, shards: int) -> int:
        """Bytes the Bloom filters and sketches of ``shards`` shards take."""
        return shards * shard_fixed_bytes(self.seen.bloom_bits, self.inlink_cells)


def _int(value: object) -> int | None:
    if value is None:
        return None
    return int(value.decode() if isinstance(value, bytes) else str(value))


def planned_sizes(settings: BaseSettings, shards: int, per_node: int, limit: int) -> tuple[SeenConfig, int]:
    """Each shard's Bloom filter and in-link cells for a limit (bytes, 0: none) shared by ``per_node``
    shards of ``shards``."""
    wanted = SeenConfig.from_settings(settings)
    expected = max(wanted.expected_urls // shards, 1000)
    bloom_cap = int(limit * get_float(settings, "SEEN_BLOOM_SHARE", minimum=0.001) / per_node) if limit else 0
    seen = SeenConfig.sized(expected, wanted.false_positive_rate, bloom_cap, wanted.bloom_hashes)
    cells = get_int(settings, "PRIORITY_INLINK_CELLS", minimum=0)
    if limit and cells:
        cells = max(1024, min(cells, limit // 16 // per_node))
    return seen, cells


def check_fits(sizes: CrawlSizes, per_node: int, server: str) -> None:
    """Refuse a limit too small for the crawl's fixed costs and some room to work, naming the figure."""
    limit = sizes.memory_limit
    if not limit:
        return
    fixed = sizes.fixed_bytes(per_node)
    if fixed + WORKING_ROOM > limit // 2:
        need = 2 * (fixed + WORKING_ROOM)
        raise ConfigurationError(
            "REDIS_MEMORY_LIMIT",
            f"{limit / 2**20:.0f} MiB of Redis memory (at {server}) is too small for this crawl: its fixed costs, "
            f"{per_node} shard(s) of Bloom filter ({sizes.seen.bloom_bits // 8 / 2**20:.1f} MiB each) and in-link "
            f"sketch ({sizes.inlink_cells / 2**20:.1f} MiB each), and room to work, need a limit of at least "
            f"{need / 2**20:.0f} MiB",
        )


async def crawl_sizes(
    client: AnyRedis, router: ShardRouter, settings: BaseSettings, configured_limit: int
) -> CrawlSizes:
    """The crawl's sizes: recorded by the first worker, read by the others (idempotent)."""
    memory = await server_memory(client, router.keys[0].leases)
    memory.check_policy()
    limit = memory.limit(configured_limit)
    nodes = await primaries(client)
    per_node = math.ceil(router.count / nodes)
    seen, cells = planned_sizes(settings, router.count, per_node, limit)
    key = router.crawl_keys.crawl_key("meta")
    recorded = _int(await client.hget(key, "bloom_bits"))
    # The hash count before the size: a size without a count is a crawl recorded before counts were.
    await client.hsetnx(key, "bloom_hashes", seen.bloom_hashes if recorded is None
                        else legacy_hashes(seen.expected_urls, recorded))
    await client.hsetnx(key, "bloom_bits", seen.bloom_bits)
    await client.hsetnx(key, "inlink_cells", cells)
    bits = _int(await client.hget(key, "bloom_bits")) or seen.bloom_bits
    hashes = _int(await client.hget(key, "bloom_hashes")) or seen.bloom_hashes
    cells = _int(await client.hget(key, "inlink_cells")) or 0
    sizes = CrawlSizes(seen.recorded(bits, hashes), cells, limit)
    check_fits(sizes, per_node, memory.server)
    return sizes
