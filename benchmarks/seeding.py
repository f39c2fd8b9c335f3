"""Seeding at scale: `scrapy frontier seed` of a large file, its speed, memory and longest script call.

Writes ``--urls`` distinct URLs (about 95 characters each, over 20,000 hosts of
50 registered domains), starts a scratch redis-server with its slow log set to
record every command of 1 ms or more, and runs ``scrapy
frontier seed FILE --json`` as a user does. It prints seeds per second (the
command's own time, start-up included), the seed process's peak RSS (sampled
every 0.1 s), and, from Redis' slow log, the longest single command while
seeding (the enqueue script calls: ``FRONTIER_ENQUEUE_BATCH`` URLs each), with
the number of script calls and their median time. A second run of the same
command shows a re-run: every URL known, nothing added.

Usage: ``python benchmarks/seeding.py [--urls 1000000]``.
Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from scratch_redis import scratch_redis  # noqa: E402


def write_urls(path: Path, count: int) -> None:
    with path.open("w") as out:
        for i in range(count):
            out.write(f"http://site{i % 20_000}.example{i % 50}.com/archive/{i // 20_000}/articles/"
                      f"item-{i}.html?ref=seedlist&n={i * 7}\n")


def run_seed(seeds: Path, port: int) -> tuple[dict[str, object], float, float]:
    """The command's JSON report, its seconds, its peak RSS in MiB."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "scrapy", "frontier", "seed", str(seeds), "--json",
               "-s", f"REDIS_URL=redis://127.0.0.1:{port}/0", "-s", "FRONTIER_CRAWL_ID=seeding"]
    started = time.monotonic()
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watched = psutil.Process(process.pid)
    peak = 0
    while process.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.1)
    stdout, stderr = process.communicate()
    seconds = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"seed failed ({process.returncode}): {stderr[-3000:]}")
    return json.loads(stdout), seconds, peak / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description="scrapy frontier seed of a large file")
    parser.add_argument("--urls", type=int, default=1_000_000)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="seeding-"))
    seeds = workdir / "seeds.txt"
    write_urls(seeds, args.urls)
    print(f"{args.urls:,} URLs, {seeds.stat().st_size / 2**20:,.1f} MiB, "
          f"{seeds.stat().st_size / args.urls:.0f} bytes a line on average")
    with scratch_redis("--slowlog-log-slower-than", "1000", "--slowlog-max-len", "1000000") as (_, port):
        client = redis.Redis(port=port)
        for run in ("first run", "the same command again"):
            client.slowlog_reset()
            client.config_resetstat()
            report, seconds, peak = run_seed(seeds, port)
            slow = [e for e in client.slowlog_get(1_000_000)
                    if e["command"].split(b" ", 1)[0].upper() in (b"FCALL", b"EVALSHA", b"EVAL")]
            stats = client.info("commandstats")
            calls = stats.get("cmdstat_fcall") or stats.get("cmdstat_evalsha", {"calls": 0, "usec": 0})
            print(f"{run}: {report['added']:,} added, {report['known']:,} known, dropped {report['dropped']}; "
                  f"{seconds:.1f} s, {args.urls / seconds:,.0f} seeds/s; peak RSS {peak:,.0f} MiB")
            longest = max((e["duration"] for e in slow), default=0) / 1000
            print(f"  {calls['calls']:,} script calls, mean {calls['usec'] / max(calls['calls'], 1) / 1000:.2f} ms, "
                  f"longest {longest:.1f} ms" + ("" if slow else " (none took 1 ms)") +
                  f"; median of those of 1 ms or more {statistics.median(e['duration'] for e in slow) / 1000 if slow else 0:.2f} ms")
        print(f"used_memory after: {client.info('memory')['used_memory'] / 2**20:,.1f} MiB")


if __name__ == "__main__":
    main()
