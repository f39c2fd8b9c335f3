"""Scale: workers sharing one frontier, claim cost as hosts and queued URLs grow, memory per queued URL.

Runs, in one invocation:

1. **Workers**: pages/s of 1, 2 and 4 ``scrapy crawl web`` processes sharing
   one frontier on the mock web (2,000 hosts, Zipf sizes, delays 0), a fixed
   crawl time each. On a 2-core machine the workers, the mock web and Redis
   share two cores: the ratios say how the crawler scales when CPU is the
   limit, not how it scales on a fleet.
2. **Hosts**: pages/s of one worker as the mock web grows from 100 (of 200
   pages each) to 10,000 to 100,000 hosts (of 20 pages each); 1,000 seed hosts
   at most, the rest found through links.
3. **Claim/ack in Redis**: the frontier's scripts driven directly (no Scrapy,
   no HTTP): a 32-URL claim, then the ack of those URLs, again and again, on
   frontiers of 100 hosts x 1,000 URLs, 10,000 hosts x 10 URLs and 100,000
   hosts x 10 URLs (100,000 to 1,000,000 queued URLs), for a fixed time or
   until half the URLs are claimed. Reports claims + acks per second and
   redis-server CPU per claim+ack: a scan of hosts or URLs anywhere would show
   as a cost growing with the size.
4. **Memory**: Redis ``used_memory`` per queued URL with 1,000,000 URLs queued
   (the 100,000-host frontier of part 3: requests, queues, seen set, budgets,
   in-link sketch; everything the crawl keeps per URL), against scrapy-redis
   storing the same 1,000,000 requests its way (pickled request dicts in its
   priority ZSET, SHA-1 hex fingerprints in its dupefilter SET), measured in
   the same run on a second, empty redis-server.

Usage: ``python benchmarks/scale.py [--seconds 30] [--skip-crawls]``.
Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import redis  # noqa: E402
from redis.asyncio import Redis  # noqa: E402
from scrapy.settings import Settings  # noqa: E402

from benchmarks.scratch_redis import scratch_redis  # noqa: E402
from benchmarks.throughput import (  # noqa: E402
    CONCURRENCY,
    CRAWL_ONLY,
    DELAY_0,
    RunResult,
    Services,
    Web,
    crawler_command,
    measure,
    print_table,
)
from crawler.crawlstate.keys import ShardKeys  # noqa: E402
from crawler.frontier import (  # noqa: E402
    Completion,
    FrontierConfig,
    RedisFrontier,
    RequestCodec,
    SeenConfig,
    Step,
)
from crawler.urls import url_fingerprint  # noqa: E402
from support.mockweb import WebSpec, host_ip  # noqa: E402

#: As the embedded server runs: intsets for the exact seen store (both sides of the comparison get it).
EMBEDDED_LIKE = ("--set-max-intset-entries", "4096")

#: (hosts, queued URLs per host) of the claim/ack runs.
FRONTIER_SIZES = ((100, 1000), (10_000, 10), (100_000, 10))
#: How the frontier's scaling is measured: delays 0, the crawl path only, CONCURRENCY slots
#: (throughput.py's crawler_command runs the shipped configuration otherwise).
SCALE_RUN = (*DELAY_0, *CRAWL_ONLY, "-s", f"CONCURRENT_REQUESTS={CONCURRENCY}")
CLAIM = 32


def used_memory(port: int) -> int:
    return int(redis.Redis(port=port).info("memory")["used_memory"])


# -- part 1 and 2: crawls ---------------------------------------------------------------


def crawl_runs(workdir: Path, seconds: int) -> list[str]:
    services = Services(workdir)
    lines: list[str] = []
    results: list[RunResult] = []
    try:
        spec = WebSpec(hosts=2000, sizes="zipf:5000:1.0", fanout=10, nav=20, cross=10, filler_words=600)
        web = Web(spec, workdir / "workers.log")
        try:
            seeds = web.seeds(workdir / "workers-seeds.txt")
            by_workers: dict[int, RunResult] = {}
            for workers in (1, 2, 4):
                crawl_id = f"scale-{uuid.uuid4().hex[:8]}"
                result = measure(f"2,000 hosts, {workers} worker{'s' if workers > 1 else ''}", web, services,
                                 [(crawler_command(seeds, services, crawl_id, seconds, SCALE_RUN), ROOT)] * workers, seconds)
                by_workers[workers] = result
                results.append(result)
                print_table([result])
            for workers in (2, 4):
                lines.append(f"{workers} workers / 1 worker = "
                             f"{by_workers[workers].pages_per_second / by_workers[1].pages_per_second:.2f}x pages/s")
        finally:
            web.stop()
        for hosts in (100, 10_000, 100_000):
            spec = WebSpec(hosts=hosts, sizes="uniform:200" if hosts < 1000 else "uniform:20", fanout=10, nav=20, cross=10, filler_words=600)
            web = Web(spec, workdir / f"hosts-{hosts}.log")
            try:
                seeds = workdir / f"hosts-{hosts}-seeds.txt"
                chosen = sorted(random.Random(hosts).sample(range(hosts), min(hosts, 1000)))
                seeds.write_text("".join(f"http://{host_ip(h)}:{web.port}/\n" for h in chosen))
                crawl_id = f"scale-{uuid.uuid4().hex[:8]}"
                result = measure(f"{hosts:,} hosts, 1 worker", web, services,
                                 [(crawler_command(seeds, services, crawl_id, seconds, SCALE_RUN), ROOT)], seconds)
                results.append(result)
                print_table([result])
            finally:
                web.stop()
    finally:
        services.stop()
    print()
    print(f"Crawl time per run: {seconds} s; CONCURRENT_REQUESTS={CONCURRENCY}; delays 0; "
          f"machine: {os.cpu_count()} CPUs")
    print_table(results)
    return lines


# -- part 3 and 4: the frontier in Redis ----------------------------------------------


def frontier_config(crawl_id: str) -> FrontierConfig:
    return FrontierConfig.from_settings(
        Settings({"FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0, "CONCURRENT_REQUESTS": CLAIM}), crawl_id
    )


async def fill(frontier: RedisFrontier, hosts: int, per_host: int) -> float:
    """Queue ``per_host`` URLs on each of ``hosts`` hosts; returns seconds taken."""
    from scrapy import Spider

    codec = RequestCodec(Spider("web"))
    started = time.perf_counter()
    batch = []
    for page in range(per_host):
        for host in range(hosts):
            name = f"h{host}.example{host % 997}.test"
            url = f"http://{name}/page/{page}?ref=bench"
            # A link as the spider stores it (callback by name, depth in meta).
            blob = codec.encode_link(url, None, {"depth": 1})
            batch.append(frontier.entry(url_fingerprint(url), name, f"example{host % 997}.test", 1, blob))
            if len(batch) >= 2000:
                await frontier.enqueue(batch)
                batch = []
    if batch:
        await frontier.enqueue(batch)
    return time.perf_counter() - started


async def claim_ack(
    frontier: RedisFrontier, seconds: float, server: psutil.Process, limit: int
) -> tuple[float, float]:
    """Claim 32, ack them, repeat (at most ``limit`` claims); returns (claims + acks per second,
    redis CPU us per claim+ack)."""
    completions: list[Completion] = []
    operations = 0
    cpu_before = sum(server.cpu_times()[:2])
    started = time.perf_counter()
    while time.perf_counter() - started < seconds and operations < 2 * limit:
        now_ms = int(time.time() * 1000)
        result = await frontier.step(Step(completions=completions, claim=CLAIM, now_ms=now_ms))
        operations += result.acked
        assert result.claim is not None
        claimed = result.claim.claimed
        operations += len(claimed)
        completions = [Completion(lease.member, now_ms, now_ms) for lease, _ in claimed]
    elapsed = time.perf_counter() - started
    cpu = sum(server.cpu_times()[:2]) - cpu_before
    return operations / elapsed, 1e6 * cpu / max(operations / 2, 1)


async def frontier_runs(seconds: float) -> tuple[list[str], int]:
    with scratch_redis(*EMBEDDED_LIKE) as (process, port):
        return await _frontier_runs(process, port, seconds)


async def _frontier_runs(process: subprocess.Popen[bytes], port: int, seconds: float) -> tuple[list[str], int]:
    server = psutil.Process(process.pid)
    lines = []
    client = Redis(port=port)
    queued_bytes = 0
    try:
        for hosts, per_host in FRONTIER_SIZES:
            crawl_id = f"scale-{hosts}"
            config = frontier_config(crawl_id)
            queued = hosts * per_host
            seen = SeenConfig.sized(max(queued, 1000), 0.01)
            frontier = RedisFrontier(client, ShardKeys(crawl_id), config, seen=seen)
            before = used_memory(port)
            await frontier.prepare()
            took = await fill(frontier, hosts, per_host)
            memory = used_memory(port) - before
            if queued == 1_000_000:
                queued_bytes = memory
            rate, redis_us = await claim_ack(frontier, seconds, server, queued // 2)
            lines.append(
                f"{hosts:>7,} hosts, {queued:>9,} queued URLs: {rate:>8,.0f} claims+acks/s, "
                f"redis-server {redis_us:5.1f} us CPU per claim+ack; filled in {took:.0f} s, "
                f"{memory / queued:.1f} bytes/queued URL"
            )
            print(lines[-1], flush=True)
            await frontier.close()
    finally:
        await client.aclose()
    return lines, queued_bytes


def scrapy_redis_bytes(count: int) -> int:
    """Redis memory of ``count`` requests stored by scrapy-redis (its own encoding and fingerprints)."""
    from scrapy import Request, Spider
    from scrapy_redis.dupefilter import RFPDupeFilter
    from scrapy_redis.queue import PriorityQueue

    with scratch_redis(*EMBEDDED_LIKE) as (_, port):
        server = redis.Redis(port=port)

        class Web(Spider):
            name = "web"

            def parse(self, response):  # type: ignore[no-untyped-def]
                return None

        spider = Web()
        queue = PriorityQueue(server, spider, "web:requests")
        dupefilter = RFPDupeFilter(server, "web:dupefilter")
        before = used_memory(port)
        pipe = server.pipeline(transaction=False)
        index = 0
        for page in range(10):
            for host in range(count // 10):
                request = Request(f"http://h{host}.example{host % 997}.test/page/{page}?ref=bench",
                                  callback=spider.parse, meta={"depth": 1})
                pipe.zadd(queue.key, {queue._encode_request(request): -request.priority})
                pipe.sadd(dupefilter.key, dupefilter.request_fingerprint(request))
                index += 1
                if index % 5000 == 0:
                    pipe.execute()
        pipe.execute()
        return used_memory(port) - before


def main() -> None:
    parser = argparse.ArgumentParser(description="scaling of the shared frontier")
    parser.add_argument("--seconds", type=int, default=30, help="crawl time of each crawl run")
    parser.add_argument("--claim-seconds", type=float, default=10.0, help="time of each claim/ack run")
    parser.add_argument("--skip-crawls", action="store_true", help="only the Redis parts (3 and 4)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="crawler-scale-"))
    summary: list[str] = []
    try:
        if not args.skip_crawls:
            summary += crawl_runs(workdir, args.seconds)
        print()
        frontier_lines, ours = asyncio.run(frontier_runs(args.claim_seconds))
        summary += frontier_lines
        theirs = scrapy_redis_bytes(1_000_000)
        summary.append(
            f"memory at 1,000,000 queued URLs: crawler {ours / 1e6:.1f} bytes/URL, "
            f"scrapy-redis {theirs / 1e6:.1f} bytes/URL -> {ours / theirs:.2f} of scrapy-redis's bytes"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
