"""A multi-host mock web served on loopback, for tests and benchmarks.

Every host is a distinct loopback address (``127.a.b.c``) on one port: a server
bound to ``0.0.0.0`` answers them all and tells them apart by the local address
of the connection, so no DNS is involved.

The site graph is a pure function of the parameters (:class:`WebSpec`), so a
test can compute the set of reachable pages without asking the server.

Every request is logged as one tab-separated line::

    host  method  path  start  end  status

with ``start`` when the request was read and ``end`` when the response was
written (``time.time()`` seconds), so tests can check politeness from the
server's side.

Run as ``python -m support.mockweb --port 8000 --hosts 50 ...``.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import hashlib
import itertools
import os
import random
import signal
import socket
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from email.utils import formatdate, parsedate_to_datetime

HOSTS_PER_OCTET = 250


def host_ip(index: int) -> str:
    """The loopback address of host ``index`` (0-based)."""
    return (
        f"127.{20 + index // (HOSTS_PER_OCTET * HOSTS_PER_OCTET)}."
        f"{(index // HOSTS_PER_OCTET) % HOSTS_PER_OCTET + 1}.{index % HOSTS_PER_OCTET + 1}"
    )


def host_index(ip: str) -> int:
    """Inverse of :func:`host_ip`; -1 for an address that is not a mock host."""
    try:
        a, b, c, d = (int(part) for part in ip.split("."))
    except ValueError:
        return -1
    if a != 127 or b < 20 or c < 1 or d < 1:
        return -1
    return (b - 20) * HOSTS_PER_OCTET * HOSTS_PER_OCTET + (c - 1) * HOSTS_PER_OCTET + (d - 1)


@dataclass(frozen=True)
class WebSpec:
    """The shape of the mock web.

    ``sizes`` is ``uniform:N`` (every host has N pages) or ``zipf:MAX:S`` (host
    i has ``max(1, MAX / (i + 1) ** S)`` pages: a few big hosts, many small ones).
    Page j of a host links to pages ``j*fanout+1 .. j*fanout+fanout`` of the same
    host (a complete tree, so every page is reachable from ``/``), to ``nav``
    fixed pages of the same host (the repeated navigation links of real sites),
    and to the roots of ``cross`` other hosts.
    """

    hosts: int = 50
    sizes: str = "uniform:20"
    fanout: int = 4
    nav: int = 3
    cross: int = 2
    latency_ms: tuple[float, ...] = (0.0,)
    filler_words: int = 300
    seed: int = 1
    extras: bool = False
    #: A JSON file of per-host misbehaviour (see :class:`Scenario`), or "".
    scenario: str = ""
    _size_cache: tuple[int, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_size_cache", tuple(self._compute_sizes()))

    def _compute_sizes(self) -> Iterator[int]:
        kind, _, rest = self.sizes.partition(":")
        if kind == "uniform":
            n = int(rest)
            for _ in range(self.hosts):
                yield n
        elif kind == "zipf":
            top, _, s = rest.partition(":")
            exponent = float(s or 1.0)
            for i in range(self.hosts):
                yield max(1, int(int(top) / (i + 1) ** exponent))
        else:
            raise ValueError(f"unknown sizes spec {self.sizes!r}")

    def pages(self, host: int) -> int:
        return self._size_cache[host]

    def total_pages(self) -> int:
        return sum(self._size_cache)

    def latency(self, host: int) -> float:
        return self.latency_ms[host % len(self.latency_ms)] / 1000.0

    def page_links(self, host: int, page: int) -> list[tuple[int, int]]:
        """Outlinks of a page as (host, page) pairs, in document order."""
        n = self.pages(host)
        links: list[tuple[int, int]] = []
        for k in range(1, self.fanout + 1):
            child = page * self.fanout + k
            if child < n:
                links.append((host, child))
        for k in range(self.nav):
            links.append((host, k % n))
        for k in range(1, self.cross + 1):
            other = (host * 7919 + k * 104729 + self.seed) % self.hosts
            links.append((other, 0))
        return links

    def reachable(self, seeds: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
        """Every (host, page) reachable from ``seeds`` by following links."""
        seen = set(seeds)
        stack = list(seen)
        while stack:
            node = stack.pop()
            for link in self.page_links(*node):
                if link not in seen:
                    seen.add(link)
                    stack.append(link)
        return seen


def page_path(page: int) -> str:
    return "/" if page == 0 else f"/p/{page}"


def parse_page_path(path: str) -> int:
    """The page number of a path, or -1."""
    if path == "/" or path == "/index.html":
        return 0
    if path.startswith("/p/"):
        tail = path[3:].split("?", 1)[0]
        if tail.isdigit():
            return int(tail)
    return -1


#: A 1x1 transparent PNG.
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


def near_duplicate_words(seed: int, count: int = 400) -> list[str]:
    """A deterministic article: words from a large vocabulary."""
    rng = random.Random(seed * 7919 + 17)
    return [f"word{rng.randrange(5000)}" for _ in range(count)]


_WORDS = ["crawler", "frontier", "politeness", "robots", "queue", "host", "lease", "redis", "scrapy", "archive", "index", "search", "page", "link", "anchor", "text", "content", "change", "rate", "fresh", "stale", "budget", "trap", "calendar", "session", "domain", "server", "client", "fetch", "parse", "store", "record"]
#: Every run of three words, indexed by 15 bits (twice over, so that any
#: 16-bit number indexes it).
_TRIPLES = [" ".join(_WORDS[(i >> shift) & 31] for shift in (0, 5, 10)) for i in range(1 << 16)]


def filler_text(host: int, page: int, seed: int, count: int) -> str:
    """``count`` words, a deterministic pseudo-random sequence per page.

    The words come from a hash stream of (host, page, seed), three words per
    16-bit number: cheap enough that the server spends its CPU on serving.
    """
    triples, rest = divmod(count, 3)
    stream = hashlib.shake_128(b"%d %d %d" % (host, page, seed)).digest(2 * triples + rest)
    text = " ".join(map(_TRIPLES.__getitem__, array.array("H", stream[: 2 * triples])))
    if rest:
        tail = " ".join(_WORDS[byte & 31] for byte in stream[2 * triples :])
        text = f"{text} {tail}" if text else tail
    return text


def render_page(spec: WebSpec, host: int, page: int, port: int) -> bytes:
    links = spec.page_links(host, page)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Host {host} page {page}</title></head><body>",
        f"<h1>Host {host} page {page}</h1><p>",
    ]
    # Deterministic filler text, different on every page.
    parts.append(filler_text(host, page, spec.seed, spec.filler_words))
    parts.append("</p><ul>")
    for i, (other, target) in enumerate(links):
        if other == host:
            # Alternate relative and absolute forms, with a fragment now and then.
            href = page_path(target)
            if i % 3 == 1:
                href = f"http://{host_ip(host)}:{port}{href}"
            elif i % 3 == 2:
                href += "#section"
        else:
            href = f"http://{host_ip(other)}:{port}/"
        parts.append(f"<li><a href=\"{href}\">link {i}</a></li>")
    if spec.extras:
        parts.append('<li><a href="/data.bin">binary</a></li>')
        parts.append('<li><a href="/moved">moved</a></li>')
        parts.append('<li><a href="mailto:someone@example.org">mail</a></li>')
        parts.append('<li><a href="javascript:void(0)">js</a></li>')
    parts.append("</ul></body></html>")
    return "".join(parts).encode()


@dataclass
class Reply:
    status: int
    content_type: str
    body: bytes
    headers: str = ""
    #: normal | drip (1 byte per 0.5 s, forever) | stream (endless 64 KiB chunks)
    #: | truncate (half the declared body, then close)
    mode: str = "normal"
    #: Seconds to wait before answering.
    delay: float = 0.0


SPECIAL_PATHS = (
    "/throttle-seconds", "/throttle-date", "/flaky", "/slow", "/huge.html", "/bomb", "/truncated",
    "/loop-a", "/chain-7", "/private-links", "/server-error", "/big.html", "/large.html",
)


class Scenario:
    """Per-host misbehaviour, from JSON::

        {"robots": {"<host>": {"status": 500, "fail_times": 1, "delay": 5,
                               "redirects": 3, "body": "...", "pad": 600000,
                               "after_pad": "Disallow: /"}},
         "specials": {"<host>": ["/throttle-seconds", ...]}}

    robots: ``status`` answered ``fail_times`` times (forever if absent), with
    ``retry_after`` (a ``Retry-After`` value) if given, then 404 or ``body``
    (200); ``delay`` before answering; ``redirects`` hops
    before the answer; ``pad`` bytes of comments then ``after_pad`` rules.
    specials: paths linked from the host's root page, with the behaviour
    ``respond_special`` gives them.

    changing: ``{"hosts": [...], "pages": 3, "period": 3600, "epoch": E,
    "scale": S}``: the root of each such host links to ``pages`` pages of
    each kind: ``/c/every/<i>`` (new content at every fetch),
    ``/c/poisson/<i>`` (changes at the times of a Poisson process with mean
    gap ``period`` seconds of simulated time, seeded by host and page) and
    ``/c/never/<i>``. Simulated time is ``epoch + (now - epoch) * scale``, as
    the crawler's ``RECRAWL_TIME_SCALE``/``RECRAWL_TIME_EPOCH`` make it.
    Each answer has an ``ETag`` and a ``Last-Modified`` (simulated time);
    ``If-None-Match`` / ``If-Modified-Since`` that match get a ``304``.
    """

    def __init__(self, path: str) -> None:
        import json

        data = json.loads(open(path).read()) if path else {}
        self.robots: dict[int, dict[str, object]] = {int(k): v for k, v in data.get("robots", {}).items()}
        self.specials: dict[int, list[str]] = {int(k): v for k, v in data.get("specials", {}).items()}
        #: host -> "calendar" | "session" | "repeat" | "sitemap"
        self.traps: dict[int, str] = {int(k): v for k, v in data.get("traps", {}).items()}
        farm = data.get("farm") or {}
        #: Hosts named h<i>.<domain> (a link farm under one registered domain).
        self.farm_hosts = range(int(farm.get("start", 0)), int(farm.get("start", 0)) + int(farm.get("count", 0)))
        self.farm_domain = str(farm.get("domain", "farm.test"))
        self.counts: dict[tuple[int, str], int] = {}
        changing = data.get("changing") or {}
        self.changing_hosts: set[int] = {int(h) for h in changing.get("hosts", [])}
        self.changing_pages = int(changing.get("pages", 3))
        self.change_period = float(changing.get("period", 3600.0))
        self.change_epoch = float(changing.get("epoch", 0.0))
        self.change_scale = float(changing.get("scale", 1.0))
        self._change_times: dict[tuple[int, int], list[float]] = {}
        self._change_rngs: dict[tuple[int, int], random.Random] = {}

    def simulated_now(self) -> float:
        return self.change_epoch + (time.time() - self.change_epoch) * self.change_scale

    def change_times(self, host: int, page: int, until: float) -> list[float]:
        """Change times of a Poisson page from the epoch up to at least ``until`` (simulated seconds)."""
        times = self._change_times.setdefault((host, page), [])
        if not times or times[-1] < until:
            # One generator per page: the change times are the same whoever asks, and when.
            rng = self._change_rngs.setdefault((host, page), random.Random(f"{host}-{page}"))
            t = times[-1] if times else self.change_epoch
            while t < until:
                t += rng.expovariate(1.0 / self.change_period)
                times.append(t)
        return times

    def seen(self, host: int, path: str) -> int:
        """How many times (host, path) was requested before this request."""
        count = self.counts.get((host, path), 0)
        self.counts[(host, path)] = count + 1
        return count


_REASONS = {200: "OK", 301: "Moved Permanently", 304: "Not Modified", 404: "Not Found",
            429: "Too Many Requests", 503: "Service Unavailable"}

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


class MockWebServer:
    def __init__(self, spec: WebSpec, port: int, log_path: str | None, log_flush: float = 0.0) -> None:
        self.spec = spec
        self.port = port
        # Rendered pages, so the server spends its CPU on serving (bounded).
        self.cache: dict[tuple[int, int], bytes] = {}
        self.cache_size = 100_000
        # Line-buffered unless ``log_flush`` > 0: then lines are flushed at
        # most ``log_flush`` seconds after they are written (the benchmarks:
        # one write per batch, not per request).
        self.log_flush = log_flush
        self.log_file = open(log_path, "a", buffering=-1 if log_flush > 0 else 1) if log_path else None
        self.flush_pending = False
        self.host_names = [host_ip(host) for host in range(spec.hosts)]
        self.scenario = Scenario(spec.scenario)

    def log(self, host: int, method: str, path: str, start: float, end: float, status: int) -> None:
        if self.log_file is not None:
            name = self.host_names[host] if 0 <= host < len(self.host_names) else "?"
            self.log_file.write(f"{name}\t{method}\t{path}\t{start:.6f}\t{end:.6f}\t{status}\n")
            if self.log_flush > 0 and not self.flush_pending:
                self.flush_pending = True
                asyncio.get_running_loop().call_later(self.log_flush, self.flush_log)

    def flush_log(self) -> None:
        self.flush_pending = False
        if self.log_file is not None and not self.log_file.closed:
            self.log_file.flush()

    def respond(self, host: int, method: str, target: str, headers: dict[str, str] | None = None) -> Reply:
        path = target.split("#", 1)[0]
        if path.startswith("http://"):
            path = "/" + path.split("/", 3)[-1]
        if host < 0 or host >= self.spec.hosts:
            return Reply(404, "text/plain", b"no such host")
        if path == "/robots.txt" or path.startswith("/robots-hop-"):
            return self.respond_robots(host, path)
        if host in self.scenario.changing_hosts:
            reply = self.respond_changing(host, path, headers or {})
            if reply is not None:
                return reply
        trap = self.scenario.traps.get(host)
        if trap is not None or host in self.scenario.farm_hosts:
            reply = self.respond_trap(host, trap or "farm", path)
            if reply is not None:
                return reply
        if path in self.scenario.specials.get(host, ()) or path.startswith(("/loop-", "/chain-")):
            return self.respond_special(host, path)
        page = parse_page_path(path)
        if 0 <= page < self.spec.pages(host):
            return Reply(200, "text/html; charset=utf-8", self.page(host, page))
        if self.spec.extras and path == "/data.bin":
            return Reply(200, "application/octet-stream", bytes(range(256)) * 4)
        if self.spec.extras and path == "/moved":
            return Reply(301, "text/html", b"<html>moved</html>", f"Location: http://{host_ip(host)}:{self.port}/p/1\r\n")
        return Reply(404, "text/html", b"<html><body>not found</body></html>")

    def page(self, host: int, page: int) -> bytes:
        """The body of a page of the site graph, rendered once (the cache is bounded)."""
        body = self.cache.get((host, page))
        if body is None:
            body = render_page(self.spec, host, page, self.port)
            if page == 0 and host in self.scenario.specials:
                links = "".join(f'<a href="{p}">{p}</a>' for p in self.scenario.specials[host])
                body = body.replace(b"</ul>", links.encode() + b"</ul>")
            if len(self.cache) < self.cache_size:
                self.cache[(host, page)] = body
        return body

    def prerender(self) -> None:
        """Render every page of the site graph now, so that serving one costs no rendering."""
        self.cache_size = max(self.cache_size, self.spec.total_pages() + 16)
        for host in range(self.spec.hosts):
            for page in range(self.spec.pages(host)):
                self.page(host, page)

    def respond_changing(self, host: int, path: str, headers: dict[str, str]) -> Reply | None:
        """Pages that change at known rates, with validators (see :class:`Scenario`)."""
        scenario = self.scenario
        n = scenario.changing_pages
        if path == "/":
            links = "".join(
                f'<li><a href="/c/{kind}/{i}">{kind} {i}</a></li>' for kind in ("every", "poisson", "never")
                for i in range(n)
            )
            version, changed_at = 0, scenario.change_epoch
            body = f"<html><body><h1>changing host {host}</h1><ul>{links}</ul></body></html>"
        else:
            parts = path.strip("/").split("/")
            if len(parts) != 3 or parts[0] != "c" or not parts[2].isdigit() or int(parts[2]) >= n:
                return None
            kind, page = parts[1], int(parts[2])
            now = scenario.simulated_now()
            if kind == "every":
                version, changed_at = scenario.seen(host, path) + 1, now
            elif kind == "poisson":
                times = [t for t in scenario.change_times(host, page, now) if t <= now]
                version, changed_at = len(times), (times[-1] if times else scenario.change_epoch)
            elif kind == "never":
                version, changed_at = 0, scenario.change_epoch
            else:
                return None
            words = " ".join(near_duplicate_words(host * 100_003 + page * 1009 + version * 7 + len(kind)))
            body = f"<html><body><h1>{kind} {page} version {version}</h1><p>{words}</p></body></html>"
        etag = f'"{path.replace("/", "_")}-v{version}"'
        modified = int(changed_at)
        validators = f"ETag: {etag}\r\nLast-Modified: {formatdate(modified, usegmt=True)}\r\n"
        if_none_match = headers.get("if-none-match")
        if_modified_since = headers.get("if-modified-since")
        not_modified = False
        if if_none_match is not None:
            not_modified = etag in [tag.strip() for tag in if_none_match.split(",")]
        elif if_modified_since:
            try:
                not_modified = modified <= parsedate_to_datetime(if_modified_since).timestamp()
            except (TypeError, ValueError):
                not_modified = False
        if not_modified:
            return Reply(304, "text/html; charset=utf-8", b"", validators)
        return Reply(200, "text/html; charset=utf-8", body.encode(), validators)

    def farm_name(self, host: int) -> str:
        return f"h{host}.{self.scenario.farm_domain}"

    def respond_trap(self, host: int, trap: str, target: str) -> Reply | None:
        """Pages of trap hosts; None to fall back to the normal page graph."""
        path = target.split("?", 1)[0]
        html = "<html><body><p>trap {}</p>{}</body></html>"
        if trap == "calendar" and (path == "/" or path.startswith("/cal/")):
            year, month = 2026, 1
            if path.startswith("/cal/"):
                try:
                    year, month = (int(x) for x in path[5:].strip("/").split("/")[:2])
                except ValueError:
                    return Reply(404, "text/html", b"bad date")
            after = (year + month // 12, month % 12 + 1)
            before = (year - (month == 1), (month - 2) % 12 + 1)
            links = f'<a href="/cal/{after[0]}/{after[1]}">next</a><a href="/cal/{before[0]}/{before[1]}">prev</a>'
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "session":
            page = parse_page_path(path.split(";", 1)[0])
            if not 0 <= page < self.spec.pages(host):
                return Reply(404, "text/html", b"not found")
            token = f"{time.time_ns():x}"
            links = "".join(
                f'<a href="{page_path(target_page)};jsessionid={token}">x</a><a href="{page_path(target_page)}?sid={token}">y</a>'
                for other, target_page in self.spec.page_links(host, page) if other == host
            )
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "repeat" and (path == "/" or path.startswith("/r/")):
            # Every page links one level deeper, repeating the same pair: /r/a/b/a/b/...
            links = '<a href="/r/a/b/">start</a>' if path == "/" else '<a href="a/b/">deeper</a>'
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "farm" and path != "/":
            return Reply(200, "text/html", html.format(path, "").encode())
        if trap == "farm":
            hosts = self.scenario.farm_hosts
            others = [hosts[(host - hosts.start + k * 37) % len(hosts)] for k in range(1, 21)]
            links = "".join(f'<a href="http://{self.farm_name(o)}:{self.port}/">f</a>' for o in others)
            links += '<a href="/p/1">p1</a>'
            return Reply(200, "text/html", html.format(path, links).encode())
        if trap == "sitemap":
            return self.respond_sitemap(host, path)
        if trap == "dups":
            return self.respond_dups(host, path)
        if trap == "images":
            return self.respond_images(host, path)
        return None

    def respond_dups(self, host: int, path: str) -> Reply | None:
        """Exact copies (/dup/<i>) and near copies (/near/<i>) of one article."""
        article = " ".join(near_duplicate_words(host))
        if path == "/":
            links = "".join(f'<a href="/dup/{i}">d</a><a href="/near/{i}">n</a>' for i in range(1, 5))
            return Reply(200, "text/html", f"<html><body><p>{article}</p>{links}</body></html>".encode())
        if path.startswith("/dup/"):
            return Reply(200, "text/html", f"<html><body><p>{article}</p></body></html>".encode())
        if path.startswith("/near/"):
            i = path.rsplit("/", 1)[1]
            # Small edits: a timestamp, a rotating banner, a session token.
            edits = f"<p>Updated 2026-11-{int(i) + 10} 10:0{i}</p><div>banner {i}</div><i>token{i}x</i>"
            return Reply(200, "text/html", f"<html><body>{edits}<p>{article}</p></body></html>".encode())
        return None

    def respond_images(self, host: int, path: str) -> Reply | None:
        if path == "/":
            body = ('<html><body><img src="/img/logo.png"><img src="/img/photo.jpg">'
                    '<a href="/p/1">p</a></body></html>')
            return Reply(200, "text/html", body.encode())
        if path == "/img/logo.png":
            return Reply(200, "image/png", TINY_PNG)
        if path == "/img/photo.jpg":
            return Reply(200, "image/jpeg", b"\xff\xd8\xff\xe0not really a jpeg")
        return None

    def respond_sitemap(self, host: int, path: str) -> Reply | None:
        import gzip

        base = f"http://{host_ip(host)}:{self.port}"
        urlset = "<?xml version='1.0'?><urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>{}</urlset>"
        if path == "/sitemap_index.xml":
            body = (
                "<?xml version='1.0'?><sitemapindex xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'>"
                f"<sitemap><loc>{base}/sitemap1.xml.gz</loc></sitemap>"
                f"<sitemap><loc>{base}/sitemap2.xml</loc></sitemap></sitemapindex>"
            )
            return Reply(200, "application/xml", body.encode())
        if path == "/sitemap1.xml.gz":
            entries = "".join(f"<url><loc>{base}/s/{i}</loc><lastmod>2026-11-0{1 + i % 9}</lastmod></url>"
                              for i in range(1, 6))
            return Reply(200, "application/x-gzip", gzip.compress(urlset.format(entries).encode()))
        if path == "/sitemap2.xml":
            entries = "".join(f"<url><loc>{base}/s/{i}</loc></url>" for i in range(6, 9))
            entries += "<url><loc>http://elsewhere.test/s/99</loc></url>"
            return Reply(200, "text/xml", urlset.format(entries).encode())
        if path.startswith("/s/"):
            return Reply(200, "text/html", b"<html><body>only in the sitemap</body></html>")
        return None

    def respond_robots(self, host: int, path: str) -> Reply:
        rules = self.scenario.robots.get(host)
        if rules is None and self.scenario.traps.get(host) == "sitemap":
            body = f"User-agent: *\nSitemap: http://{host_ip(host)}:{self.port}/sitemap_index.xml\n"
            return Reply(200, "text/plain", body.encode())
        if rules is None:
            return Reply(404, "text/plain", b"no robots.txt here")
        redirects = int(rules.get("redirects", 0))  # type: ignore[call-overload]
        hop = int(path.rsplit("-", 1)[1].split(".")[0]) if path.startswith("/robots-hop-") else 0
        if hop < redirects:
            return Reply(301, "text/plain", b"", f"Location: /robots-hop-{hop + 1}.txt\r\n")
        count = self.scenario.seen(host, "/robots.txt")
        delay = float(rules.get("delay", 0))  # type: ignore[arg-type]
        status = int(rules.get("status", 200))  # type: ignore[call-overload]
        fail_times = rules.get("fail_times")
        if status != 200 and (fail_times is None or count < int(fail_times)):  # type: ignore[call-overload]
            retry_after = f"Retry-After: {rules['retry_after']}\r\n" if "retry_after" in rules else ""
            return Reply(status, "text/plain", b"robots.txt failure", retry_after, delay=delay)
        if "body" not in rules:
            return Reply(404, "text/plain", b"no robots.txt here", delay=delay)
        body = str(rules["body"]).replace("{port}", str(self.port)).encode()
        if "pad" in rules:
            line = b"# " + b"p" * 97 + b"\n"
            body += line * (int(rules["pad"]) // len(line) + 1)  # type: ignore[call-overload]
            body += str(rules.get("after_pad", "")).encode()
        return Reply(200, "text/plain", body, delay=delay)

    def respond_special(self, host: int, path: str) -> Reply:
        count = self.scenario.seen(host, path)
        html = b"<html><body><p>special page</p></body></html>"
        if path == "/throttle-seconds" and count == 0:
            return Reply(429, "text/html", b"slow down", "Retry-After: 2\r\n")
        if path == "/throttle-date" and count == 0:
            from email.utils import formatdate

            return Reply(429, "text/html", b"slow down", f"Retry-After: {formatdate(time.time() + 3, usegmt=True)}\r\n")
        if path == "/flaky" and count < 2:
            return Reply(503, "text/html", b"try later")
        if path == "/server-error":
            return Reply(500, "text/html", b"broken")
        if path == "/big.html":
            return Reply(200, "text/html", b"<html><body>" + b"x" * (2 * 1024 * 1024) + b"</body></html>")
        if path == "/large.html":
            return Reply(200, "text/html", b"<html><body>" + b"y" * (600 * 1024) + b"</body></html>")
        if path == "/slow":
            return Reply(200, "text/html", b"", mode="drip")
        if path == "/huge.html":
            return Reply(200, "application/octet-stream", b"", mode="stream")
        if path == "/bomb":
            import gzip

            bomb = self.cache.get((-1, -1))
            if bomb is None:
                bomb = gzip.compress(b"\0" * (20 * 1024 * 1024), compresslevel=9)
                self.cache[(-1, -1)] = bomb
            return Reply(200, "text/html", bomb, "Content-Encoding: gzip\r\n")
        if path == "/truncated":
            return Reply(200, "text/html", html * 40, mode="truncate")
        if path.startswith("/loop-"):
            other = "/loop-b" if path == "/loop-a" else "/loop-a"
            return Reply(301, "text/html", b"", f"Location: {other}\r\n")
        if path.startswith("/chain-"):
            left = int(path.rsplit("-", 1)[1])
            if left > 0:
                return Reply(301, "text/html", b"", f"Location: /chain-{left - 1}\r\n")
            return Reply(200, "text/html", html)
        if path == "/foreign":
            return Reply(200, "text/html", b'<html><body><a href="http://93.184.216.34/">public</a></body></html>')
        if path == "/private-links":
            links = (
                '<a href="http://169.254.169.254/latest/meta-data/">metadata</a>'
                '<a href="http://10.0.0.1/">intranet</a>'
                f'<a href="http://localhost:{self.port}/">localhost</a>'
            )
            return Reply(200, "text/html", f"<html><body>{links}</body></html>".encode())
        return Reply(200, "text/html", html)


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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spec_arguments(spec: WebSpec) -> list[str]:
    """Command-line arguments that reproduce ``spec`` in a server process."""
    return [
        "--hosts", str(spec.hosts), "--sizes", spec.sizes, "--fanout", str(spec.fanout),
        "--nav", str(spec.nav), "--cross", str(spec.cross),
        "--latency-ms", ",".join(str(x) for x in spec.latency_ms),
        "--filler-words", str(spec.filler_words), "--seed", str(spec.seed),
    ] + (["--extras"] if spec.extras else []) + (["--scenario", spec.scenario] if spec.scenario else [])


@dataclass
class LogEntry:
    host: str
    method: str
    path: str
    start: float
    end: float
    status: int


def read_log(path: str) -> list[LogEntry]:
    entries = []
    with open(path) as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 6:
                entries.append(
                    LogEntry(parts[0], parts[1], parts[2], float(parts[3]), float(parts[4]), int(parts[5]))
                )
    return entries


@dataclass
class PolitenessReport:
    overlaps: int
    short_gaps: int
    requests: int

    @property
    def violations(self) -> int:
        return self.overlaps + self.short_gaps


def politeness(entries: list[LogEntry], min_gap: float, tolerance: float = 0.002) -> PolitenessReport:
    """Count overlapping requests to one host and gaps shorter than ``min_gap``."""
    by_host: dict[str, list[LogEntry]] = {}
    for entry in entries:
        by_host.setdefault(entry.host, []).append(entry)
    overlaps = short = 0
    for host_entries in by_host.values():
        host_entries.sort(key=lambda e: e.start)
        for before, after in itertools.pairwise(host_entries):
            if after.start < before.end:
                overlaps += 1
            elif after.start - before.end < min_gap - tolerance:
                short += 1
    return PolitenessReport(overlaps, short, len(entries))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--sizes", default="uniform:20")
    parser.add_argument("--fanout", type=int, default=4)
    parser.add_argument("--nav", type=int, default=3)
    parser.add_argument("--cross", type=int, default=2)
    parser.add_argument("--latency-ms", default="0")
    parser.add_argument("--filler-words", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extras", action="store_true")
    parser.add_argument("--scenario", default="")
    parser.add_argument("--log", default=None)
    parser.add_argument("--log-flush", type=float, default=0.0,
                        help="flush the request log at most this many seconds after a line (0: every line)")
    parser.add_argument("--silent-port", type=int, default=0,
                        help="also accept connections on this port and never answer them (dead hosts that listen)")
    parser.add_argument("--prerender", action="store_true",
                        help="render every page before listening (benchmarks: the web's CPU goes to serving)")
    args = parser.parse_args(argv)
    spec = WebSpec(
        hosts=args.hosts, sizes=args.sizes, fanout=args.fanout, nav=args.nav,
        cross=args.cross, latency_ms=tuple(float(x) for x in args.latency_ms.split(",")),
        filler_words=args.filler_words, seed=args.seed, extras=args.extras, scenario=args.scenario,
    )
    if os.environ.get("MOCKWEB_NICE"):
        os.nice(int(os.environ["MOCKWEB_NICE"]))
    asyncio.run(serve_forever(spec, args.port, args.log, args.log_flush, args.prerender, args.silent_port))


if __name__ == "__main__":
    sys.exit(main())
