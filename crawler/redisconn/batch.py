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
what that means); a lost script cache is reloaded and the batch sent again
(so a batched plain command must be one that may be repeated: reads, SET,
HSET, HDEL, SADD).

Replies are RESP's own (bytes, integers, lists, None), not redis-py's
converted ones.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, ResponseError

from crawler.redisconn.link import AnyRedis, KeyConnection, is_slot_error, read_replies
from crawler.redisconn.resp import command

#: A queued call: the script's name (None: a plain command), its arguments, its reply's future.
_Call = tuple[str | None, tuple[Any, ...], asyncio.Future[Any]]


class BatchedScripts:
    def __init__(self, client: AnyRedis, sources: dict[str, str] | None = None) -> None:
        self.client = client
        self.sources: dict[str, str] = {}
        self.shas: dict[str, str] = {}
        for name, source in (sources or {}).items():
            self.add_script(name, source)
        self._pending: list[_Call] = []
        #: One connection per server (a single Redis: one; a cluster: one per primary used).
        self._links: dict[str, KeyConnection] = {}
        self._lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()

    def add_script(self, name: str, source: str) -> None:
        """A script :meth:`call` may name (loaded into Redis at its first use)."""
        self.sources[name] = source
        self.shas[name] = hashlib.sha1(source.encode()).hexdigest()

    async def load(self) -> None:
        for name, source in self.sources.items():
            self.shas[name] = await self.client.script_load(source)

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

    async def _flush_group(self, link: KeyConnection, batch: list[_Call]) -> None:
        try:
            replies = await self._send(link, batch)
            if any(isinstance(reply, NoScriptError) for reply in replies):
                await self.load()
                replies = await self._send(link, batch)
            slot_error = next((reply for reply in replies if is_slot_error(reply)), None)
            if slot_error is not None:
                self._links.clear()
                raise await link.moved(slot_error)
        except BaseException as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return
        for (_, _, future), reply in zip(batch, replies):
            if future.done():
                continue
            if isinstance(reply, ResponseError):
                future.set_exception(reply)
            else:
                future.set_result(reply)

    async def _send(self, link: KeyConnection, batch: list[_Call]) -> list[Any]:
        shas = self.shas
        payload = b"".join(command(*args) if name is None else command(b"EVALSHA", shas[name], *args)
                           for name, args, _ in batch)
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
