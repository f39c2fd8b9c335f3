"""The URL-seen set: memory per URL, and candidate URLs checked per second per process.

1. Memory: inserts N URLs (default 1,000,000) through the frontier's enqueue
   script into a seen set sized for N at 1% false positives, then reads
   ``MEMORY USAGE`` of the Bloom bitmap and of every exact-store set, and
   prints bytes per URL for each (target: exact store <= 16 bytes per URL).
2. Throughput: one process checks batches of 50 candidate links per "page"
   (about 20% new, the rest repeats of earlier links), each through the same
   code as the crawler's bulk link path (normalization and filters,
   fingerprint, Bloom positions, codec) and one pipelined round trip per page,
   the next page being processed while the previous round trip is in flight
   (as the crawler's pump does); prints candidates per second (target:
   >= 20,000) with the in-process pre-filter off, so every candidate reaches
   Redis.

Usage: ``python benchmarks/seen.py [--urls 1000000] [--pages 4000]``.
It starts its own redis-server on a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from redis.asyncio import Redis  # noqa: E402
from scrapy import Spider  # noqa: E402

from benchmarks.scratch_redis import scratch_redis  # noqa: E402
from crawler.crawlstate.keys import ShardKeys  # noqa: E402
from crawler.frontier import (  # noqa: E402
    EnqueueEntry,
    FrontierConfig,
    RedisFrontier,
    RequestCodec,
    SeenConfig,
    Step,
    StepResult,
)
from crawler.urls import url_fingerprint  # noqa: E402
from crawler.urls.domains import RegisteredDomains  # noqa: E402
from crawler.urls.filters import Dropped, FilterConfig, UrlFilter  # noqa: E402


class _Spider(Spider):
    name = "bench"

    def parse(self, response):  # type: ignore[no-untyped-def]
        return None


def config(crawl_id: str) -> FrontierConfig:
    return FrontierConfig(
        crawl_id=crawl_id, min_delay=0, delay_factor=0, max_delay=0, queue_weights=(8, 4, 2, 1),
        active_hosts=1000, lease_timeout=60, idle_poll=1, refill_batch=1000, enqueue_batch=500,
        local_seen_size=0, concurrency=32,
    )


async def memory(client: Redis, urls: int) -> None:
    seen = SeenConfig.sized(urls, 0.01)
    frontier = RedisFrontier(client, ShardKeys("seen-memory"), config("seen-memory"), seen=seen)
    await frontier.prepare()
    started = time.perf_counter()
    batch: list[EnqueueEntry] = []
    for i in range(urls):
        url = f"http://host{i % 5000}.example.com/path/{i}/page.html"
        host = f"host{i % 5000}.example.com"
        batch.append(frontier.entry(url_fingerprint(url), host, "example.com", 1, b"x"))
        if len(batch) == 2000:
            await frontier.enqueue(batch)
            batch = []
    if batch:
        await frontier.enqueue(batch)
    elapsed = time.perf_counter() - started
    bloom = int(await client.memory_usage(frontier.keys.bloom, samples=0) or 0)
    exact = 0
    sets = 0
    encodings: dict[bytes, int] = {}
    async for key in client.scan_iter(match=frontier.keys.seen_exact(0)[:-1] + "*", count=1000):
        sets += 1
        exact += int(await client.memory_usage(key, samples=0) or 0)
        encoding = await client.object("encoding", key)
        encodings[encoding] = encodings.get(encoding, 0) + 1
    print(f"seen set, {urls:,} URLs ({elapsed:.1f} s to insert through the enqueue script):")
    print(f"  Bloom filter: {seen.bloom_bits:,} bits, {seen.bloom_hashes} hashes, "
          f"{bloom:,} bytes = {bloom / urls:.2f} bytes/URL ({8 * bloom / urls:.1f} bits/URL)")
    print(f"  exact store: {sets:,} sets ({encodings}), {exact:,} bytes = {exact / urls:.2f} bytes/URL")


async def throughput(
    client: Redis, pages: int, links_per_page: int, new_share: float, server: psutil.Process
) -> None:
    seen = SeenConfig.sized(10_000_000, 0.01)
    frontier = RedisFrontier(client, ShardKeys("seen-throughput"), config("seen-throughput"), seen=seen)
    await frontier.prepare()
    url_filter = UrlFilter(FilterConfig())
    domains = RegisteredDomains()
    codec = RequestCodec(_Spider())
    rng = random.Random(7)
    known: list[str] = []
    serial = 0
    pages_links = []
    for _ in range(pages):
        links = []
        for _ in range(links_per_page):
            if known and rng.random() > new_share:
                links.append(rng.choice(known))
            else:
                serial += 1
                url = f"http://www.site{serial % 2000}.example.com/section/{serial}/article.html?utm_source=x&id={serial}"
                known.append(url)
                links.append(url)
        pages_links.append(links)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    server0 = sum(server.cpu_times()[:2])
    added = duplicates = 0
    # One round trip in flight while the next page is processed, as in a
    # crawler, where the engine parses pages while the pump waits on Redis.
    in_flight: Coroutine[Any, Any, StepResult] | None = None
    for links in pages_links:
        entries = []
        for url in links:
            try:
                normalized, host = url_filter.check(url, 1)
            except Dropped:
                continue
            fingerprint = url_fingerprint(normalized)
            blob = codec.encode_link(normalized, host, "parse", {"depth": 1})
            entries.append(frontier.entry(fingerprint, host, domains(host), 1, blob))
        if in_flight is not None:
            result = await in_flight
            added += result.added
            duplicates += result.duplicates
        in_flight = await frontier.begin_step(Step(enqueues=entries, now_ms=0))
    if in_flight is not None:
        result = await in_flight
        added += result.added
        duplicates += result.duplicates
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    server_cpu = sum(server.cpu_times()[:2]) - server0
    candidates = pages * links_per_page
    print(f"throughput: {pages:,} pages x {links_per_page} links = {candidates:,} candidates "
          f"({added:,} new, {duplicates:,} already seen), one round trip per page")
    print(f"  {candidates / wall:,.0f} candidates/s wall, {candidates / cpu:,.0f} per CPU-second of this process "
          f"({1e6 * cpu / candidates:.1f} us CPU per candidate; redis-server {1e6 * server_cpu / candidates:.1f} us)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=1_000_000)
    parser.add_argument("--pages", type=int, default=4000)
    args = parser.parse_args()
    with scratch_redis() as (server, port):
        client = Redis(host="127.0.0.1", port=port)
        await memory(client, args.urls)
        await throughput(client, args.pages, 50, 0.2, psutil.Process(server.pid))
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
