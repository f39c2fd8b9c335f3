"""Where a worker's CPU goes per page: one crawl of ``throughput.py``'s 5 KB web under cProfile.

Runs ``scrapy crawl web`` with the shipped settings (politeness on, the full
pipeline) against a redis-server of its own for ``--seconds``, under
``cProfile`` counting CPU time (not the wall clock: waiting in epoll is not
work), and prints the worker's time (each function's own, callees
not counted) summed by area (the crawler's packages, and each library by
name: scrapy, twisted, redis, warcio, lxml...), then the ``--top``
functions, each as microseconds per page. cProfile's own cost inflates every
figure (a function call costs several times more than without it): read the
shares, not the totals; the totals to compare are ``throughput.py``'s.

Usage: ``python benchmarks/profile.py [--seconds 30] [--top 40] [--web 5|30] [--save FILE]``
(``--save`` keeps the stats for ``pstats``: who calls what).
"""

from __future__ import annotations

import argparse
import os
import pstats
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import Services, Web, crawler_command, headline_webs  # noqa: E402

#: ``scrapy <args>`` under cProfile with a CPU-time timer; argv[1]: where the stats go.
_UNDER_PROFILE = """
import cProfile, sys, time
from scrapy.cmdline import execute
out = sys.argv[1]
sys.argv = ["scrapy", *sys.argv[2:]]
profile = cProfile.Profile(time.process_time)
try:
    profile.runcall(execute)
except SystemExit as stop:
    code = stop.code
else:
    code = 0
profile.dump_stats(out)
sys.exit(code)
"""


def area(path: str) -> str:
    """The package a function's file belongs to: ``crawler.frontier``, ``scrapy``, ``builtins``..."""
    if path.startswith("~") or path.startswith("<"):
        return "builtins (C)"
    parts = Path(path).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    if "crawler" in parts:
        at = len(parts) - 1 - parts[::-1].index("crawler")
        return ".".join(parts[at:at + 2]).removesuffix(".py")
    if "lib" in parts and "python3" in "".join(parts):
        return "stdlib " + parts[-1].removesuffix(".py")
    return parts[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--web", choices=("5", "30"), default="5", help="the 5 KB or the 30 KB web")
    parser.add_argument("--hosts", type=int, default=2000, help="hosts of the web (as throughput.py)")
    parser.add_argument("--save", type=Path, help="keep the cProfile stats here (for pstats: callers, callees)")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="profile-"))
    spec = next(spec for name, spec in headline_webs(args.hosts).items() if name.startswith(f"{args.web} KB"))
    web = Web(spec, workdir / "web.log")
    services = Services(workdir)
    try:
        seeds = web.seeds(workdir / "seeds.txt")
        out = workdir / "worker.prof"
        command = crawler_command(seeds, services, f"profile-{uuid.uuid4().hex[:8]}", args.seconds)
        # CPU time (process_time), not the wall clock cProfile counts by default: a worker waiting in
        # epoll for the network is not spending its CPU there.
        command = [sys.executable, "-c", _UNDER_PROFILE, str(out), *command[3:]]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("REDIS_URL", None)
        before = len(web.entries())
        run = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise SystemExit(f"crawl failed ({run.returncode}):\n{run.stderr[-3000:]}")
        pages = len(web.entries()) - before
        if args.save:
            args.save.write_bytes(out.read_bytes())
        stats = pstats.Stats(str(out))
        total = sum(row[2] for row in stats.stats.values())  # type: ignore[attr-defined]
        by_area: dict[str, float] = {}
        rows = []
        for (path, line, name), (_, calls, own, _cumulative, _) in stats.stats.items():  # type: ignore[attr-defined]
            by_area[area(path)] = by_area.get(area(path), 0.0) + own
            rows.append((own, calls, f"{Path(path).name}:{line} {name}" if line else name, area(path)))
        print(f"{pages:,} requests in {args.seconds} s, {total:.1f} s of profiled CPU time, "
              f"{1e6 * total / max(pages, 1):,.0f} us per request (under cProfile)")
        print("\nby area (own time):")
        for name, own in sorted(by_area.items(), key=lambda item: -item[1])[:25]:
            print(f"  {own / total:6.1%} {1e6 * own / max(pages, 1):8.1f} us/request  {name}")
        print(f"\ntop {args.top} functions (own time):")
        for own, calls, where, package in sorted(rows, reverse=True)[:args.top]:
            print(f"  {own / total:6.1%} {1e6 * own / max(pages, 1):8.1f} us/request {calls / max(pages, 1):7.2f} "
                  f"calls/request  {where}  [{package}]")
    finally:
        services.stop()
        web.stop()


if __name__ == "__main__":
    main()
