"""Throughput of the crawler against plain Scrapy, side by side, on the mock web.

Runs, in one invocation, for a fixed crawl time each, with politeness delays
at zero (FRONTIER_MIN_DELAY = 0, FRONTIER_DELAY_FACTOR = 0):

* web (a): 2,000 hosts with Zipf-skewed sizes; web (b): 2,000 hosts of equal size;
* on each: ``scrapy crawl web`` (one worker, robots.txt, frontier and seen set
  on: every host's robots.txt is fetched and checked) and plain Scrapy's follow-all
  spider (``DownloaderAwarePriorityQueue``, ``CONCURRENT_REQUESTS_PER_DOMAIN = 1``);
* on a Zipf web with twice web (a)'s pages: two crawler workers sharing one
  frontier, against one (pages/s over the crawl and in the steady window),
  and the ceiling the machine's cores allow two workers;
* on web (a): one worker with the storage pipelines on (WARC files, exact and
  SimHash dedup, URL metadata, text module), for the cost of storage.

The comparison runs measure the crawl path the issue names: robots.txt,
frontier and seen set on, storage pipelines off.

For each run it prints pages/s, CPU seconds per page of the crawling process
(all of its CPU, start-up and the end-of-crawl report included, over all its
pages; and "steady": CPU and pages within a window inside the crawl, from a
third of the crawl time to 90% of it, which is what a page costs in a long
crawl), CPU per page of redis-server, peak RSS, and politeness violations counted
from the mock web's request log (overlapping requests to one host; gaps below
the configured delay, which is 0 here, so only overlaps can occur).

Everything runs on this machine's cores: the workers, redis-server (each run
starts on an emptied server, append-only file on) and the mock web (every
page rendered before it listens, its log written in batches), so the CPU of
redis-server and of the mock web is printed too.

Usage: ``python benchmarks/throughput.py [--seconds 30] [--hosts 2000] [--compare-clients]
[--workers-only] [--pairs N]`` (``make bench``). Not a test: numbers depend on the machine and
its load. ``--pairs N`` runs the one-worker / two-workers pair N times, alternated, and prints
each ratio and their median: one pair moves by about +-5% from run to run on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
import redis  # noqa: E402

from support.mockweb import LogEntry, WebSpec, free_port, host_ip, politeness, read_log, spec_arguments  # noqa: E402

CONCURRENCY = 32


@dataclass
class RunResult:
    label: str
    pages: int
    seconds: float
    cpu: float
    redis_cpu: float
    peak_rss_mb: float
    overlaps: int
    short_gaps: int
    #: CPU seconds and pages fetched in a window well inside the crawl
    #: (start-up and shutdown excluded): the marginal cost of a page.
    steady_cpu: float = 0.0
    steady_pages: int = 0
    steady_seconds: float = 0.0
    #: CPU seconds of the mock web's server process during the run.
    web_cpu: float = 0.0

    @property
    def pages_per_second(self) -> float:
        return self.pages / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu / self.pages if self.pages else float("inf")

    @property
    def redis_ms_per_page(self) -> float:
        return 1000 * self.redis_cpu / self.pages if self.pages else 0.0

    @property
    def web_ms_per_page(self) -> float:
        return 1000 * self.web_cpu / self.pages if self.pages else 0.0

    @property
    def steady_pages_per_second(self) -> float:
        return self.steady_pages / self.steady_seconds if self.steady_seconds else 0.0

    @property
    def steady_ms_per_page(self) -> float:
        return 1000 * self.steady_cpu / self.steady_pages if self.steady_pages else float("nan")

    @property
    def pages_per_cpu_second(self) -> float:
        return self.pages / self.cpu if self.cpu else 0.0


def wait_port(host: str, port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"{host}:{port} does not answer")


class Services:
    """The frontier's redis-server, shared by the runs and emptied before each.

    The append-only file is on, as in a crawl (every write pays for it), but
    not its automatic rewrite: a rewrite forks a child that copies the whole
    data set, and it would fall in whichever run first crossed 64 MB of log,
    not in proportion to the pages of each run.
    """

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.redis_port = free_port()
        self.redis = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
             "--dir", str(workdir), "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
             "--auto-aof-rewrite-percentage", "0", "--logfile", str(workdir / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_port("127.0.0.1", self.redis_port)

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def redis_cpu(self) -> float:
        return process_cpu(self.redis.pid)

    def empty(self) -> None:
        """Forget the previous runs' data: each run starts from an empty frontier."""
        with redis.Redis(port=self.redis_port, socket_timeout=60) as client:
            client.flushall()

    def stop(self) -> None:
        self.redis.send_signal(signal.SIGTERM)
        self.redis.wait(timeout=30)


class Web:
    """The mock web in its own process, standing in for servers on other machines.

    Its CPU is on this machine's cores too, so it is made cheap: every page
    is rendered before it listens (``--prerender``: serving then costs no
    rendering; up to PRERENDER_MAX_PAGES) and its request log is written in
    batches (``--log-flush``).
    """

    #: Seconds between a request's log line and its flush (read_log waits this long).
    LOG_FLUSH = 0.1
    #: Larger webs render on demand (scale.py's 100,000 hosts: 2 million pages).
    PRERENDER_MAX_PAGES = 250_000

    def __init__(self, spec: WebSpec, log: Path) -> None:
        self.spec = spec
        self.port = free_port()
        self.log = log
        prerender = ["--prerender"] if spec.total_pages() <= self.PRERENDER_MAX_PAGES else []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "support.mockweb", "--port", str(self.port), "--log", str(log),
             "--log-flush", str(self.LOG_FLUSH), *prerender, *spec_arguments(spec)],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        wait_port(host_ip(0), self.port, timeout=300)

    def entries(self) -> list[LogEntry]:
        """The request log so far (every line written is flushed by now)."""
        time.sleep(3 * self.LOG_FLUSH)
        return read_log(str(self.log)) if self.log.exists() else []

    def seeds(self, path: Path) -> Path:
        path.write_text("".join(f"http://{host_ip(h)}:{self.port}/\n" for h in range(self.spec.hosts)))
        return path

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)


def process_cpu(pid: int) -> float:
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)


@dataclass
class ProcessRun:
    cpu: float  # total CPU seconds of the processes
    rss: float  # max peak RSS in MB
    window: tuple[float, float]  # wall-clock (time.time()) bounds of the steady window
    window_cpu: float  # CPU seconds of the processes within it


def run_processes(commands: list[tuple[list[str], Path]], env: dict[str, str], seconds: int) -> ProcessRun:
    """Run commands at once; total CPU and peak RSS, and CPU within a steady window.

    The window starts once start-up is well over (4 s + a third of the crawl
    time) and ends before the crawl stops (4 s + 90% of it): what a page costs
    in a long crawl, without the fixed cost of imports, start-up and the
    end-of-crawl report.
    """
    started = time.time()
    processes = [
        subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for command, cwd in commands
    ]
    marks: list[tuple[float, float]] = []
    for offset in (4 + seconds / 3, 4 + 0.9 * seconds):
        time.sleep(max(0.0, started + offset - time.time()))
        marks.append((time.time(), sum(process_cpu(process.pid) for process in processes)))
    cpu = 0.0
    rss = 0.0
    for process in processes:
        # wait4 gives the resource usage of the process itself.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        assert process.stderr is not None
        err = process.stderr.read().decode(errors="replace")
        if process.returncode != 0:
            raise RuntimeError(f"{commands[0][0][:4]} failed ({process.returncode}):\n{err[-3000:]}")
        cpu += usage.ru_utime + usage.ru_stime
        rss = max(rss, usage.ru_maxrss / 1024)
    return ProcessRun(cpu, rss, (marks[0][0], marks[1][0]), marks[1][1] - marks[0][1])


def measure(label: str, web: Web, services: Services, commands: list[tuple[list[str], Path]],
            seconds: int) -> RunResult:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("REDIS_URL", None)
    before = len(web.entries())
    services.empty()
    redis_before = services.redis_cpu()
    web_before = process_cpu(web.process.pid)
    run = run_processes(commands, env, seconds)
    redis_cpu = services.redis_cpu() - redis_before
    web_cpu = process_cpu(web.process.pid) - web_before
    entries = web.entries()[before:]
    seconds_ = max(e.end for e in entries) - min(e.start for e in entries) if entries else 0.0
    report = politeness(entries, min_gap=0.0)
    low, high = run.window
    steady_pages = sum(1 for e in entries if low <= e.end < high)
    return RunResult(label, len(entries), seconds_, run.cpu, redis_cpu, run.rss, report.overlaps, report.short_gaps,
                     run.window_cpu, steady_pages, high - low, web_cpu)


#: The crawl path only (robots.txt, frontier, seen set): no storage stages, no
#: text module (a breakdown row). The add-on merges its pipelines into
#: ITEM_PIPELINES, so they are turned off by their own settings.
CRAWL_ONLY = [
    "-s", "WARC_ENABLED=False", "-s", "DEDUP_ENABLED=False", "-s", "METADATA_ENABLED=False",
    "-s", "RECRAWL_ENABLED=False", "-s", "INDEX_GATE_ENABLED=False",
    "-s", 'WEB_PAGE_MODULES={"crawler.modules.links.LinksModule": 100}',
]


def crawler_command(
    seeds: Path, services: Services, crawl_id: str, seconds: int, full: bool = False, extra: tuple[str, ...] = ()
) -> list[str]:
    return [
        sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
        "-s", f"REDIS_URL={services.redis_url}", "-s", f"FRONTIER_CRAWL_ID={crawl_id}",
        "-s", "FRONTIER_MIN_DELAY=0", "-s", "FRONTIER_DELAY_FACTOR=0",
        "-s", f"CONCURRENT_REQUESTS={CONCURRENCY}", "-s", f"CLOSESPIDER_TIMEOUT={seconds}",
        "-s", "LOG_LEVEL=INFO",
        # The mock web is on loopback addresses; robots.txt stays on (404 here).
        "-s", "ALLOW_PRIVATE_NETWORKS=True",
        # A real identity, as a production crawl has (the placeholder adds a check).
        "-s", "USER_AGENT=benchbot/1.0 (+https://example.org/bench)",
        "-s", f"CRAWL_DATA_DIR={services.workdir / 'crawl-data'}",
        "-s", "SEEN_EXPECTED_URLS=1000000",
        *([] if full else CRAWL_ONLY),
        *extra,
    ]


def plain_command(seeds: Path, seconds: int) -> list[str]:
    return [
        sys.executable, "-m", "scrapy", "runspider", str(ROOT / "benchmarks" / "plain_followall.py"),
        "-a", f"seeds={seeds}",
        "-s", "SCHEDULER_PRIORITY_QUEUE=scrapy.pqueues.DownloaderAwarePriorityQueue",
        "-s", "CONCURRENT_REQUESTS_PER_DOMAIN=1", "-s", f"CONCURRENT_REQUESTS={CONCURRENCY}",
        "-s", f"CLOSESPIDER_TIMEOUT={seconds}", "-s", "LOG_LEVEL=INFO", "-s", "TELNETCONSOLE_ENABLED=False",
    ]


def scaling_ceiling(one: RunResult) -> str:
    """The most two workers can gain on this machine, from one worker's run.

    Every page costs CPU in the worker, in redis-server and in the mock web,
    all on the same cores: with every core busy, pages/s cannot exceed
    cores / (worker + Redis + web CPU per page). One worker is bound by its
    own CPU alone.
    """
    cores = os.cpu_count() or 1
    per_page = one.steady_ms_per_page + one.redis_ms_per_page + one.web_ms_per_page
    most = 1000 * cores / per_page
    return (f"ceiling for 2 workers on {cores} cores: worker {one.steady_ms_per_page:.2f} + redis "
            f"{one.redis_ms_per_page:.2f} + mock web {one.web_ms_per_page:.2f} = {per_page:.2f} ms CPU per page "
            f"-> at most {most:.0f} pages/s = {most / one.pages_per_second:.2f}x one worker's {one.pages_per_second:.0f}")


def cores_used(run: RunResult, workers: int) -> str:
    """How busy the cores were in the steady window, from the CPU per page of every process."""
    cores = os.cpu_count() or 1
    per_page = run.steady_ms_per_page + run.redis_ms_per_page + run.web_ms_per_page
    used = run.steady_pages_per_second * per_page / 1000
    return (f"{run.label}: {used:.2f} of {cores} cores busy in the steady window ({run.steady_pages_per_second:.0f} "
            f"pages/s x (worker{'s' if workers > 1 else ''} {run.steady_ms_per_page:.2f} + redis "
            f"{run.redis_ms_per_page:.2f} + mock web {run.web_ms_per_page:.2f} ms per page))")


def print_table(results: list[RunResult]) -> None:
    header = (
        f"{'run':<34} {'pages':>7} {'pages/s':>8} {'CPU ms/page':>11} {'steady ms/page':>14} {'pages/CPU-s':>11} "
        f"{'redis ms/page':>13} {'peak RSS MB':>11} {'overlaps':>8} {'short gaps':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.label:<34} {r.pages:>7} {r.pages_per_second:>8.0f} {r.cpu_ms_per_page:>11.2f} "
            f"{r.steady_ms_per_page:>14.2f} "
            f"{r.pages_per_cpu_second:>11.0f} {r.redis_ms_per_page:>13.3f} {r.peak_rss_mb:>11.0f} "
            f"{r.overlaps:>8} {r.short_gaps:>10}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="crawler vs plain Scrapy throughput on the mock web")
    parser.add_argument("--seconds", type=int, default=30, help="crawl time of each run")
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--skip-plain", action="store_true", help="only the crawler runs")
    parser.add_argument("--workers-only", action="store_true",
                        help="only the two-workers-against-one block (and --compare-clients)")
    parser.add_argument("--pairs", type=int, default=1,
                        help="run the one-worker / two-workers pair this many times, alternated, and print the median "
                             "ratio (the machine's noise is about +-5%% per run)")
    parser.add_argument("--compare-clients", action="store_true",
                        help="also crawl web (a) with FETCH_HTTP_CLIENT=aiohttp, after the lean client, side by side")
    args = parser.parse_args()
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")

    workdir = Path(tempfile.mkdtemp(prefix="crawler-bench-"))
    plain_cwd = workdir / "plain"  # no scrapy.cfg here: plain Scrapy defaults
    plain_cwd.mkdir()
    services = Services(workdir)
    shapes = {
        "zipf": WebSpec(hosts=args.hosts, sizes="zipf:5000:1.0", fanout=10, nav=20, cross=10, filler_words=600),
        "uniform": WebSpec(hosts=args.hosts, sizes="uniform:20", fanout=10, nav=20, cross=10, filler_words=600),
    }
    results: list[RunResult] = []
    ratios: list[str] = []
    try:
        for name, spec in ({} if args.workers_only else shapes).items():
            print(f"web ({name}): {spec.hosts} hosts, {spec.total_pages()} pages, "
                  f"~{spec.fanout + spec.nav + spec.cross} links/page", flush=True)
            ours = plain = None
            web = Web(spec, workdir / f"{name}-crawler.log")
            try:
                seeds = web.seeds(workdir / f"{name}-seeds.txt")
                command = crawler_command(seeds, services, f"bench-{uuid.uuid4().hex[:8]}", args.seconds)
                ours = measure(f"{name}: crawler, 1 worker", web, services, [(command, ROOT)], args.seconds)
                results.append(ours)
                print_table([ours])
            finally:
                web.stop()
            if not args.skip_plain:
                web = Web(spec, workdir / f"{name}-plain.log")
                try:
                    seeds = web.seeds(workdir / f"{name}-seeds.txt")
                    plain = measure(f"{name}: plain Scrapy", web, services,
                                    [(plain_command(seeds, args.seconds), plain_cwd)], args.seconds)
                    results.append(plain)
                    print_table([plain])
                finally:
                    web.stop()
            if ours and plain:
                ratios.append(
                    f"{name}: crawler / plain Scrapy = {ours.pages_per_cpu_second / plain.pages_per_cpu_second:.2f}x "
                    f"pages per CPU-second, {ours.pages_per_second / plain.pages_per_second:.2f}x pages/s, "
                    f"{plain.steady_ms_per_page / ours.steady_ms_per_page:.2f}x in the steady window"
                )
        # Two workers against one on a Zipf web with twice the pages (the same
        # hosts, each twice as large): two workers fetch most of web (a) within
        # 40 s, and a web running dry (a few big hosts left, one request each
        # at a time) would measure the web, not the workers.
        spec = WebSpec(hosts=args.hosts, sizes="zipf:10000:1.0", fanout=10, nav=20, cross=10, filler_words=600)
        print(f"web (zipf x2): {spec.hosts} hosts, {spec.total_pages()} pages", flush=True)
        web = Web(spec, workdir / "zipf-two-workers.log")
        try:
            seeds = web.seeds(workdir / "zipf2-seeds.txt")
            crawl_ratios: list[float] = []
            steady_ratios: list[float] = []
            for pair in range(args.pairs):
                tag = f" #{pair + 1}" if args.pairs > 1 else ""
                one = measure(f"zipf x2: crawler, 1 worker{tag}", web, services,
                              [(crawler_command(seeds, services, f"bench-{uuid.uuid4().hex[:8]}", args.seconds),
                                ROOT)], args.seconds)
                crawl_id = f"bench-{uuid.uuid4().hex[:8]}"
                two = measure(f"zipf x2: crawler, 2 workers{tag}", web, services,
                              [(crawler_command(seeds, services, crawl_id, args.seconds), ROOT)] * 2, args.seconds)
                results += [one, two]
                print_table([one, two])
                crawl_ratios.append(two.pages_per_second / one.pages_per_second)
                steady_ratios.append(two.steady_pages_per_second / one.steady_pages_per_second)
                ratios.append(
                    f"zipf x2{tag}: 2 workers / 1 worker = {crawl_ratios[-1]:.2f}x pages/s over the "
                    f"crawl, {steady_ratios[-1]:.2f}x in the steady window "
                    f"({one.steady_pages_per_second:.0f} -> {two.steady_pages_per_second:.0f} pages/s)"
                )
                ratios.append(scaling_ceiling(one))
                ratios += [cores_used(one, 1), cores_used(two, 2)]
            if args.pairs > 1:
                ratios.append(
                    f"zipf x2: median of {args.pairs} pairs (one worker, then two, alternated): "
                    f"{statistics.median(crawl_ratios):.2f}x over the crawl "
                    f"({', '.join(f'{r:.2f}' for r in crawl_ratios)}), {statistics.median(steady_ratios):.2f}x "
                    f"in the steady window ({', '.join(f'{r:.2f}' for r in steady_ratios)})"
                )
            if args.compare_clients:
                aio = measure("zipf x2: crawler, aiohttp client", web, services,
                              [(crawler_command(seeds, services, f"bench-{uuid.uuid4().hex[:8]}", args.seconds,
                                                extra=("-s", "FETCH_HTTP_CLIENT=aiohttp")), ROOT)], args.seconds)
                results.append(aio)
                print_table([aio])
                ratios.append(f"zipf x2: aiohttp client / lean client = {aio.steady_ms_per_page / one.steady_ms_per_page:.2f}x "
                              f"steady CPU per page")
        finally:
            web.stop()
        if not args.workers_only:
            spec = shapes["zipf"]
            web = Web(spec, workdir / "zipf-full.log")
            try:
                seeds = web.seeds(workdir / "zipf-seeds.txt")
                full = measure("zipf: crawler + WARC, dedup, metadata", web, services,
                               [(crawler_command(seeds, services, f"bench-{uuid.uuid4().hex[:8]}", args.seconds,
                                                 full=True), ROOT)], args.seconds)
                results.append(full)
                print_table([full])
            finally:
                web.stop()
    finally:
        services.stop()
    print()
    print(f"Crawl time per run: {args.seconds} s; CONCURRENT_REQUESTS={CONCURRENCY}; delays 0; "
          f"machine: {os.cpu_count()} CPUs")
    print_table(results)
    print()
    for line in ratios:
        print(line)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
