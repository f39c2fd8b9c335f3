"""A broad, polite crawl as users run it: pages/s at the default politeness, with and without dead hosts.

Runs, in one go and one after the other, four crawls of ``scrapy crawl web``
(one worker, the default configuration: the full pipeline, robots.txt, the
shipped settings; only ``ALLOW_PRIVATE_NETWORKS`` is on, for the loopback
mock web), each for ``--seconds`` on a fresh frontier:

1. **delay 0** (``FRONTIER_MIN_DELAY=0 FRONTIER_DELAY_FACTOR=0``): the
   CPU-bound reference;
2. **polite**: the default politeness (1 s minimum delay, 10x the fetch time);
3. **polite, dead hosts**: the same, with a dead twin for every second host
   (half refuse connections, half accept them and never answer);
4. **polite, two workers**: run 2 by two worker processes sharing the
   frontier (on this 2-core machine they share its CPU with Redis and the
   mock web: their pages/s beside one worker's is the figure, not a
   prediction for two machines).

The web (``--hosts``, 5,000 by default) has 10 pages per host (uniform),
5-20 ms of latency and a robots.txt mix: 404 for most hosts, rules for some,
``Crawl-delay: 2`` for some, a 500 (then a 404) for some. Every host is a
seed (dead ones interleaved), so the crawl starts as a broad crawl does:
every host new.

For each run it prints pages/s (answered page requests of live hosts, not
robots.txt), new hosts opened/s (robots.txt requests of live hosts: each
host's first request), the two together, the CPU per page of the workers
(all of it, start-up included; two workers' summed) and of redis-server,
Redis' memory at the end, and the politeness audit from the
mock web's own request log: requests in flight at once to one host
(overlaps), and start-to-start gaps on a host below the delay in force
(``max(FRONTIER_MIN_DELAY, Crawl-delay, FRONTIER_DELAY_FACTOR x the previous
answer's time on the server)``, 2 ms of tolerance). Then the two ratios the
issue names: polite / delay 0 (pages + hosts opened), dead / alive (pages).

``--scale``: the polite crawl with dead hosts at 10,000 and 100,000 hosts,
printing Redis ``used_memory`` at the end, per host known to the frontier,
and redis-server CPU per page; then the frontier alone (its Lua scripts
driven directly, no HTTP): claim + ack cycles of 32 URLs over 1,000 awake
hosts while 0, 10,000 and 100,000 other hosts sleep, with the Redis CPU per
claimed URL and the bytes per awake and per sleeping host.

Usage: ``python benchmarks/polite.py [--seconds 90] [--hosts 5000] [--scale]``.
Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from redis.asyncio import Redis  # noqa: E402

from benchmarks.scratch_redis import scratch_redis  # noqa: E402
from benchmarks.throughput import Services, wait_port  # noqa: E402
from crawler.crawlstate.keys import ShardKeys  # noqa: E402
from crawler.frontier import (  # noqa: E402
    Completion,
    EnqueueEntry,
    FrontierConfig,
    RedisFrontier,
    SeenConfig,
    read_counts,
)
from crawler.urls import bloom_positions, url_fingerprint, url_key  # noqa: E402
from support.bytecode import compile_package  # noqa: E402
from support.mockweb import DelayAudit, LogEntry, WebSpec, delay_audit, free_port, host_ip, read_log, spec_arguments  # noqa: E402

MIN_DELAY = 1.0  # the shipped FRONTIER_MIN_DELAY
DELAY_FACTOR = 10.0  # the shipped FRONTIER_DELAY_FACTOR
CRAWL_DELAY = 2.0
TOLERANCE = 0.002


def robots_scenario(hosts: int) -> dict[str, dict[str, object]]:
    """The robots.txt mix, by host index: most 404 (no entry), some rules, Crawl-delay, a 500 once."""
    robots: dict[str, dict[str, object]] = {}
    for host in range(hosts):
        kind = host % 20
        if kind == 0:
            robots[str(host)] = {"status": 500, "fail_times": 1}
        elif kind == 1:
            robots[str(host)] = {"body": f"User-agent: *\nCrawl-delay: {CRAWL_DELAY:g}\n"}
        elif kind in (2, 3, 4):
            robots[str(host)] = {"body": "User-agent: *\nDisallow: /private/\nAllow: /\n"}
    return robots


class DeadWeb:
    """The mock web, plus dead hosts: silent ones (a listener that never answers) and refusing ones
    (a port nothing listens on), on loopback addresses beyond the live hosts'."""

    LOG_FLUSH = 0.1

    def __init__(self, spec: WebSpec, workdir: Path, name: str) -> None:
        self.spec = spec
        self.port = free_port()
        self.silent_port = free_port()
        self.refused_port = free_port()  # never bound: connections are refused
        self.log = workdir / f"{name}.log"
        prerender = ["--prerender"] if spec.total_pages() <= 250_000 else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "support.mockweb", "--port", str(self.port), "--log", str(self.log),
             "--log-flush", str(self.LOG_FLUSH), "--silent-port", str(self.silent_port), *prerender,
             *spec_arguments(spec)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_port(host_ip(0), self.port, timeout=600)

    def live_url(self, host: int) -> str:
        return f"http://{host_ip(host)}:{self.port}/"

    def dead_url(self, twin: int) -> str:
        """The dead twin number ``twin``: even ones never answer, odd ones refuse."""
        port = self.silent_port if twin % 2 == 0 else self.refused_port
        return f"http://{host_ip(self.spec.hosts + twin)}:{port}/"

    def seeds(self, path: Path, dead: bool) -> Path:
        lines = []
        for host in range(self.spec.hosts):
            lines.append(self.live_url(host))
            if dead and host % 2 == 1:
                lines.append(self.dead_url(host // 2))
        path.write_text("\n".join(lines) + "\n")
        return path

    def entries(self) -> list[LogEntry]:
        time.sleep(3 * self.LOG_FLUSH)
        return read_log(str(self.log)) if self.log.exists() else []

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


@dataclass
class CrawlRun:
    label: str
    pages: int
    hosts_opened: int
    seconds: float
    audit: DelayAudit
    redis_cpu: float
    redis_memory: int
    final_progress: str
    #: CPU seconds of the worker processes, user and system.
    worker_cpu: float = 0.0

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def hosts_per_second(self) -> float:
        return self.hosts_opened / self.seconds if self.seconds else 0.0

    @property
    def requests_per_second(self) -> float:
        return self.pages_per_second + self.hosts_per_second


def crawl(label: str, web: DeadWeb, services: Services, seeds: Path, seconds: int, extra: list[str],
          root: Path = ROOT, workers: int = 1) -> CrawlRun:
    """One crawl with the code of ``root`` (this checkout unless told), by ``workers`` processes sharing
    its frontier (each reads the whole seeds file: the frontier's seen set keeps one of each)."""
    services.empty()
    crawl_id = f"polite-{uuid.uuid4().hex[:8]}"
    command = [
        sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
        "-s", f"REDIS_URL={services.redis_url}", "-s", f"FRONTIER_CRAWL_ID={crawl_id}",
        "-s", f"CLOSESPIDER_TIMEOUT={seconds}", "-s", "LOG_LEVEL=INFO",
        # The mock web is on loopback addresses.
        "-s", "ALLOW_PRIVATE_NETWORKS=True",
        "-s", "USER_AGENT=benchbot/1.0 (+https://example.org/bench)",
        "-s", f"CRAWL_DATA_DIR={services.workdir / 'crawl-data'}",
        *extra,
    ]
    env = dict(os.environ, PYTHONPATH=str(root))
    env.pop("REDIS_URL", None)
    before = len(web.entries())
    redis_before = services.redis_cpu()
    logs = [services.workdir / f"{crawl_id}-{n}.log" for n in range(workers)]
    handles = [open(log, "wb") for log in logs]  # noqa: SIM115 - closed below
    try:
        processes = [subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=handle)
                     for handle in handles]
        codes, worker_cpu = [], 0.0
        for process in processes:
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            codes.append(process.returncode)
            worker_cpu += usage.ru_utime + usage.ru_stime
    finally:
        for handle in handles:
            handle.close()
    stderr = logs[0].read_text(errors="replace")
    for code, log in zip(codes, logs):
        if code != 0:
            raise RuntimeError(f"{label}: crawl failed ({code}):\n{log.read_text(errors='replace')[-3000:]}")
    redis_cpu = services.redis_cpu() - redis_before
    with redis.Redis.from_url(services.redis_url) as client:
        memory = int(client.info("memory")["used_memory"])
    entries = web.entries()[before:]
    live_names = {host_ip(h) for h in range(web.spec.hosts)}
    live = [e for e in entries if e.host in live_names]
    pages = [e for e in live if e.path != "/robots.txt" and e.status]
    opened = {e.host for e in live if e.path == "/robots.txt"}
    seconds_ = (max(e.end for e in live) - min(e.start for e in live)) if live else 0.0
    factor = DELAY_FACTOR if "FRONTIER_DELAY_FACTOR=0" not in extra else 0.0
    min_delay = MIN_DELAY if "FRONTIER_MIN_DELAY=0" not in extra else 0.0
    crawl_delay_hosts = {host_ip(h) for h in range(web.spec.hosts) if h % 20 == 1}
    report = delay_audit(entries, min_delay, factor,
                         lambda host: CRAWL_DELAY if host in crawl_delay_hosts else 0.0, TOLERANCE)
    progress = [line for line in stderr.splitlines() if "Progress:" in line]
    final = progress[-1].split("Progress: ", 1)[-1] if progress else ""
    return CrawlRun(label, len(pages), len(opened), seconds_, report, redis_cpu, memory, final, worker_cpu)


def print_runs(runs: list[CrawlRun]) -> None:
    header = (f"{'run':<28} {'pages':>7} {'pages/s':>8} {'hosts opened/s':>14} {'pages+hosts/s':>13} "
              f"{'worker ms/page':>14} {'redis ms/page':>13} {'redis MB':>8} {'overlaps':>8} {'short gaps':>10} {'gaps checked':>12}")
    print(header)
    print("-" * len(header))
    for run in runs:
        redis_ms = 1000 * run.redis_cpu / run.pages if run.pages else 0.0
        worker_ms = 1000 * run.worker_cpu / run.pages if run.pages else 0.0
        print(f"{run.label:<28} {run.pages:>7} {run.pages_per_second:>8.1f} {run.hosts_per_second:>14.1f} "
              f"{run.requests_per_second:>13.1f} {worker_ms:>14.3f} {redis_ms:>13.3f} {run.redis_memory / 2**20:>8.1f} "
              f"{run.audit.overlaps:>8} {run.audit.short_gaps:>10} {run.audit.checked:>12}")


def web_spec(hosts: int, workdir: Path) -> WebSpec:
    scenario = workdir / f"robots-{hosts}.json"
    scenario.write_text(json.dumps({"robots": robots_scenario(hosts)}))
    return WebSpec(hosts=hosts, sizes="uniform:10", fanout=3, nav=2, cross=2, latency_ms=(5.0, 10.0, 15.0, 20.0),
                   filler_words=600, scenario=str(scenario))


POLITE: list[str] = []
DELAY_ZERO = ["-s", "FRONTIER_MIN_DELAY=0", "-s", "FRONTIER_DELAY_FACTOR=0"]


def polite_crawls(hosts: int, seconds: int, services: Services, workdir: Path, extra: list[str]) -> list[CrawlRun]:
    spec = web_spec(hosts, workdir)
    print(f"web: {hosts} hosts of 10 pages, 5-20 ms latency; dead twins: {hosts // 2} "
          f"(half silent, half refusing); {seconds} s per crawl", flush=True)
    web = DeadWeb(spec, workdir, f"web-{hosts}")
    runs: list[CrawlRun] = []
    try:
        alive = web.seeds(workdir / f"seeds-{hosts}.txt", dead=False)
        dead = web.seeds(workdir / f"seeds-{hosts}-dead.txt", dead=True)
        for label, seeds, settings, workers in (
                ("delay 0 (reference)", alive, DELAY_ZERO, 1), ("polite (defaults)", alive, POLITE, 1),
                ("polite, half dead", dead, POLITE, 1), ("polite (defaults), 2 workers", alive, POLITE, 2)):
            run = crawl(label, web, services, seeds, seconds, [*settings, *extra], workers=workers)
            runs.append(run)
            print_runs([run])
            print(f"  final progress: {run.final_progress}", flush=True)
    finally:
        web.stop()
    return runs


# -- --scale: the frontier alone, with many sleeping hosts ---------------------------------------

SEEN = SeenConfig.sized(2_000_000, 0.01)


def _entry(url: str, host: str) -> EnqueueEntry:
    fingerprint = url_fingerprint(url)
    positions = bloom_positions(fingerprint, SEEN.bloom_bits, SEEN.bloom_hashes)
    return EnqueueEntry(url_key(fingerprint), positions, host, host, 1, 0, url.encode())


async def _open_hosts(frontier: RedisFrontier, client: Redis, prefix: str, hosts: int, wait_ms: int,
                      now: int) -> None:
    """Enqueue 2 URLs for each of ``hosts`` new hosts, open them all, fetch one URL of each and
    acknowledge it with a next allowed time ``wait_ms`` away: awake hosts (ready later) below the
    sleep horizon, sleeping hosts beyond it. Each keeps one queued URL."""
    batch: list[EnqueueEntry] = []
    for host in range(hosts):
        name = f"{prefix}{host}.test"
        batch += [_entry(f"http://{name}/{i}", name) for i in range(2)]
        if len(batch) >= 10_000:
            await frontier.enqueue(batch)
            batch = []
    if batch:
        await frontier.enqueue(batch)
    while True:
        claim = await frontier.claim(now, 2000)
        if not claim.claimed:
            return
        await frontier.ack([Completion(lease.member, now + wait_ms, now) for lease, _ in claim.claimed])


async def frontier_with_sleepers(port: int, sleepers: int, cycles: int) -> tuple[float, float, float, int]:
    """Redis CPU (ms) per claimed URL over ``cycles`` claim + ack cycles of 32 URLs among 1,000 awake
    hosts of 100 URLs while ``sleepers`` other hosts sleep; Redis bytes per awake host and per
    sleeping host (each with one queued URL; the seen set's entries of its two URLs included)."""
    client = Redis(port=port)
    await client.flushall()
    config = FrontierConfig(
        crawl_id="scale", min_delay=0.0, delay_factor=0.0, max_delay=300.0, queue_weights=(8, 4, 2, 1),
        active_hosts=1_000_000, lease_timeout=60.0, idle_poll=1.0, refill_batch=1000, enqueue_batch=500,
        local_seen_size=0, concurrency=32,
    )
    frontier = RedisFrontier(client, ShardKeys("scale"), config, seen=SEEN)
    await frontier.prepare()
    now = 1_700_000_000_000

    async def memory() -> int:
        return int((await client.info("memory"))["used_memory"])

    base = await memory()
    await _open_hosts(frontier, client, "w", 10_000, 10_000, now)  # awake: ready 10 s later
    per_awake = (await memory() - base) / 10_000
    await client.flushall()
    await frontier.prepare()
    base = await memory()
    await _open_hosts(frontier, client, "s", sleepers, 3_600_000, now)  # asleep for an hour
    asleep = (await read_counts(client, frontier.keys)).sleeping
    per_sleeping = (await memory() - base) / asleep if asleep else 0.0
    batch = []
    for host in range(1000):
        name = f"a{host}.test"
        batch += [_entry(f"http://{name}/{i}", name) for i in range(100)]
    for start in range(0, len(batch), 10_000):
        await frontier.enqueue(batch[start:start + 10_000])
    opened = await frontier.claim(now, 1000)
    await frontier.ack([Completion(lease.member, now, now) for lease, _ in opened.claimed])
    info = await client.info("cpu")
    cpu_before = float(info["used_cpu_sys"]) + float(info["used_cpu_user"])
    claimed = 0
    for cycle in range(cycles):
        t = now + 1 + cycle
        claim = await frontier.claim(t, 32)
        claimed += len(claim.claimed)
        await frontier.ack([Completion(lease.member, t, t) for lease, _ in claim.claimed])
    info = await client.info("cpu")
    cpu = float(info["used_cpu_sys"]) + float(info["used_cpu_user"]) - cpu_before
    await client.aclose()
    return 1000 * cpu / max(claimed, 1), per_awake, per_sleeping, asleep


def scale_frontier() -> None:
    print("frontier alone: 1,000 awake hosts, claim + ack of 32 URLs, 2,000 cycles, as more hosts sleep", flush=True)
    print(f"{'sleeping hosts':>14} {'redis ms per claimed URL':>24} {'bytes per awake host':>20} "
          f"{'bytes per sleeping host':>23}")
    with scratch_redis() as (_, port):
        for sleepers in (0, 10_000, 100_000):
            ms, awake, asleep, count = asyncio.run(frontier_with_sleepers(port, sleepers, 2000))
            print(f"{count:>14,} {ms:>24.4f} {awake:>20.0f} {asleep:>23.0f}", flush=True)
    print("(bytes per host: everything the frontier keeps for a host with one queued URL, the seen set's "
          "entries of its two URLs included)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=90, help="crawl time of each run")
    parser.add_argument("--hosts", type=int, default=5000)
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting for every run (exploration: the headline figures are the defaults')")
    parser.add_argument("--scale", action="store_true",
                        help="the polite crawl with dead hosts at 10,000 and 100,000 hosts, and the frontier alone")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="crawler-polite-"))
    compile_package(ROOT)  # as installed: no worker compiles the crawler at its start
    services = Services(workdir)
    try:
        if args.scale:
            runs = []
            for hosts in (10_000, 100_000):
                spec = web_spec(hosts, workdir)
                print(f"web: {hosts} hosts, dead twins {hosts // 2}", flush=True)
                web = DeadWeb(spec, workdir, f"scale-{hosts}")
                try:
                    seeds = web.seeds(workdir / f"scale-{hosts}.txt", dead=True)
                    run = crawl(f"polite, half dead, {hosts // 1000}k", web, services, seeds, args.seconds, POLITE)
                finally:
                    web.stop()
                runs.append(run)
                print_runs([run])
                known = re.search(r"hosts ([\d,]+) active / [\d,]+ ready / ([\d,]+) sleeping", run.final_progress)
                if known:
                    total = int(known.group(1).replace(",", "")) + int(known.group(2).replace(",", ""))
                    print(f"  final progress: {run.final_progress}")
                    print(f"  Redis used_memory {run.redis_memory / 2**20:.1f} MB for {total:,} hosts holding a "
                          f"back queue", flush=True)
            print()
            print_runs(runs)
            print()
            scale_frontier()
            return
        extra = [part for setting in args.set for part in ("-s", setting)]
        runs = polite_crawls(args.hosts, args.seconds, services, workdir, extra)
    finally:
        services.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    reference, polite, dead, two = runs
    print()
    print(f"Crawl time per run: {args.seconds} s; {args.hosts} hosts; machine: {os.cpu_count()} CPUs; "
          f"the shipped settings (CONCURRENT_REQUESTS and all) but the delays of the reference"
          + (f"; with {' '.join(args.set)}" if args.set else ""))
    print_runs(runs)
    print()
    print(f"polite / delay 0 = {polite.requests_per_second / reference.pages_per_second:.2f} "
          f"(pages + hosts opened per s, {polite.requests_per_second:.1f}, over the reference's pages/s, "
          f"{reference.pages_per_second:.1f}); pages alone {polite.pages_per_second / reference.pages_per_second:.2f}")
    print(f"half dead / all alive = {dead.pages_per_second / polite.pages_per_second:.2f} (pages/s)")
    print(f"two workers / one = {two.pages_per_second / polite.pages_per_second:.2f} (pages/s, polite)")
    violations = sum(r.audit.overlaps + r.audit.short_gaps for r in runs[1:])
    print(f"politeness violations in the polite runs: {violations}")


if __name__ == "__main__":
    main()
