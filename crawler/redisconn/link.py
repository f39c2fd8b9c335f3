"""A dedicated connection to whichever server holds a key: one Redis, or a cluster node.

The frontier's steps and the batched script calls write many commands at once
and read the replies in order (RESP pipelining) on a connection of their own.
On a single server that is a connection from the client's pool; on a Redis
Cluster it is a connection to the primary that serves the key's hash slot
(every key a step touches carries the same hash tag, so one node serves them
all). A ``MOVED``/``ASK``/``TRYAGAIN``/``CLUSTERDOWN`` reply (a slot moved to
another node, a resharding under way, a failover) drops the connection and
refreshes the client's map of the cluster; the caller sees a
:class:`SlotMovedError` (a kind of connection error) and sends again, like
after any lost connection.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import AskError, ClusterDownError, MovedError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

#: A client of either kind.
AnyRedis = Redis | RedisCluster

_SLOT_ERRORS = (MovedError, AskError, TryAgainError, ClusterDownError)


class SlotMovedError(RedisConnectionError):
    """The key's slot is (being) served by another node: connect again and resend."""


def is_slot_error(error: BaseException) -> bool:
    if isinstance(error, _SLOT_ERRORS):
        return True
    return isinstance(error, ResponseError) and str(error).split(" ", 1)[0] in (
        "MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"
    )


class KeyConnection:
    """One connection, held between uses, to the server that holds ``key``."""

    def __init__(self, client: AnyRedis, key: str) -> None:
        self.client = client
        self.key = key
        self._connection: Any = None
        self._node: Any = None

    @property
    def cluster(self) -> bool:
        return isinstance(self.client, RedisCluster)

    async def get(self) -> Any:
        """The connection (connected on first use by redis-py)."""
        if self._connection is None:
            client = self.client
            if isinstance(client, RedisCluster):
                await client.initialize()  # once; later calls return at once
                self._node = client.get_node_from_key(self.key)
                self._connection = self._node.acquire_connection()
            else:
                self._connection = await client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        return self._connection

    async def drop(self) -> None:
        """Close the connection after a failure (the next :meth:`get` opens another)."""
        connection, self._connection = self._connection, None
        if connection is None:
            return
        await connection.disconnect()
        await self._give_back(connection)

    async def release(self) -> None:
        """Give the connection back (healthy)."""
        connection, self._connection = self._connection, None
        if connection is not None:
            await self._give_back(connection)

    async def _give_back(self, connection: Any) -> None:
        node, self._node = self._node, None
        if isinstance(self.client, RedisCluster):
            if node is not None:
                node.release(connection)
        else:
            await self.client.connection_pool.release(connection)

    async def moved(self, error: BaseException) -> SlotMovedError:
        """After a slot error: drop the connection, refresh the cluster map; the error to raise."""
        await self.drop()
        client = self.client
        if isinstance(client, RedisCluster):
            await client.nodes_manager.initialize()
        return SlotMovedError(f"{self.key}: {error}")


async def read_replies(connection: Any, count: int) -> list[Any]:
    """``count`` replies in order, an error reply in its place (the stream stays in step).

    One timeout (the connection's ``socket_timeout``) for all of them, not one
    per reply as redis-py's ``read_response`` sets by default: that costs
    microseconds per reply, and a frontier step or a batch has dozens.
    """
    replies: list[Any] = []
    append = replies.append
    try:
        async with asyncio.timeout(connection.socket_timeout):
            for _ in range(count):
                try:
                    append(await connection.read_response(timeout=math.inf))
                except ResponseError as exc:
                    append(exc)
    except TimeoutError:
        await connection.disconnect(nowait=True)
        raise RedisTimeoutError(f"Timeout reading {count} replies") from None
    return replies
