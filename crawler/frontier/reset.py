"""Starting a crawl over: finding and deleting every key of one crawl, and only those.

Used by ``scrapy frontier reset`` and by a worker that opens with
``FRONTIER_RESET_ON_START``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from redis.asyncio.cluster import RedisCluster

if TYPE_CHECKING:
    from crawler.redisconn.link import AnyRedis


async def crawl_keys(client: AnyRedis, crawl_id: str) -> list[Any]:
    """Every key of one crawl: ``frontier:{<id>}:*``, ``frontier:{<id>.<shard>[.<salt>]}:*`` and, from
    crawls of the first layout, ``dedup:{<id>}:*``.

    Found with SCAN (on every primary of a cluster) over the crawl's own
    patterns, each key checked against its exact tag: another crawl's keys
    (``<id>2``, ``<id>.x``) are never touched, and nothing is flushed.
    """
    escaped = re.escape(crawl_id)
    own = re.compile(rf"^(frontier:\{{{escaped}(\.\d+(\.\d+)?)?\}}:|dedup:\{{{escaped}\}}:)".encode())
    found = []
    for pattern in (f"frontier:{{{crawl_id}}}:*", f"frontier:{{{crawl_id}.*", f"dedup:{{{crawl_id}}}:*"):
        async for key in client.scan_iter(match=pattern, count=1000):
            if own.match(key):
                found.append(key)
    return sorted(set(found))


async def delete_keys(client: AnyRedis, keys: list[Any]) -> int:
    """Unlink ``keys`` in batches (one key per call on a cluster, whose keys live on many nodes)."""
    deleted = 0
    for start in range(0, len(keys), 500):
        batch = keys[start:start + 500]
        if isinstance(client, RedisCluster):
            for key in batch:
                deleted += int(await client.unlink(key))
        else:
            deleted += int(await client.unlink(*batch))
    return deleted


async def reset_crawl(client: AnyRedis, crawl_id: str) -> int:
    """Delete every key of ``crawl_id``; how many there were."""
    return await delete_keys(client, await crawl_keys(client, crawl_id))
