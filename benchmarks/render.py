"""What a rendered page costs against a plain fetch, side by side in one run.

Two crawls of the mock web, one after the other, of ``--hosts`` hosts with
pages of 5 KB: once with static hosts of ``--plain-pages`` pages (plain
fetches: the render middleware samples them and marks them static; many
pages, so that a crawl's start-up does not weigh on the figure), once with
hosts of ``--pages`` pages where every host is an application shell whose script fetches its page's
data and builds its text and links (every page rendered in headless
Chromium: the page, its script and its data call). Delays at 0, so the
crawl runs as fast as the worker and the browser can; ``RENDER_CONCURRENCY``
as shipped (2) unless ``--concurrency``.

Printed per run: pages, wall time per page (first to last request of the
mock web's log, over the pages), CPU per page of the whole process tree
(all of it, and without the fixed cost of a crawl's start-up and shutdown,
measured by a one-page crawl first)
(the worker, Playwright's driver, every Chromium process; sampled every
0.2 s with the CPU of exited children included) and of redis-server, and the
peak memory of the browser pool (the sum of the RSS of the Playwright
driver and Chromium processes, sampled: shared pages are counted in each
process, so it is an upper bound).

Usage: ``python benchmarks/render.py [--hosts 20] [--pages 10] [--plain-pages 200] [--concurrency N]``.
Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402

from benchmarks.throughput import DELAY_0, Services, Web, crawler_command  # noqa: E402
from support.mockweb import WebSpec  # noqa: E402


@dataclass
class Run:
    label: str
    pages: int
    wall: float
    tree_cpu: float
    redis_cpu: float
    browser_peak_mb: float
    rendered: int

    #: CPU of a crawl's start-up and shutdown (a one-page crawl's), left out of the per-page figure.
    fixed_cpu: float = 0.0

    @property
    def cpu_per_page(self) -> float:
        return max(self.tree_cpu - self.fixed_cpu, 0.0) / max(self.pages, 1)

    def row(self) -> str:
        per = max(self.pages, 1)
        return (f"{self.label:<34} {self.pages:>6} {self.rendered:>8} {1000 * self.wall / per:>12.1f} "
                f"{1000 * self.tree_cpu / per:>10.2f} {1000 * self.cpu_per_page:>14.2f} "
                f"{1000 * self.redis_cpu / per:>11.3f} {self.browser_peak_mb:>10.0f}")


HEADER = (f"{'run':<34} {'pages':>6} {'rendered':>8} {'wall ms/page':>12} {'CPU ms/pg':>10} "
          f"{'minus fixed':>14} {'redis ms/pg':>11} {'browser MB':>10}")


def _tree_cpu(proc: psutil.Process) -> tuple[float, float]:
    """(CPU seconds of the process tree, exited children included; RSS MB of its browser processes)."""
    cpu = 0.0
    browser = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            times = p.cpu_times()
            cpu += times.user + times.system + times.children_user + times.children_system
            name = p.name().lower()
            if p is not proc and ("chrom" in name or "node" in name or "playwright" in name):
                browser += p.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return cpu, browser


def crawl(label: str, spec: WebSpec, services: Services, workdir: Path, extra: tuple[str, ...]) -> Run:
    web = Web(spec, workdir / f"{uuid.uuid4().hex[:6]}.log")
    try:
        seeds = web.seeds(workdir / "seeds.txt")
        services.empty()
        redis_before = services.redis_cpu()
        stats_file = workdir / f"stats-{uuid.uuid4().hex[:6]}.json"
        command = crawler_command(seeds, services, f"render-{uuid.uuid4().hex[:8]}", 600,
                                  (*DELAY_0, "-s", f"STATS_JSON_FILE={stats_file}", *extra))
        process = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        proc = psutil.Process(process.pid)
        peak = {"cpu": 0.0, "browser": 0.0}
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                try:
                    cpu, browser = _tree_cpu(proc)
                except psutil.Error:
                    break
                peak["cpu"] = max(peak["cpu"], cpu)
                peak["browser"] = max(peak["browser"], browser)
                done.wait(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(process.pid, 0)
        done.set()
        sampler.join()
        assert process.stderr is not None
        err = process.stderr.read().decode(errors="replace")
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{label}: the crawl failed:\n{err[-3000:]}")
        # The worker's own CPU from wait4, its children's from the samples (the larger of the two).
        tree_cpu = max(peak["cpu"], usage.ru_utime + usage.ru_stime)
        redis_cpu = services.redis_cpu() - redis_before
        entries = [e for e in web.entries() if e.path == "/" or e.path.startswith("/p/")]
        wall = max(e.end for e in entries) - min(e.start for e in entries) if entries else 0.0
        stats = json.loads(stats_file.read_text()) if stats_file.exists() else {}
        return Run(label, len(entries), wall, tree_cpu, redis_cpu, peak["browser"],
                   int(stats.get("render/rendered", 0)))
    finally:
        web.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--pages", type=int, default=10, help="pages per host of the rendered run")
    parser.add_argument("--plain-pages", type=int, default=200, help="pages per host of the plain run")
    parser.add_argument("--concurrency", type=int, default=0, help="RENDER_CONCURRENCY (default: as shipped)")
    args = parser.parse_args()
    if shutil.which("chromium") is None:
        sys.exit("chromium is not installed (make chromium)")
    workdir = Path(tempfile.mkdtemp(prefix="render-bench-"))
    services = Services(workdir)
    extra = ("-s", f"RENDER_CONCURRENCY={args.concurrency}") if args.concurrency else ()
    runs = []
    try:
        shape = {"hosts": args.hosts, "sizes": f"uniform:{args.pages}", "fanout": 3, "nav": 3, "cross": 2,
                 "filler_words": 690}
        fixed = crawl("start-up and shutdown (1 page)", WebSpec(hosts=1, sizes="uniform:1", fanout=0, nav=0, cross=0),
                      services, workdir, extra)
        print(HEADER)
        print(fixed.row(), flush=True)
        plain_shape = {**shape, "sizes": f"uniform:{args.plain_pages}"}
        runs.append(crawl("plain fetch (static hosts)", WebSpec(**plain_shape), services, workdir, extra))  # type: ignore[arg-type]
        print(runs[-1].row(), flush=True)
        scenario = workdir / "js.json"
        scenario.write_text(json.dumps({"js": {"hosts": list(range(args.hosts))}}))
        runs.append(crawl("rendered (JavaScript hosts)", WebSpec(**shape, scenario=str(scenario)),  # type: ignore[arg-type]
                          services, workdir, extra))
        print(runs[-1].row(), flush=True)
    finally:
        services.stop()
    for run in runs:
        run.fixed_cpu = fixed.tree_cpu
    plain, rendered = runs
    print()
    print(f"{args.hosts} hosts x {args.plain_pages} pages (plain) and x {args.pages} pages (rendered), delays 0, "
          f"RENDER_CONCURRENCY "
          f"{args.concurrency or 'as shipped (2)'}; machine: {os.cpu_count()} CPUs")
    print(HEADER)
    for run in runs:
        print(run.row())
    if plain.pages and rendered.pages:
        print(f"rendered / plain: {rendered.cpu_per_page / plain.cpu_per_page:.0f}x CPU "
              f"per page, {(rendered.wall / rendered.pages) / (plain.wall / plain.pages):.1f}x wall time per page; "
              f"browser pool peak {rendered.browser_peak_mb:.0f} MB (RSS summed over its processes)")
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
