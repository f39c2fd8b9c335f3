"""The mock web's HTTP/1.1 server: keep-alive connections on one port for every loopback host, and a
port that never answers (dead hosts that still listen)."""

from __future__ import annotations

import asyncio
import random
import signal
import socket
import time
from pathlib import Path

from support.mockweb.site import MockWebServer, Reply
from support.mockweb.web import WebSpec, host_index, host_ip

_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
            307: "Temporary Redirect", 308: "Permanent Redirect", 404: "Not Found", 429: "Too Many Requests",
            500: "Internal Server Error", 503: "Service Unavailable"}

#: A parsed request: method, target, time it was read, headers.
Incoming = tuple[str, str, float, dict[str, str]]


class MockWebProtocol(asyncio.Protocol):
    """One HTTP/1.1 connection: keep-alive, requests answered in order.

    A request that finds the connection idle and gets an immediate, normal
    answer is answered from ``data_received``; the others (a latency, a
    delay, a misbehaving answer, or requests pipelined behind one) go through
    a queue served by one task per connection.
    """

    def __init__(self, server: MockWebServer) -> None:
        self.server = server
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.host = -1
        self.latency = 0.0
        self.queue: asyncio.Queue[tuple[Incoming, Reply | None] | None] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        #: No request queued or being answered by the task.
        self.idle = True
        #: When the client closed the connection (a request it abandoned ends there).
        self.closed_at = float("inf")

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sockname = transport.get_extra_info("sockname")
        self.host = host_index(sockname[0]) if sockname else -1
        self.latency = self.server.spec.latency(self.host) if self.host >= 0 else 0.0
        self.task = asyncio.ensure_future(self.serve())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed_at = time.time()
        self.queue.put_nowait(None)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buffer) > 65536 and self.transport:
                    self.transport.close()
                return
            head = self.buffer[:end].decode("latin-1")
            self.buffer = self.buffer[end + 4 :]
            request_line, *lines = head.split("\r\n")
            try:
                method, target, _version = request_line.split(" ", 2)
            except ValueError:
                method, target = "BAD", "/"
            headers = {}
            for line in lines:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            incoming = (method, target, time.time(), headers)
            if not self.idle:
                self.queue.put_nowait((incoming, None))
                continue
            reply = self.server.respond(self.host, method, target, headers)
            if reply.mode == "normal" and not (self.latency or reply.delay) and self.transport is not None:
                self.answer(incoming, reply)
            else:
                self.idle = False
                self.queue.put_nowait((incoming, reply))

    def answer(self, incoming: Incoming, reply: Reply) -> None:
        """Write the head of ``reply`` and, for a normal answer, its body."""
        assert self.transport is not None
        method = incoming[0]
        length = "" if reply.mode in ("drip", "stream") else f"Content-Length: {len(reply.body)}\r\n"
        head = (
            f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'OK')}\r\nContent-Type: {reply.content_type}\r\n"
            f"{length}{reply.headers}Connection: keep-alive\r\n\r\n"
        ).encode()
        if reply.mode == "normal":
            self.transport.write(head + (b"" if method == "HEAD" else reply.body))
            self.server.log(self.host, method, incoming[1], incoming[2], min(time.time(), self.closed_at), reply.status)
        else:
            self.transport.write(head)

    async def serve(self) -> None:
        while True:
            queued = await self.queue.get()
            if queued is None or self.transport is None or self.transport.is_closing():
                return
            incoming, reply = queued
            method, target, start, headers = incoming
            if reply is None:
                reply = self.server.respond(self.host, method, target, headers)
            delay = self.latency + reply.delay
            if delay:
                await asyncio.sleep(delay)
            if self.transport.is_closing():
                self.server.log(self.host, method, target, start, min(time.time(), self.closed_at), 0)
                return
            self.answer(incoming, reply)
            if reply.mode != "normal":
                await self.misbehave(reply)
                self.server.log(self.host, method, target, start, min(time.time(), self.closed_at), reply.status)
                return
            if self.queue.empty():
                self.idle = True

    async def misbehave(self, reply: Reply) -> None:
        assert self.transport is not None
        if reply.mode == "truncate":
            self.transport.write(reply.body[: len(reply.body) // 2])
            await asyncio.sleep(0.05)
        elif reply.mode in ("drip", "stream"):
            chunk, pause = (b"x", 0.5) if reply.mode == "drip" else (b"\0" * 65536, 0.001)
            deadline = time.time() + 60
            while not self.transport.is_closing() and time.time() < deadline:
                self.transport.write(chunk)
                await asyncio.sleep(pause)
        self.transport.close()


class SilentProtocol(asyncio.Protocol):
    """A server that accepts a connection, reads what comes and never answers (a dead host that
    still listens). The request is logged with status 0 when the client gives up and closes."""

    def __init__(self, server: MockWebServer) -> None:
        self.server = server
        self.host = -1
        self.request: tuple[str, str, float] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sockname = transport.get_extra_info("sockname")
        self.host = host_index(sockname[0]) if sockname else -1

    def data_received(self, data: bytes) -> None:
        if self.request is None:
            method, _, rest = data.split(b"\r\n", 1)[0].decode("latin-1").partition(" ")
            self.request = (method, rest.rsplit(" ", 1)[0], time.time())

    def connection_lost(self, exc: Exception | None) -> None:
        if self.request is not None:
            method, target, start = self.request
            self.server.log(self.host, method, target, start, time.time(), 0)


def _listen(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    return sock


async def serve_forever(
    spec: WebSpec, port: int, log_path: str | None, log_flush: float = 0.0, prerender: bool = False,
    silent_port: int = 0,
) -> None:
    server = MockWebServer(spec, port, log_path, log_flush)
    if prerender:
        server.prerender()
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: MockWebProtocol(server), sock=_listen(port), backlog=4096)
    if silent_port:
        # Host names beyond the web's own hosts are logged by their address.
        server.host_names += [host_ip(host) for host in range(spec.hosts, 2 * spec.hosts + 1)]
        await loop.create_server(lambda: SilentProtocol(server), sock=_listen(silent_port), backlog=4096)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"mockweb listening on port {port}", flush=True)
    await stop.wait()
    srv.close()
    if server.log_file is not None:
        server.log_file.close()


def _ephemeral_floor() -> int:
    """The first port the kernel hands to outgoing connections (Linux's default is 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port for a server to listen on, free now and below the kernel's ephemeral range.

    A port the kernel gives for ``bind(0)`` is an ephemeral one: between this call and
    the server's own bind, any outgoing connection on the machine (thousands a second in
    a crawl test) may take it as its local port, and the server then fails to start. Ports
    below the ephemeral range are only ever taken by an explicit bind, so a port checked
    free here stays free unless another test picks the same one at random.
    """
    floor = _ephemeral_floor()
    low = 10000 if floor > 12000 else 1024
    for _ in range(200):
        port = random.randrange(low, floor)
        with socket.socket() as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
