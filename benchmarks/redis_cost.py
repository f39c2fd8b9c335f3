"""Redis' work per request, counted in instructions: a figure the machine's load does not move.

redis-server's CPU time per page (``throughput.py``, ``polite.py``) moves by
20% or more between runs on a shared machine, and Redis is 10-15% of the
crawl's CPU, so a change to the scripts or the key layout hides in that
noise. This runs redis-server under valgrind's callgrind (which counts the
instructions it executes: the same work gives the same count, whatever else
the machine does) and crawls ``throughput.py``'s 5 KB web with the shipped
settings (politeness on, the full pipeline) to ``--pages`` pages, then prints
redis-server's instructions per page fetched (its robots.txt requests, a
steady share on the few hosts of ``--hosts``, counted in). Under
callgrind Redis runs some 30 times slower, so the crawl is Redis-bound and
takes about a minute per 3,000 pages; what it does per page is the same.
redis-server runs with the embedded server's encoding settings
(``crawler/crawlstate/encodings.py``), as under ``make crawl``: the bucket
sizes, and so the work per page, follow them.

``--checkout DIR`` (repeatable) crawls the same web with the code of another
checkout too (a ``git worktree`` or clone with its C extensions built), one
after the other, for a before/after. ``--stages`` adds, for each checkout,
the runs with the pipeline's Redis users turned off one at a time (recrawl;
then URL metadata; then duplicate detection): the differences are each
stage's instructions per request, and the last row is the crawl path alone
(frontier, robots.txt, seen set).

Needs ``valgrind`` (Debian: ``apt-get install valgrind``). Usage:
``python benchmarks/redis_cost.py [--pages 3000] [--stages] [--annotate N] [--by-function] [--timed]
[--checkout DIR ...]``
(``--annotate N``: the N functions of redis-server with the most instructions, their callees
counted in, for each crawl: where Redis' time goes). ``--by-function`` adds a crawl per checkout
whose counts are cut after every ``FCALL`` (callgrind's ``--dump-after=fcallCommand``) and named
from Redis' ``SLOWLOG`` (kept for every command in that crawl, which itself adds a few percent):
the instructions per page of each of the library's functions, what the plain commands between two
calls cost (the worker's ``BITFIELD`` after an enqueue, lease renewals) counted with the call after
them. ``--timed`` adds a crawl per checkout against a redis-server run natively (no valgrind, no
append-only file) that prints each library function's microseconds per page (``SLOWLOG``) and
every command's calls and microseconds per page (``INFO commandstats``: those the functions run
count too), so a function's time splits into its commands and its Lua. These are clock times: read
them as shares, and compare checkouts with the instruction counts.
"""

from __future__ import annotations

import argparse
import collections
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

from throughput import Web, headline_webs, wait_port  # noqa: E402

from crawler.crawlstate.encodings import server_arguments  # noqa: E402
from support.mockweb import free_port  # noqa: E402

#: The pipeline's Redis users turned off one more at a time (``--stages``).
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("full pipeline (defaults)", ()),
    ("without recrawl", ("RECRAWL_ENABLED=False", "INDEX_GATE_ENABLED=False")),
    ("without recrawl, metadata", ("RECRAWL_ENABLED=False", "INDEX_GATE_ENABLED=False", "METADATA_ENABLED=False")),
    ("crawl path only", ("RECRAWL_ENABLED=False", "INDEX_GATE_ENABLED=False", "METADATA_ENABLED=False",
                         "DEDUP_ENABLED=False")),
)


def program_total(dump: Path) -> int:
    """Instructions in a callgrind dump (callgrind_annotate's program total)."""
    text = subprocess.run(["callgrind_annotate", str(dump)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text)
    return int(match.group(1).replace(",", "")) if match else 0


def control(server: subprocess.Popen[bytes], *args: str) -> None:
    """A ``callgrind_control`` command to the counted redis-server."""
    subprocess.run(["callgrind_control", *args, str(server.pid)], stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)


def top_functions(dumps: list[Path], count: int) -> str:
    """The ``count`` named functions of redis-server with the most instructions, their callees counted in
    (``callgrind_annotate --inclusive=yes``, one dump at a time, summed), each with its share."""
    totals: dict[str, int] = {}
    for dump in dumps:
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", str(dump)], capture_output=True, text=True,
                              check=True).stdout
        for match in re.finditer(r"^\s*([\d,]+) \(\s*[\d.]+%\)\s+\S*?:([A-Za-z_][\w']*) ", text, re.MULTILINE):
            totals[match.group(2)] = totals.get(match.group(2), 0) + int(match.group(1).replace(",", ""))
    whole = max(totals.values(), default=1)
    rows = sorted(totals.items(), key=lambda item: -item[1])[:count]
    return "\n".join(f"  {share / whole:6.1%}  {name}" for name, share in rows)


def crawl_command(seeds: Path, redis_port: int, pages: int, workdir: Path, settings: tuple[str, ...] = ()) -> list[str]:
    """The counted crawl: the shipped settings, a new crawl id, stopped at ``pages`` pages."""
    args = [sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
            "-s", f"REDIS_URL=redis://127.0.0.1:{redis_port}/0", "-s", f"FRONTIER_CRAWL_ID=cost-{uuid.uuid4().hex[:8]}",
            "-s", f"CLOSESPIDER_PAGECOUNT={pages}", "-s", "LOG_LEVEL=WARNING",
            "-s", "ALLOW_PRIVATE_NETWORKS=True", "-s", "USER_AGENT=benchbot/1.0 (+https://example.org/bench)",
            "-s", f"CRAWL_DATA_DIR={workdir / uuid.uuid4().hex[:8]}", "-s", "SEEN_EXPECTED_URLS=1000000"]
    for setting in settings:
        args += ["-s", setting]
    return args


def dump_total(dump: Path) -> int:
    """Instructions in a callgrind dump, from its ``summary:`` line (no ``callgrind_annotate`` run)."""
    with dump.open(errors="replace") as lines:
        for line in lines:
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    return 0


def by_function(dumps: list[Path], names: list[str]) -> dict[str, tuple[int, int]]:
    """Calls and instructions of each library function: the dumps cut after each ``FCALL``, in order,
    paired with the functions ``SLOWLOG`` names in order (the last dump, the rest of the crawl, apart)."""
    cut = sorted((dump for dump in dumps if re.search(r"\.\d+$", dump.name)),
                 key=lambda dump: int(dump.name.rsplit(".", 1)[1]))
    totals: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for dump, name in zip(cut, names):
        totals[name][0] += 1
        totals[name][1] += dump_total(dump)
    return {name: (calls, instructions) for name, (calls, instructions) in totals.items()}


def crawl(checkout: Path, web: Web, seeds: Path, pages: int, workdir: Path,
          settings: tuple[str, ...], annotate: int = 0,
          functions: dict[str, tuple[int, int]] | None = None) -> tuple[int, int, int, float]:
    """One crawl of ``pages`` pages against a counted redis-server: (pages, robots.txt requests,
    instructions, seconds); ``annotate``: print that many of the functions it spent them in;
    ``functions``: filled with each library function's calls and instructions (``--by-function``; the
    instructions returned are then theirs, the rest of the crawl left out)."""
    port = free_port()
    out = workdir / f"callgrind.{uuid.uuid4().hex[:8]}"
    split = ["--dump-after=fcallCommand"] if functions is not None else []
    slowlog = ["--slowlog-log-slower-than", "0", "--slowlog-max-len", "10000000"] if functions is not None else []
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", *split,
         shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir), *server_arguments(), *slowlog],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    names: list[str] = []
    try:
        wait_port("127.0.0.1", port, 60)
        # Counted from here: start-up is not the crawl's.
        control(server, "-i", "on")
        env = dict(os.environ, PYTHONPATH=str(checkout))
        env.pop("REDIS_URL", None)
        before = len(web.entries())
        started = time.monotonic()
        args = crawl_command(seeds, port, pages, workdir, settings)
        run = subprocess.run(args, cwd=checkout, env=env, capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"crawl failed ({run.returncode}):\n{run.stderr[-3000:]}")
        seconds = time.monotonic() - started
        control(server, "-i", "off")
        control(server, "-d", "crawl")
        entries = web.entries()[before:]
        if functions is not None:
            import redis  # the crawler's own dependency

            client = redis.Redis(port=port)
            for entry in sorted(client.slowlog_get(10_000_000), key=lambda entry: entry["id"]):
                command = entry["command"]
                words = command.split() if isinstance(command, bytes) else command
                if words and words[0].lower() == b"fcall":
                    names.append(words[1].decode())
            client.close()
    finally:
        server.terminate()
        server.wait(timeout=120)
    dumps = [dump for dump in workdir.glob(f"{out.name}*") if dump.stat().st_size]
    if functions is not None:
        functions.update(by_function(dumps, names))
        instructions = sum(counted for _, counted in functions.values())
    else:
        instructions = sum(program_total(dump) for dump in dumps)
    if annotate:
        print(top_functions(dumps, annotate), flush=True)
    robots = sum(1 for entry in entries if entry.path == "/robots.txt")
    return len(entries) - robots, robots, instructions, seconds


def timed(checkout: Path, web: Web, seeds: Path, pages: int, workdir: Path) -> str:
    """One crawl of ``pages`` pages against a native redis-server: each library function's and each
    command's time per page (``--timed``), as a table."""
    import redis  # the crawler's own dependency

    port = free_port()
    server = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir), *server_arguments(), "--slowlog-log-slower-than", "0",
         "--slowlog-max-len", "10000000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_port("127.0.0.1", port, 60)
        env = dict(os.environ, PYTHONPATH=str(checkout))
        env.pop("REDIS_URL", None)
        before = len(web.entries())
        run = subprocess.run(crawl_command(seeds, port, pages, workdir), cwd=checkout, env=env,
                             capture_output=True, text=True, check=False)
        if run.returncode != 0:
            raise RuntimeError(f"crawl failed ({run.returncode}):\n{run.stderr[-3000:]}")
        entries = web.entries()[before:]
        fetched = max(1, sum(1 for entry in entries if entry.path != "/robots.txt"))
        client = redis.Redis(port=port)
        functions: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for entry in client.slowlog_get(10_000_000):
            words = entry["command"].split()
            if len(words) > 1 and words[0].lower() == b"fcall":
                functions[words[1].decode()][0] += 1
                functions[words[1].decode()][1] += entry["duration"]
        commands = client.info("commandstats")
        client.close()
    finally:
        server.terminate()
        server.wait(timeout=60)
    lines = [f"  {fetched} pages (robots.txt requests' work counted in); functions (SLOWLOG), per page:"]
    for name, (calls, usec) in sorted(functions.items(), key=lambda item: -item[1][1]):
        lines.append(f"  {name:<28} {calls / fetched:8.3f} calls {usec / fetched:8.2f} us")
    inner = sorted(((stats["usec"] / fetched, stats["calls"] / fetched, name.removeprefix("cmdstat_"))
                    for name, stats in commands.items()
                    if not name.startswith(("cmdstat_fcall", "cmdstat_slowlog", "cmdstat_function", "cmdstat_config",
                                            "cmdstat_info"))), reverse=True)
    lines.append(f"  commands (INFO commandstats; inside the functions too), per page: "
                 f"{sum(calls for _, calls, _ in inner):.1f} calls, {sum(usec for usec, _, _ in inner):.2f} us")
    lines += [f"  {name:<28} {calls:8.3f} calls {usec:8.2f} us" for usec, calls, name in inner[:20]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="redis-server instructions per request (callgrind)")
    parser.add_argument("--pages", type=int, default=3000, help="pages per crawl (CLOSESPIDER_PAGECOUNT)")
    parser.add_argument("--hosts", type=int, default=300,
                        help="hosts of the 5 KB web (few: robots.txt is a steady share of the requests)")
    parser.add_argument("--stages", action="store_true", help="also each stage's share (three more crawls each)")
    parser.add_argument("--annotate", type=int, default=0, metavar="N",
                        help="print the N functions of redis-server with the most instructions (callees counted "
                             "in), per crawl")
    parser.add_argument("--by-function", action="store_true",
                        help="also a crawl per checkout counted per library function (SLOWLOG on: a few %% more)")
    parser.add_argument("--timed", action="store_true",
                        help="also a crawl per checkout against a native redis-server: each function's and each "
                             "command's microseconds per page (SLOWLOG, INFO commandstats)")
    parser.add_argument("--checkout", type=Path, action="append", default=[],
                        help="another checkout to count the same way (repeatable)")
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_control", "callgrind_annotate"):
        if shutil.which(tool) is None:
            parser.error(f"{tool} is missing: apt-get install valgrind")
    checkouts = [ROOT, *(path.resolve() for path in args.checkout)]
    workdir = Path(tempfile.mkdtemp(prefix="redis-cost-"))
    spec = next(spec for name, spec in headline_webs(args.hosts).items() if name.startswith("5 KB"))
    web = Web(spec, workdir / "web.log")
    try:
        seeds = web.seeds(workdir / "seeds.txt")
        print(f"{'checkout':<24} {'run':<27} {'pages':>6} {'robots':>6} {'seconds':>7} {'k instructions/page':>20}")
        for checkout in checkouts:
            for label, settings in STAGES if args.stages else STAGES[:1]:
                pages, robots, instructions, seconds = crawl(checkout, web, seeds, args.pages, workdir, settings,
                                                            args.annotate)
                print(f"{str(checkout)[-24:]:<24} {label:<27} {pages:>6} {robots:>6} {seconds:>7.0f} "
                      f"{instructions / max(1, pages) / 1000:>20.1f}", flush=True)
            if args.by_function:
                functions: dict[str, tuple[int, int]] = {}
                pages, robots, instructions, seconds = crawl(checkout, web, seeds, args.pages, workdir, (),
                                                            functions=functions)
                print(f"{str(checkout)[-24:]:<24} {'functions (SLOWLOG on)':<27} {pages:>6} {robots:>6} "
                      f"{seconds:>7.0f} {instructions / max(1, pages) / 1000:>20.1f}", flush=True)
                for name, (calls, counted) in sorted(functions.items(), key=lambda item: -item[1][1]):
                    print(f"  {name:<28} {calls / max(1, pages):8.3f} calls/page {counted / max(1, pages) / 1000:10.1f} "
                          f"k instructions/page", flush=True)
            if args.timed:
                print(f"{str(checkout)[-24:]:<24} timed (native redis-server)", flush=True)
                print(timed(checkout, web, seeds, args.pages, workdir), flush=True)
    finally:
        web.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
