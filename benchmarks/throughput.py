"""The crawler as users run it against plain Scrapy, side by side, on the mock web.

Runs, in one invocation, for a fixed crawl time each:

* the headline, on two webs of 2,000 hosts with Zipf-skewed sizes (pages of
  5 KB with up to 12 links; pages of 30 KB with up to 60 links):
  ``scrapy crawl web`` as shipped (politeness on, the full pipeline) and
  plain Scrapy's follow-all spider (``DownloaderAwarePriorityQueue``,
  ``CONCURRENT_REQUESTS_PER_DOMAIN = 1``, no WARC, no dedup, no robots.txt);
* breakdown rows on the 5 KB web with delays at 0: the crawl path alone
  (robots.txt, frontier, seen set, links), then one row per pipeline stage
  added (``STAGES``);
* two workers sharing one frontier against one, as shipped, on 5,000 hosts of
  equal size (``--worker-hosts``: enough that two workers are bound by the
  CPU, not by the hosts' politeness delays; 2,000 hosts held two fast workers
  to 1.6-1.7 busy cores), beside ``benchmarks/machine.py``'s bare two-process
  ratio measured in the same run (the fraction of it reached is printed, and
  the fraction of the CPU ceiling the per-page costs allow on this machine).

For each run it prints pages/s, CPU ms per page of the crawling processes
(all of their CPU over all their pages; "steady": within a window from a
third of the crawl time to 90% of it), redis-server's CPU per page, the
tree's (workers + redis-server: the mock web stands for the other machines),
pages per CPU-second of the tree, peak RSS, and politeness violations from
the mock web's log (overlaps; start-to-start gaps below the delay in force,
audited against the shipped policy in the polite runs). The frontier's
redis-server has the embedded server's encoding settings
(``crawler/crawlstate/encodings.py``) and an append-only file, as under
``make crawl``.

Usage: ``python benchmarks/throughput.py [--seconds 30] [--hosts 2000] [--worker-hosts 5000] [--rounds 3]
[--skip-plain] [--skip-stages] [--workers-only] [--pairs N] [--compare-clients] [--compare-reactor]`` (``make bench``). Not a test: numbers
depend on the machine and its load. ``--rounds N`` runs each headline pair (the crawler, then plain
Scrapy) N times, alternated, and prints the medians; ``--pairs N`` does the same for the one-worker /
two-workers pair.
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

from crawler.crawlstate.encodings import server_arguments  # noqa: E402
from support.bytecode import compile_package  # noqa: E402
from support.mockweb import LogEntry, WebSpec, delay_audit, free_port, host_ip, read_log, render_page, spec_arguments  # noqa: E402

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
        """Pages per CPU-second of the whole process tree: the workers and their redis-server."""
        return self.pages / (self.cpu + self.redis_cpu) if self.cpu else 0.0

    @property
    def tree_ms_per_page(self) -> float:
        """CPU per page of the workers and their redis-server (the mock web, the "other machines", apart)."""
        return 1000 * (self.cpu + self.redis_cpu) / self.pages if self.pages else float("inf")


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
             "--auto-aof-rewrite-percentage", "0", "--logfile", str(workdir / "redis.log"),
             *server_arguments()],
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
            seconds: int, polite: bool = False) -> RunResult:
    """One run; ``polite``: audit the shipped delay policy, else only overlapping requests to a host.
    A crawler command runs with the code of its directory (this checkout, or another one)."""
    code = commands[0][1] if commands and (commands[0][1] / "crawler").is_dir() else ROOT
    env = dict(os.environ, PYTHONPATH=str(code))
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
    report = delay_audit(entries, MIN_DELAY, DELAY_FACTOR) if polite else delay_audit(entries, 0.0, 0.0)
    low, high = run.window
    steady_pages = sum(1 for e in entries if low <= e.end < high)
    return RunResult(label, len(entries), seconds_, run.cpu, redis_cpu, run.rss, report.overlaps, report.short_gaps,
                     run.window_cpu, steady_pages, high - low, web_cpu)


#: Politeness off: the CPU-bound reference (a breakdown row, never the headline).
DELAY_0 = ("-s", "FRONTIER_MIN_DELAY=0", "-s", "FRONTIER_DELAY_FACTOR=0")
#: The shipped delay policy (crawler.defaults), for the politeness audit of the default runs.
MIN_DELAY, DELAY_FACTOR = 1.0, 10.0


def _stage(*enabled: str) -> tuple[str, ...]:
    """Every storage stage and the text module off but those named.

    The add-on merges its pipelines into ITEM_PIPELINES, so they are turned
    off by their own settings.
    """
    off = {"text", "warc", "dedup", "metadata", "recrawl"} - set(enabled)
    args: list[str] = []
    names = {"warc": "WARC_ENABLED", "dedup": "DEDUP_ENABLED", "metadata": "METADATA_ENABLED"}
    for stage in sorted(off):
        if stage == "text":
            args += ["-s", 'WEB_PAGE_MODULES={"crawler.modules.links.LinksModule": 100}']
        elif stage == "recrawl":
            args += ["-s", "RECRAWL_ENABLED=False", "-s", "INDEX_GATE_ENABLED=False"]
        else:
            args += ["-s", f"{names[stage]}=False"]
    return tuple(args)


#: The crawl path only (robots.txt, frontier, seen set, link extraction).
CRAWL_ONLY = _stage()
#: One row per pipeline stage, each adding one to the row before, at delay 0.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (label, (*DELAY_0, *_stage(*enabled))) for label, enabled in (
        ("crawl only (robots.txt, frontier, links)", ()),
        ("+ visible text, SimHash", ("text",)),
        ("+ WARC", ("text", "warc")),
        ("+ exact and near dedup", ("text", "warc", "dedup")),
        ("+ URL metadata", ("text", "warc", "dedup", "metadata")),
        ("+ recrawl, index gate (= full, delay 0)", ("text", "warc", "dedup", "metadata", "recrawl")),
    )
)


def crawler_command(seeds: Path, services: Services, crawl_id: str, seconds: int, extra: tuple[str, ...] = ()) -> list[str]:
    """``scrapy crawl web`` with the shipped settings but for what the mock web needs, and ``extra``."""
    return [
        sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
        "-s", f"REDIS_URL={services.redis_url}", "-s", f"FRONTIER_CRAWL_ID={crawl_id}",
        "-s", f"CLOSESPIDER_TIMEOUT={seconds}", "-s", "LOG_LEVEL=INFO",
        # The mock web is on loopback addresses; robots.txt stays on (404 here).
        "-s", "ALLOW_PRIVATE_NETWORKS=True",
        # A real identity, as a production crawl has (the placeholder adds a check).
        "-s", "USER_AGENT=benchbot/1.0 (+https://example.org/bench)",
        "-s", f"CRAWL_DATA_DIR={services.workdir / 'crawl-data'}",
        "-s", "SEEN_EXPECTED_URLS=1000000",
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


def ceiling_ratio(one: RunResult) -> float:
    """The most two workers can gain on this machine over one worker's run (pages/s, as a ratio).

    Every page costs CPU in the worker, in redis-server and in the mock web,
    all on the same cores: with every core busy, pages/s cannot exceed
    cores / (worker + Redis + web CPU per page). One worker is bound by its
    own CPU alone.
    """
    cores = os.cpu_count() or 1
    per_page = one.steady_ms_per_page + one.redis_ms_per_page + one.web_ms_per_page
    return 1000 * cores / per_page / one.pages_per_second


def scaling_ceiling(one: RunResult) -> str:
    """:func:`ceiling_ratio`, explained."""
    cores = os.cpu_count() or 1
    per_page = one.steady_ms_per_page + one.redis_ms_per_page + one.web_ms_per_page
    most = 1000 * cores / per_page
    return (f"ceiling for 2 workers on {cores} cores: worker {one.steady_ms_per_page:.2f} + redis "
            f"{one.redis_ms_per_page:.2f} + mock web {one.web_ms_per_page:.2f} = {per_page:.2f} ms CPU per page "
            f"-> at most {most:.0f} pages/s = {ceiling_ratio(one):.2f}x one worker's {one.pages_per_second:.0f}")


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
        f"{'run':<52} {'pages':>6} {'pages/s':>7} {'CPU ms/page':>11} {'steady':>6} {'redis':>5} {'tree ms/page':>12} "
        f"{'pages/CPU-s':>11} {'peak RSS MB':>11} {'overlaps':>8} {'short gaps':>10}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        print(
            f"{r.label:<52} {r.pages:>6} {r.pages_per_second:>7.0f} {r.cpu_ms_per_page:>11.2f} "
            f"{r.steady_ms_per_page:>6.2f} {r.redis_ms_per_page:>5.2f} {r.tree_ms_per_page:>12.2f} "
            f"{r.pages_per_cpu_second:>11.0f} {r.peak_rss_mb:>11.0f} {r.overlaps:>8} {r.short_gaps:>10}",
            flush=True,
        )


def headline(name: str, ours: list[RunResult], plain: list[RunResult]) -> str:
    """The crawler's CPU per page (tree) against plain Scrapy's: medians of the runs, and each round's ratio."""
    tree = statistics.median(run.tree_ms_per_page for run in ours)
    steady = statistics.median(run.steady_ms_per_page for run in ours)
    line = (f"{name}: crawler (defaults): {tree:.2f} ms CPU per page, workers + redis-server (median of {len(ours)}; "
            f"steady window, workers only: {steady:.2f}); {statistics.median(r.pages_per_second for r in ours):.0f} "
            f"pages/s")
    if plain:
        ratios = [p.tree_ms_per_page / o.tree_ms_per_page for o, p in zip(ours, plain)]
        line += (f"; plain Scrapy {statistics.median(p.tree_ms_per_page for p in plain):.2f} ms per page; crawler / "
                 f"plain Scrapy = {statistics.median(ratios):.2f}x pages per CPU-second (median of the rounds' "
                 f"ratios: {', '.join(f'{r:.2f}' for r in ratios)}), "
                 f"{statistics.median(o.pages_per_second / p.pages_per_second for o, p in zip(ours, plain)):.2f}x "
                 f"pages/s")
    return line


def describe(spec: WebSpec) -> str:
    """The web's shape: hosts, pages, and a page's mean size and links (from a sample of its pages)."""
    sample = [(host, page) for host in range(0, spec.hosts, max(1, spec.hosts // 40))
              for page in range(min(spec.pages(host), 25))]
    size = statistics.mean(len(render_page(spec, host, page, 8000)) for host, page in sample)
    links = statistics.mean(len(spec.page_links(host, page)) for host, page in sample)
    return f"{spec.hosts} hosts ({spec.sizes}), {spec.total_pages()} pages of {size / 1000:.1f} KB, {links:.0f} links"


#: The headline's webs: 2,000 hosts of Zipf-skewed sizes, pages of 5 KB with 12
#: links, and pages like the real web's (30 KB of HTML, 60 links).
def headline_webs(hosts: int) -> dict[str, WebSpec]:
    return {
        "5 KB/12 links": WebSpec(hosts=hosts, sizes="zipf:5000:1.0", fanout=4, nav=6, cross=2, filler_words=690),
        "30 KB/60 links": WebSpec(hosts=hosts, sizes="zipf:5000:1.0", fanout=10, nav=40, cross=10,
                                  filler_words=4150),
    }


def machine_ratio(seconds: float) -> float:
    """``benchmarks/machine.py``'s bare ratio: two CPU-bound processes against one, nothing else running."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import machine  # a script beside this one

    one, two = machine.run(1, seconds), machine.run(2, seconds)
    print(f"machine.py: 1 process {one:,.0f} pages/s, 2 processes {two:,.0f} pages/s ({two / one:.2f}x)", flush=True)
    return two / one


def main() -> None:
    parser = argparse.ArgumentParser(description="the crawler as shipped against plain Scrapy, on the mock web")
    parser.add_argument("--seconds", type=int, default=30, help="crawl time of each run")
    parser.add_argument("--hosts", type=int, default=2000, help="hosts of the two headline webs")
    parser.add_argument("--worker-hosts", type=int, default=5000,
                        help="hosts of the workers' web (enough that two workers are CPU-bound, not politeness-bound)")
    parser.add_argument("--skip-plain", action="store_true", help="no plain Scrapy runs")
    parser.add_argument("--skip-stages", action="store_true", help="no per-stage breakdown rows")
    parser.add_argument("--workers-only", action="store_true", help="only the two-workers-against-one block")
    parser.add_argument("--rounds", type=int, default=3,
                        help="headline runs per web: the crawler and plain Scrapy alternated this many times, the "
                             "median printed (this shared machine's speed moves by 10%% or more between runs)")
    parser.add_argument("--pairs", type=int, default=1,
                        help="run the one-worker / two-workers pair this many times, alternated, and print the median "
                             "ratio (the machine's noise is about +-5%% per run)")
    parser.add_argument("--compare-clients", action="store_true",
                        help="also crawl the 5 KB web with FETCH_HTTP_CLIENT=aiohttp, side by side")
    parser.add_argument("--compare-reactor", action="store_true",
                        help="also crawl the 5 KB web with Scrapy's Twisted reactor on (TWISTED_REACTOR_ENABLED), "
                             "alternated with the shipped setting --rounds times")
    args = parser.parse_args()
    if args.pairs < 1 or args.rounds < 1:
        parser.error("--pairs and --rounds must be at least 1")
    compile_package(ROOT)  # as installed: no worker compiles the crawler at its start

    workdir = Path(tempfile.mkdtemp(prefix="crawler-bench-"))
    plain_cwd = workdir / "plain"  # no scrapy.cfg here: plain Scrapy defaults
    plain_cwd.mkdir()
    services = Services(workdir)
    results: list[RunResult] = []
    lines: list[str] = []

    def crawl(label: str, spec_web: Web, seeds: Path, extra: tuple[str, ...] = (), workers: int = 1,
              polite: bool = True) -> RunResult:
        command = crawler_command(seeds, services, f"bench-{uuid.uuid4().hex[:8]}", args.seconds, extra)
        run = measure(label, spec_web, services, [(command, ROOT)] * workers, args.seconds, polite=polite)
        results.append(run)
        print_table([run])
        return run

    try:
        for name, spec in ({} if args.workers_only else headline_webs(args.hosts)).items():
            print(f"web {name}: {describe(spec)}", flush=True)
            web = Web(spec, workdir / f"web-{len(results)}.log")
            try:
                seeds = web.seeds(workdir / "seeds.txt")
                ours_runs: list[RunResult] = []
                plain_runs: list[RunResult] = []
                for round_ in range(args.rounds):
                    tag = f" #{round_ + 1}" if args.rounds > 1 else ""
                    ours_runs.append(crawl(f"{name}: crawler, defaults (polite, full pipeline){tag}", web, seeds))
                    if not args.skip_plain:
                        plain = measure(f"{name}: plain Scrapy follow-all{tag}", web, services,
                                        [(plain_command(seeds, args.seconds), plain_cwd)], args.seconds)
                        results.append(plain)
                        print_table([plain])
                        plain_runs.append(plain)
                lines.append(headline(name, ours_runs, plain_runs))
                if name.startswith("5 KB") and not args.skip_stages:
                    for label, extra in STAGES:
                        crawl(f"{name}: {label}", web, seeds, extra, polite=False)
                if name.startswith("5 KB") and args.compare_reactor:
                    ratios = []
                    for round_ in range(args.rounds):
                        tag = f" #{round_ + 1}" if args.rounds > 1 else ""
                        off = crawl(f"{name}: crawler, defaults, reactor off{tag}", web, seeds)
                        on = crawl(f"{name}: crawler, defaults, Twisted reactor on{tag}", web, seeds,
                                   ("-s", "TWISTED_REACTOR_ENABLED=True"))
                        ratios.append(on.tree_ms_per_page / off.tree_ms_per_page)
                    lines.append(f"{name}: Twisted reactor on / off = {statistics.median(ratios):.2f}x CPU per page "
                                 f"(median of {len(ratios)}: {', '.join(f'{r:.2f}' for r in ratios)})")
                if name.startswith("5 KB") and args.compare_clients:
                    aio = crawl(f"{name}: crawler, defaults, aiohttp client", web, seeds,
                                ("-s", "FETCH_HTTP_CLIENT=aiohttp"))
                    lines.append(f"{name}: aiohttp client / lean client = "
                                 f"{aio.tree_ms_per_page / ours_runs[-1].tree_ms_per_page:.2f}x CPU per page")
            finally:
                web.stop()
        # Two workers against one, as shipped (polite, full pipeline), on a web
        # of equal hosts large enough that neither runs it dry, beside the
        # machine's own ceiling for two processes (benchmarks/machine.py).
        spec = WebSpec(hosts=args.worker_hosts, sizes="uniform:60", fanout=4, nav=6, cross=2, filler_words=690)
        print(f"web for the workers: {describe(spec)}", flush=True)
        web = Web(spec, workdir / "workers.log")
        try:
            seeds = web.seeds(workdir / "workers-seeds.txt")
            crawl_ratios: list[float] = []
            steady_ratios: list[float] = []
            bare: list[float] = []
            ceilings: list[float] = []
            for pair in range(args.pairs):
                tag = f" #{pair + 1}" if args.pairs > 1 else ""
                one = crawl(f"workers: defaults, 1 worker{tag}", web, seeds)
                two = crawl(f"workers: defaults, 2 workers{tag}", web, seeds, workers=2)
                bare.append(machine_ratio(10.0))
                crawl_ratios.append(two.pages_per_second / one.pages_per_second)
                steady_ratios.append(two.steady_pages_per_second / one.steady_pages_per_second)
                lines.append(
                    f"workers{tag}: 2 workers / 1 = {crawl_ratios[-1]:.2f}x pages/s over the crawl, "
                    f"{steady_ratios[-1]:.2f}x in the steady window ({one.steady_pages_per_second:.0f} -> "
                    f"{two.steady_pages_per_second:.0f} pages/s); machine.py's bare 2 processes / 1 = {bare[-1]:.2f}x; "
                    f"fraction of the bare ratio reached: {crawl_ratios[-1] / bare[-1]:.2f} over the crawl, "
                    f"{steady_ratios[-1] / bare[-1]:.2f} in the steady window"
                )
                ceilings.append(ceiling_ratio(one))
                lines += [scaling_ceiling(one),
                          f"workers{tag}: fraction of that CPU ceiling reached: {crawl_ratios[-1] / ceilings[-1]:.2f} "
                          f"over the crawl, {steady_ratios[-1] / ceilings[-1]:.2f} in the steady window",
                          cores_used(one, 1), cores_used(two, 2)]
            if args.pairs > 1:
                lines.append(
                    f"workers: median of {args.pairs} pairs: {statistics.median(crawl_ratios):.2f}x over the crawl, "
                    f"{statistics.median(steady_ratios):.2f}x in the steady window, bare "
                    f"{statistics.median(bare):.2f}x, CPU ceiling {statistics.median(ceilings):.2f}x"
                )
        finally:
            web.stop()
    finally:
        services.stop()
    print()
    print(f"Crawl time per run: {args.seconds} s; machine: {os.cpu_count()} CPUs; crawler: the shipped settings "
          f"(politeness on: FRONTIER_MIN_DELAY {MIN_DELAY:g} s, FRONTIER_DELAY_FACTOR {DELAY_FACTOR:g}) but where a "
          f"row says delay 0; plain Scrapy: CONCURRENT_REQUESTS={CONCURRENCY}, one request per domain")
    print("CPU ms/page: the crawling processes, all their CPU over all their pages; steady: within a window inside the "
          "crawl; redis: redis-server's; tree: workers + redis-server; pages/CPU-s: of the tree")
    print_table(results)
    print()
    for line in lines:
        print(line)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
