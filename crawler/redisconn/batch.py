"""Script calls and commands from many coroutines, sent to Redis together.

Item pipelines call a script per item, and each new host costs a few plain
commands (its robots.txt record read and written, its render marks); with
many responses in flight, the calls made in one turn of the event loop go
out in one write on a dedicated connection (one per cluster node on a Redis
Cluster) and their replies are handed back in order (RESP pipelining). On
this project's machines a round trip costs 100-200 us of CPU (system calls
included) whatever it carries, and new hosts open in bursts: in a 30 s crawl
of ``benchmarks/throughput.py``'s 5 KB web, 11,666 per-host calls went out
in 359 writes. A connection failure fails every call of the batch (the callers decide
what that means); a lost function library is loaded again and the batch sent again
(so a batched plain command must be one that may be repeated: reads, SET,
HSET, HDEL, SADD).

Replies are RESP's own (bytes, integers, lists, None), not redis-py's
converted ones.
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import ResponseError

from crawler.redisconn.functions import FunctionLibrary, crawler_library, is_missing
from crawler.redisconn.link import AnyRedis, KeyConnection, is_slot_error, read_replies
from crawler.redisconn.resp import command

#: A queued call: the script's name (None: a plain command), its arguments, its reply's future.
_Call = tuple[str | None, tuple[Any, ...], asyncio.Future[Any]]


#: Calls of one script sent as one at most (Redis runs nothing else while a script runs).
MERGE_LIMIT = 100


class BatchedScripts:
    """Calls of a function library's functions (:mod:`crawler.redisconn.functions`; the crawler's unless
    ``library`` names another) and plain commands. A script of the library with a ``_many`` function: its
    calls with the same keys in one write go as one call. Their order among the write's other calls changes
    (each goes where the first of them was): calls made in one turn of the event loop are concurrent, none
    waits for another."""

    def __init__(self, client: AnyRedis, library: FunctionLibrary | None = None) -> None:
        self.client = client
        self.library = library or crawler_library()
        self._pending: list[_Call] = []
        #: One connection per server (a single Redis: one; a cluster: one per primary used).
        self._links: dict[str, KeyConnection] = {}
        self._lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()

    async def load(self) -> None:
        """Load the library again (a call found its function missing)."""
        await self.library.ensure(self.client)

    def call(self, name: str, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """Queue a script call; the future resolves with its reply (or its error).

        ``keys[0]`` decides the server on a cluster (all keys share its slot).
        """
        return self._queue(name, (len(keys), *keys, *args))

    def command(self, *args: Any) -> asyncio.Future[Any]:
        """Queue a plain command (``b"GET", key``); the future resolves with its reply (or its error).

        ``args[1]``, the command's (first) key, decides the server on a cluster.
        """
        return self._queue(None, args)

    def _queue(self, name: str | None, args: tuple[Any, ...]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._schedule)
        self._pending.append((name, args, future))
        return future

    def _schedule(self) -> None:
        task = asyncio.ensure_future(self._flush())
        self._flushes.add(task)
        task.add_done_callback(self._flushes.discard)

    async def _flush(self) -> None:
        async with self._lock:
            batch, self._pending = self._pending, []
            if not batch:
                return
            groups = self._group(batch)
            await asyncio.gather(*(self._flush_group(link, calls) for link, calls in groups))

    def _group(self, batch: list[_Call]) -> list[tuple[KeyConnection, list[_Call]]]:
        client = self.client
        if not isinstance(client, RedisCluster):
            link = self._links.get("")
            if link is None:
                link = self._links[""] = KeyConnection(client, "")
            return [(link, batch)]
        groups: dict[str, list[_Call]] = {}
        for call in batch:
            key = str(call[1][1])
            try:
                node = client.get_node_from_key(key).name  # type: ignore[union-attr]
            except Exception:  # no map yet, or a slot without a node: the link finds out
                node = "?"
            groups.setdefault(node, []).append(call)
            if node not in self._links:
                self._links[node] = KeyConnection(client, key)
        return [(self._links[node], calls) for node, calls in groups.items()]

    def _merge(self, batch: list[_Call]) -> list[list[_Call]]:
        """The batch as it is sent: each call alone, but for calls of a script with a ``many`` form and
        the same keys, which go together where the first of them was (up to MERGE_LIMIT)."""
        many = self.library.many
        if not many:
            return [[call] for call in batch]
        units: list[list[_Call]] = []
        together: dict[tuple[Any, ...], list[_Call]] = {}
        for call in batch:
            name, args, _ = call
            if name not in many:
                units.append([call])
                continue
            key = (name, args[: 1 + args[0]])
            unit = together.get(key)
            if unit is None or len(unit) >= MERGE_LIMIT:
                unit = together[key] = []
                units.append(unit)
            unit.append(call)
        return units

    async def _flush_group(self, link: KeyConnection, calls: list[_Call]) -> None:
        batch = self._merge(calls)
        try:
            replies = await self._send(link, batch)
            if any(is_missing(reply) for reply in replies):
                await self.load()
                replies = await self._send(link, batch)
            slot_error = next((reply for reply in replies if is_slot_error(reply)), None)
            if slot_error is not None:
                self._links.clear()
                raise await link.moved(slot_error)
        except BaseException as exc:
            for _, _, future in calls:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for unit, reply in zip(batch, replies):
            if len(unit) == 1:
                _resolve(unit[0][2], reply)
            elif isinstance(reply, ResponseError) or not isinstance(reply, list) or len(reply) != len(unit):
                error = reply if isinstance(reply, ResponseError) else ResponseError(f"many-call reply {reply!r}")
                for _, _, future in unit:
                    _resolve(future, error)
            else:
                for (_, _, future), one in zip(unit, reply):
                    _resolve(future, one)

    async def _send(self, link: KeyConnection, batch: list[list[_Call]]) -> list[Any]:
        """Each unit of the batch (:meth:`_merge`) as one command; their replies in order."""
        function = self.library.function
        parts: list[bytes] = []
        for unit in batch:
            name, args, _ = unit[0]
            if name is None:
                parts.append(command(*args))
            elif len(unit) == 1:
                parts.append(command(b"FCALL", function(name), *args))
            else:
                head = 1 + args[0]  # the key count and the keys, the same for every call of the unit
                packed: list[Any] = list(args[:head])
                for _, call_args, _ in unit:
                    packed.append(len(call_args) - head)
                    packed.extend(call_args[head:])
                parts.append(command(b"FCALL", function(name, many=True), *packed))
        payload = b"".join(parts)
        connection = await link.get()
        try:
            await connection.send_packed_command(payload, check_health=False)
            return await read_replies(connection, len(batch))
        except BaseException:
            await link.drop()
            raise

    async def close(self) -> None:
        links, self._links = list(self._links.values()), {}
        for link in links:
            await link.release()


def _resolve(future: asyncio.Future[Any], reply: Any) -> None:
    if future.done():
        return
    if isinstance(reply, ResponseError):
        future.set_exception(reply)
    else:
        future.set_result(reply)
