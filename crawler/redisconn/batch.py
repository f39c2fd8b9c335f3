"""Script calls from many coroutines, sent to Redis together.

Item pipelines call a script per item; with many responses in flight, the
calls made in one turn of the event loop go out in one write on a dedicated
connection and their replies are handed back in order (RESP pipelining). A
connection failure fails every call of the batch (the callers decide what
that means); a lost script cache is reloaded and the batch sent again.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import TYPE_CHECKING, Any

from redis.exceptions import NoScriptError, ResponseError

from crawler.redisconn.resp import command

if TYPE_CHECKING:
    from redis.asyncio import Redis


class BatchedScripts:
    def __init__(self, client: Redis, sources: dict[str, str]) -> None:
        self.client = client
        self.sources = sources
        self.shas = {name: hashlib.sha1(src.encode()).hexdigest() for name, src in sources.items()}
        self._pending: list[tuple[str, tuple[Any, ...], asyncio.Future[Any]]] = []
        self._connection: Any = None
        self._lock = asyncio.Lock()
        self._flushes: set[asyncio.Task[None]] = set()

    async def load(self) -> None:
        for name, source in self.sources.items():
            self.shas[name] = await self.client.script_load(source)

    def call(self, name: str, keys: list[str], args: list[Any]) -> asyncio.Future[Any]:
        """Queue a script call; the future resolves with its reply (or its error)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._schedule)
        self._pending.append((name, (len(keys), *keys, *args), future))
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
            try:
                replies = await self._send(batch)
                if any(isinstance(reply, NoScriptError) for reply in replies):
                    await self.load()
                    replies = await self._send(batch)
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

    async def _send(self, batch: list[tuple[str, tuple[Any, ...], asyncio.Future[Any]]]) -> list[Any]:
        payload = b"".join(command(b"EVALSHA", self.shas[name], *args) for name, args, _ in batch)
        if self._connection is None:
            self._connection = await self.client.connection_pool.get_connection()  # type: ignore[no-untyped-call]
        connection = self._connection
        try:
            await connection.send_packed_command(payload, check_health=False)
            replies: list[Any] = []
            for _ in batch:
                try:
                    replies.append(await connection.read_response())
                except ResponseError as exc:
                    replies.append(exc)
            return replies
        except BaseException:
            self._connection = None
            await connection.disconnect()
            await self.client.connection_pool.release(connection)
            raise

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            await self.client.connection_pool.release(connection)
