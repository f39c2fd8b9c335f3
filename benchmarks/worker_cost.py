"""The worker's work per page, counted in instructions: a figure the machine's load does not move.

A worker's CPU time per page (``throughput.py``, ``compare.py``) moves by 15%
or more between runs on a shared machine, so a change to the per-page path
worth 1-5% cannot be seen there. This crawls ``throughput.py``'s 5 KB web (``--web 30``: its 30 KB web)
with the shipped settings (politeness on, the full pipeline) with the worker
process under valgrind's cachegrind (``--cache-sim=no``: it counts the
instructions executed, the same work giving the same count whatever else
the machine does), twice: to ``--pages`` pages and to three times as many.
The difference of the two counts over the difference of the pages fetched is
the worker's instructions per page, its start and close cancelled out.
redis-server runs natively (``redis_cost.py`` counts it).

Under valgrind the worker runs 30 to 50 times slower, so a checkout takes
about 2 minutes at the default 1,000 / 3,000 pages. What depends on time (how
many pages one Redis step carries, periodic reports) is not quite what a
native crawl does, so compare checkouts with this, in one run
(``--checkout DIR``, repeatable: a ``git worktree`` with its C extensions
built), rather than reading the figure as a native one.

Needs ``valgrind`` (Debian: ``apt-get install valgrind``). Usage:
``python benchmarks/worker_cost.py [--pages 1000] [--checkout DIR ...]``
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from redis_cost import crawl_command  # noqa: E402
from throughput import Web, headline_webs, wait_port  # noqa: E402

from crawler.crawlstate.encodings import server_arguments  # noqa: E402
from support.mockweb import free_port  # noqa: E402


def instructions_of(log: Path) -> int:
    """The ``I refs`` total of a cachegrind run's log."""
    match = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text())
    if match is None:
        raise RuntimeError(f"no instruction count in {log}:\n{log.read_text()[-2000:]}")
    return int(match.group(1).replace(",", ""))


def crawl(checkout: Path, web: Web, seeds: Path, redis_port: int, pages: int, workdir: Path) -> tuple[int, int, float]:
    """One crawl of ``pages`` pages with the worker counted: (requests fetched, instructions, seconds)."""
    log = workdir / f"cachegrind.{uuid.uuid4().hex[:8]}.log"
    env = dict(os.environ, PYTHONPATH=str(checkout))
    env.pop("REDIS_URL", None)
    before = len(web.entries())
    started = time.monotonic()
    args = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
            f"--log-file={log}", *crawl_command(seeds, redis_port, pages, workdir)]
    run = subprocess.run(args, cwd=checkout, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise RuntimeError(f"crawl failed ({run.returncode}):\n{run.stderr[-3000:]}")
    seconds = time.monotonic() - started
    return len(web.entries()) - before, instructions_of(log), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description="the worker's instructions per page (cachegrind)")
    parser.add_argument("--pages", type=int, default=1000,
                        help="pages of the short crawl (CLOSESPIDER_PAGECOUNT); the long one has three times as many")
    parser.add_argument("--hosts", type=int, default=300, help="hosts of the web")
    parser.add_argument("--web", choices=("5", "30"), default="5", help="the 5 KB or the 30 KB web of throughput.py")
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout to count the same way (repeatable)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        parser.error("valgrind is missing: apt-get install valgrind")
    checkouts = [ROOT, *(path.resolve() for path in args.checkout)]
    workdir = Path(tempfile.mkdtemp(prefix="worker-cost-"))
    spec = next(spec for name, spec in headline_webs(args.hosts).items() if name.startswith(f"{args.web} KB"))
    web = Web(spec, workdir / "web.log")
    redis_port = free_port()
    server = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", str(workdir), *server_arguments()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_port("127.0.0.1", redis_port, 30)
        seeds = web.seeds(workdir / "seeds.txt")
        print(f"{'checkout':<24} {'requests':>17} {'seconds':>11} {'M instructions':>19} {'k instructions/page':>20}")
        for checkout in checkouts:
            short = crawl(checkout, web, seeds, redis_port, args.pages, workdir)
            long = crawl(checkout, web, seeds, redis_port, 3 * args.pages, workdir)
            per_page = (long[1] - short[1]) / max(1, long[0] - short[0])
            print(f"{str(checkout)[-24:]:<24} {short[0]:>8} {long[0]:>8} {short[2]:>5.0f} {long[2]:>5.0f} "
                  f"{short[1] / 1e6:>9.0f} {long[1] / 1e6:>9.0f} {per_page / 1000:>20.1f}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
        web.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
