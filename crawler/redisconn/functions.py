"""The crawl's Lua as one Redis function library, loaded once per server and called with ``FCALL``.

Redis runs a script's (``EVAL``) whole text on every call, the definitions of
its helpers included; a function library (Redis 7, ``FUNCTION LOAD``) runs
its text once, when it loads, and a call runs only its function. The crawl's
scripts are one library (:func:`crawler.crawlstate.library.compose_library`), named
``crawler`` in Redis and versioned: ``crawler_version`` answers the
library's version (the package's version and a digest of the library's
text).

A worker (:class:`FunctionLibrary.ensure`, with its name) first says which
version it runs (the server-wide sorted set :data:`USERS_KEY`: member
``<version> <worker>``, score the time its word lapses, renewed every
:data:`RENEW_SECONDS`), then makes sure its version is loaded on the server
(on a Redis Cluster, on every primary; replicas get it by replication). A
server without the library gets it; one with another version gets this one
in its place unless a worker of that version said it is running (its word
not lapsed): then the worker refuses to start, with one line. ``scrapy
frontier`` commands load the library the same way without saying they run.

A server that lost its functions (a restart without persistence, ``FUNCTION
FLUSH``) answers a call "Function not found": callers load the library
again and send the call again (:func:`is_missing`).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from functools import cache
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from crawler import __version__
from crawler.crawlstate.library import LIBRARY_MANY, LIBRARY_NAME, compose_library, function_name, library_scripts
from crawler.exceptions import FrontierUnavailableError
from crawler.redisconn.link import AnyRedis

logger = logging.getLogger(__name__)

#: Who runs which library version: member ``<version> <worker>``, score the epoch ms its word lapses.
USERS_KEY = "crawler:functions:users"
#: How often a worker renews its word, and how long it holds.
RENEW_SECONDS = 30.0
HOLD_SECONDS = 3 * RENEW_SECONDS


class LibraryConflictError(FrontierUnavailableError):
    """The server runs another version of the library, and a worker of that version is running."""


def is_missing(error: BaseException) -> bool:
    """Redis' answer to a call of a function it does not have."""
    return isinstance(error, ResponseError) and "function not found" in str(error).lower()


class FunctionLibrary:
    """A function library: its source and version, its functions' names, and its loading."""

    def __init__(self, name: str, scripts: dict[str, str], many: tuple[str, ...] = (), *,
                 common: bool = True, version: str | None = None) -> None:
        self.name = name
        self.many = frozenset(many)
        digest = hashlib.sha1(compose_library(name, scripts, many, "", common=common).encode()).hexdigest()
        self.version = version or f"{__version__}-{digest[:12]}"
        self.source = compose_library(name, scripts, many, self.version, common=common)
        #: Function names by script, as sent (``FCALL <name>``).
        self.functions = {script: function_name(script, library=name).encode() for script in scripts}
        self.many_functions = {script: function_name(script, many=True, library=name).encode()
                               for script in scripts if script in self.many}
        self._renewal: asyncio.Task[None] | None = None

    def function(self, script: str, *, many: bool = False) -> bytes:
        return self.many_functions[script] if many else self.functions[script]

    async def ensure(self, client: AnyRedis, worker: str | None = None, where: str = "Redis") -> None:
        """Make sure this version of the library is loaded (every primary of a cluster; also after a call
        found its function missing); ``worker``: say first that this worker runs it (see the module's
        notes), and keep saying it until :meth:`leave`. Raises :class:`LibraryConflictError` if another
        version is loaded and a worker of it runs."""
        if worker is not None:
            await self._say(client, worker)
            if self._renewal is None:
                self._renewal = asyncio.ensure_future(self._renew(client, worker))
        for node in _primaries(client):
            await self._ensure_on(client, node, where)

    async def call(self, client: AnyRedis, script: str, keys: list[Any], *args: Any) -> Any:
        """One call of ``script``'s function, outside a batch (operators' commands, rare calls); the library
        loaded again if the server lost it. On a cluster, ``keys[0]`` names the node."""
        command = ("FCALL", self.function(script), len(keys), *keys, *args)
        node = client.get_node_from_key(keys[0]) if isinstance(client, RedisCluster) else None
        try:
            return await _on(client, node, *command)
        except ResponseError as exc:
            if not is_missing(exc):
                raise
        await self.ensure(client)
        return await _on(client, node, *command)

    async def leave(self, client: AnyRedis, worker: str) -> None:
        """Stop saying that ``worker`` runs this version (at close)."""
        if self._renewal is not None:
            self._renewal.cancel()
            self._renewal = None
        try:
            await client.zrem(USERS_KEY, f"{self.version} {worker}")
        except (RedisError, OSError) as exc:
            logger.debug("could not remove %s from %s: %s", worker, USERS_KEY, exc)

    async def _say(self, client: AnyRedis, worker: str) -> None:
        now_ms = int(time.time() * 1000)
        try:
            pipe = client.pipeline(transaction=False)
            pipe.zremrangebyscore(USERS_KEY, "-inf", now_ms)
            pipe.zadd(USERS_KEY, {f"{self.version} {worker}": now_ms + int(HOLD_SECONDS * 1000)})
            await pipe.execute()
        except ResponseError as exc:  # a full Redis (OOM): the word is advisory, the crawl goes on
            logger.warning("Could not record in Redis that this worker runs library %s (%s): %s", self.version,
                           USERS_KEY, exc)

    async def _renew(self, client: AnyRedis, worker: str) -> None:
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                await self._say(client, worker)
            except (RedisError, OSError) as exc:  # an outage: the next turn tries again
                logger.debug("could not renew %s in %s: %s", worker, USERS_KEY, exc)

    async def _ensure_on(self, client: AnyRedis, node: Any, where: str) -> None:
        for _ in range(3):  # another worker may load or replace it between our read and our load
            loaded = await self._loaded(client, node, where)
            if loaded == self.version:
                return
            replace = loaded is not None
            if loaded is not None:
                users = await self._users_of(client, loaded)
                if users:
                    raise LibraryConflictError(
                        f"{where} runs the crawler's Lua library version {loaded}, used by {', '.join(users[:3])}"
                        f"{' and others' if len(users) > 3 else ''}; this worker has version {self.version}: stop "
                        f"the workers of the other version first, or use another Redis (REDIS_URL)")
            try:
                await _on(client, node, "FUNCTION", "LOAD", *(["REPLACE"] if replace else []), self.source)
            except ResponseError as exc:
                if "already exists" in str(exc):
                    continue  # loaded by another worker meanwhile: read its version again
                raise FrontierUnavailableError(f"{where} refused the crawler's Lua library: {exc}") from None
            logger.info("Loaded the crawler's Lua library %s into %s%s", self.version, where,
                        f" (in place of {loaded})" if replace else "")
            return
        raise FrontierUnavailableError(f"{where}: the crawler's Lua library kept changing while loading it")

    async def _loaded(self, client: AnyRedis, node: Any, where: str) -> str | None:
        try:
            reply = await _on(client, node, "FCALL", f"{self.name}_version", 0)
        except ResponseError as exc:
            if is_missing(exc):
                return None
            if "unknown command" in str(exc).lower():
                raise FrontierUnavailableError(f"{where} has no function libraries (FCALL): the crawler needs "
                                               f"Redis 7.0 or later ({exc})") from None
            raise
        return reply.decode() if isinstance(reply, bytes) else str(reply)

    async def _users_of(self, client: AnyRedis, version: str) -> list[str]:
        now_ms = int(time.time() * 1000)
        members = await client.zrangebyscore(USERS_KEY, now_ms, "+inf")
        users = []
        for member in members:
            text = member.decode() if isinstance(member, bytes) else str(member)
            used, _, worker = text.partition(" ")
            if used == version:
                users.append(worker)
        return users


def _primaries(client: AnyRedis) -> list[Any]:
    if isinstance(client, RedisCluster):
        return list(client.get_primaries())
    return [None]


async def _on(client: AnyRedis, node: Any, *args: Any) -> Any:
    if node is None:
        return await client.execute_command(*args)
    return await client.execute_command(*args, target_nodes=node)


@cache
def crawler_library() -> FunctionLibrary:
    """The crawl's library (every script of :data:`crawler.crawlstate.library.LIBRARY_SCRIPTS`)."""
    return FunctionLibrary(LIBRARY_NAME, library_scripts(), LIBRARY_MANY)
