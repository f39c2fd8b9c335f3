"""CPU per fetch of the lean HTTP/1.1 client against aiohttp, side by side.

Fetches the same pages of the mock web (200 hosts, keep-alive, 32 at a
time) with :mod:`crawler.downloader.http11` and with an aiohttp session set
up as Scrapy's handler sets it up (but allowed a connection per host, like
the lean client's pool here, so both reuse every connection), alternating rounds, and prints the CPU of
this process per fetch for each. The clients only: no Scrapy, no parsing.

Usage: ``python benchmarks/http_client.py [--fetches 6000] [--rounds 2]``.
Not a test: figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from benchmarks.throughput import Web  # noqa: E402
from crawler.downloader import http11  # noqa: E402
from support.mockweb import WebSpec, host_ip  # noqa: E402

CONCURRENCY = 32
HEADERS = [(b"User-Agent", b"benchbot/1.0"), (b"Accept-Encoding", b"gzip, deflate")]
#: Connections each client may keep: one per host, so neither reconnects.
IDLE = 400
STR_HEADERS = {name.decode(): value.decode() for name, value in HEADERS}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def fetch_all(urls: list[tuple[str, int, str]], fetch: Callable[[str, int, str], Awaitable[int]]) -> int:
    queue = list(urls)
    total = 0

    async def worker() -> None:
        nonlocal total
        while queue:
            host, port, path = queue.pop()
            received = await fetch(host, port, path)
            total += received

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return total


async def lean_round(urls: list[tuple[str, int, str]]) -> int:
    pool = http11.ConnectionPool(max_idle=IDLE, idle_timeout=15.0)

    async def fetch(host: str, port: int, path: str) -> int:
        key: http11.Key = ("http", host, port)
        connection = pool.acquire(key)
        if connection is None:
            connection = await http11.connect(key, [host], ssl_context=None, server_hostname=None, local_addr=None)
        payload = http11.request_head("GET", path, f"{host}:{port}", HEADERS, b"")
        await connection.start(payload, head_only=False, limit=16 * 1024 * 1024, on_chunk=None)
        body = await connection.read_body()
        pool.release(connection)
        return len(body)

    try:
        return await fetch_all(urls, fetch)
    finally:
        pool.close()


async def aiohttp_round(urls: list[tuple[str, int, str]]) -> int:
    connector = aiohttp.TCPConnector(limit=IDLE, limit_per_host=CONCURRENCY)
    session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
                                    skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"))

    async def fetch(host: str, port: int, path: str) -> int:
        async with session.get(f"http://{host}:{port}{path}", headers=STR_HEADERS,
                               allow_redirects=False) as response:
            return len(await response.read())

    try:
        return await fetch_all(urls, fetch)
    finally:
        await session.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fetches", type=int, default=6000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    # 200 hosts of 40 pages: connections are kept and reused, as in a crawl.
    spec = WebSpec(hosts=200, sizes="uniform:40", fanout=10, nav=20, cross=10, filler_words=600)
    with tempfile.TemporaryDirectory(prefix="crawler-http-") as workdir:
        web = Web(spec, Path(workdir) / "web.log")
        try:
            urls = [(host_ip(i % spec.hosts), web.port, f"/p/{1 + (i // spec.hosts) % 39}") for i in range(args.fetches)]
            results: dict[str, list[float]] = {"lean": [], "aiohttp": []}
            for _ in range(args.rounds):
                for name, round_ in (("lean", lean_round), ("aiohttp", aiohttp_round)):
                    before = cpu_seconds()
                    received = asyncio.run(round_(urls))
                    results[name].append(1000 * (cpu_seconds() - before) / args.fetches)
                    print(f"{name:8} {results[name][-1]:.3f} ms CPU per fetch ({received / args.fetches:,.0f} bytes each)",
                          flush=True)
        finally:
            web.stop()
    lean = min(results["lean"])
    other = min(results["aiohttp"])
    print(f"best of {args.rounds}: lean {lean:.3f} ms, aiohttp {other:.3f} ms per fetch: "
          f"lean uses {lean / other:.2f} of aiohttp's CPU")


if __name__ == "__main__":
    main()
