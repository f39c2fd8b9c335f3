"""Connections of the lean client: opened with Happy Eyeballs, kept idle per origin."""

from __future__ import annotations

import asyncio
import socket
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import aiohappyeyeballs

from crawler.downloader.http11.connection import HttpConnection

if TYPE_CHECKING:
    import ssl

Key = tuple[str, str, int]


class ConnectionPool:
    """Idle keep-alive connections by (scheme, host, port), bounded, least recently used out.

    A connection idle longer than ``idle_timeout`` is closed when the pool is
    next used; at most ``max_idle`` wait in all; one the server closes
    leaves the pool by itself.
    """

    def __init__(self, max_idle: int, idle_timeout: float) -> None:
        self.max_idle = max_idle
        self.idle_timeout = idle_timeout
        self._idle: dict[Key, list[HttpConnection]] = {}
        self._order: OrderedDict[HttpConnection, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._order)

    def acquire(self, key: Key) -> HttpConnection | None:
        self._expire(time.monotonic())
        connections = self._idle.get(key)
        while connections:
            connection = connections.pop()
            del self._order[connection]
            if not connections:
                del self._idle[key]
            connection.on_lost = None
            if connection.reusable:
                return connection
            connection.abort()
            connections = self._idle.get(key)
        return None

    def release(self, connection: HttpConnection) -> None:
        """Keep ``connection`` for its origin's next request, or close it."""
        if not connection.reusable or self.max_idle <= 0:
            connection.abort()
            return
        now = time.monotonic()
        connection.idle_since = now
        connection.on_lost = self._lost
        self._idle.setdefault(connection.key, []).append(connection)
        self._order[connection] = None
        while len(self._order) > self.max_idle:
            self._evict(next(iter(self._order)))
        self._expire(now)

    def close(self) -> None:
        for connection in list(self._order):
            self._evict(connection)

    def _expire(self, now: float) -> None:
        order = self._order
        while order:
            oldest = next(iter(order))
            if now - oldest.idle_since < self.idle_timeout:
                return
            self._evict(oldest)

    def _evict(self, connection: HttpConnection) -> None:
        self._discard(connection)
        connection.on_lost = None
        connection.abort()

    def _lost(self, connection: HttpConnection) -> None:
        self._discard(connection)

    def _discard(self, connection: HttpConnection) -> None:
        if self._order.pop(connection, 0) is None:
            connections = self._idle.get(connection.key)
            if connections is not None:
                connections.remove(connection)
                if not connections:
                    del self._idle[connection.key]


#: Seconds before the next address is tried while the previous attempt is still pending (RFC 8305: 250 ms).
HAPPY_EYEBALLS_DELAY = 0.25


def _address_info(address: str, port: int) -> tuple[Any, ...]:
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))


async def connect(
    key: Key,
    addresses: list[str],
    *,
    ssl_context: ssl.SSLContext | None,
    server_hostname: str | None,
    local_addr: tuple[str, int] | None,
) -> HttpConnection:
    """A new connection to the first of ``addresses`` that answers (Happy Eyeballs), TLS on top if asked.

    Raises ``OSError`` when no address answers, ``ssl.SSLError`` when the TLS
    handshake fails (a certificate that does not verify, say).
    """
    loop = asyncio.get_running_loop()
    sock = await aiohappyeyeballs.start_connection(
        [_address_info(address, key[2]) for address in addresses],
        local_addr_infos=[_address_info(*local_addr)] if local_addr else None,
        happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
        interleave=1,
    )
    try:
        _, protocol = await loop.create_connection(
            lambda: HttpConnection(key), sock=sock,
            ssl=ssl_context, server_hostname=server_hostname if ssl_context is not None else None,
        )
    except BaseException:
        sock.close()
        raise
    return protocol
