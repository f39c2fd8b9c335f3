"""How much memory the Redis server holding a key uses, and its limit (``INFO memory``).

On a Redis Cluster each primary has its own memory and limit: the figures are
those of the node serving the key's slot. ``INFO`` needs no ``CONFIG``
permission (managed Redis services often refuse ``CONFIG``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster

from crawler.exceptions import ConfigurationError
from crawler.redisconn.link import AnyRedis

#: Eviction policies that would delete the crawl's state instead of refusing writes.
_SAFE_POLICIES = ("noeviction",)


@dataclass(frozen=True)
class ServerMemory:
    #: The server (or cluster node) it was read from, for messages.
    server: str
    used: int
    #: The server's ``maxmemory`` (0: none).
    maxmemory: int
    policy: str

    def limit(self, configured: int) -> int:
        """The limit the crawl lives within: ``REDIS_MEMORY_LIMIT`` if set (bytes), else the server's maxmemory."""
        if configured and self.maxmemory:
            return min(configured, self.maxmemory)
        return configured or self.maxmemory

    def check_policy(self) -> None:
        """Refuse a server that evicts keys when full: it would drop queued URLs and records in silence."""
        if self.maxmemory and self.policy not in _SAFE_POLICIES:
            raise ConfigurationError(
                "REDIS_URL",
                f"the Redis at {self.server} has maxmemory-policy {self.policy}: when full it deletes keys, which "
                "would lose queued URLs and records without a word. Set maxmemory-policy noeviction (the crawl "
                "admits fewer URLs near the limit instead)",
            )


def _figures(info: Any) -> dict[str, Any]:
    if isinstance(info, dict) and "used_memory" not in info and len(info) == 1:
        info = next(iter(info.values()))  # a cluster client's answer, by node
    return dict(info)


async def server_memory(client: AnyRedis, key: str) -> ServerMemory:
    """The memory figures of the server (or cluster primary) that holds ``key``."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        node = client.get_node_from_key(key)
        assert node is not None
        info = _figures(await client.info("memory", target_nodes=node))
        server = f"{node.host}:{node.port}"
    else:
        info = _figures(await client.info("memory"))
        kwargs = client.connection_pool.connection_kwargs
        server = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
    policy = info.get("maxmemory_policy", "noeviction")
    if isinstance(policy, bytes):
        policy = policy.decode()
    return ServerMemory(str(server), int(info.get("used_memory", 0)), int(info.get("maxmemory", 0)), str(policy))


async def servers_of(client: AnyRedis, keys: list[str]) -> dict[str, list[int]]:
    """The servers (cluster primaries, as ``host:port``; one ``redis`` otherwise) holding ``keys``: for
    each, the indexes of the keys it holds."""
    if not isinstance(client, RedisCluster):
        return {"redis": list(range(len(keys)))}
    await client.initialize()
    by_server: dict[str, list[int]] = {}
    for index, key in enumerate(keys):
        node = client.get_node_from_key(key)
        assert node is not None
        by_server.setdefault(f"{node.host}:{node.port}", []).append(index)
    return by_server


async def primaries(client: AnyRedis) -> int:
    """How many servers hold data: the cluster's primaries, or 1."""
    if isinstance(client, RedisCluster):
        await client.initialize()
        return max(1, len(client.get_primaries()))
    return 1
