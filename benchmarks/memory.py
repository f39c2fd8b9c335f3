"""Redis bytes per crawled page and per queued URL, by structure, over a long crawl.

Crawls the mock web with ``scrapy crawl web`` as shipped (the embedded Redis,
the full pipeline) but for the politeness delays (0: this measures memory,
not politeness), on a web whose URLs look like the real web's (``paths="real"``:
60-100 characters, several segments, some query strings). While it runs it
samples the embedded Redis: ``used_memory`` every ``--sample`` seconds, and
every key's ``MEMORY USAGE`` by key family (the schema's names, see
``crawler/crawlstate/keys.py`` and ``crawler/crawlstate/schema.py``) every ``--families``
seconds. It prints:

* the samples (pages crawled, URLs queued, used_memory);
* per family: its bytes at the end, what it grows with (crawled pages,
  queued URLs, hosts, or fixed), and its slope over the last half of the
  run: bytes per crawled page for the page families, bytes per queued URL
  for the queue families (fixed costs, such as the Bloom filter, apart);
* the totals: bytes per crawled page, per queued URL, and the fixed bytes;
  and the projection for 100 million and 1 billion pages.

Usage: ``python benchmarks/memory.py [--pages 1000000] [--hosts 2000] [--json out.json]``
(``--pages 100000`` for a short run). Not a test: the figures depend on the
web's shape; the pages of the run should be well past the start-up (a
slope, not a start-up figure).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from benchmarks.throughput import Web  # noqa: E402
from crawler.crawlstate import keys as frontier_keys  # noqa: E402
from crawler.redisconn.embedded import EmbeddedRedisServer  # noqa: E402
from support.mockweb import WebSpec  # noqa: E402

#: What each key family grows with, for a layout whose schema does not say it (layout 1, before the
#: compact layout): "page" (crawled pages), "queued" (queued URLs), "host", "fixed".
LAYOUT1_GROWS = {
    "bloom": "fixed", "inlinks": "fixed", "seen_exact": "page", "requests": "queued", "front": "queued",
    "queue": "queued", "due": "page", "due_requests": "page", "urlmeta": "page", "digest": "page",
    "block": "page", "simhash_url": "page", "dead": "page", "dead_info": "page",
}

#: The growth classes, in the order they are printed.
CLASSES = ("page", "queued", "host", "fixed", "crawl")


def schema_families() -> list[tuple[str, str, str]]:
    """(namespace, suffix, family) of every key the schema names, longest suffix first."""
    out: list[tuple[str, str, str]] = []
    for table_name in ("SHARD_KEYS", "CRAWL_KEYS"):
        for name, key in getattr(frontier_keys, table_name).items():
            out.append(("frontier", key.suffix, name))
    out.sort(key=lambda entry: -len(entry[1]))
    return out


def grows_with(family: str) -> str:
    for table_name in ("SHARD_KEYS", "CRAWL_KEYS"):
        key = getattr(frontier_keys, table_name).get(family)
        if key is not None and hasattr(key, "grows"):
            return str(key.grows)
    return LAYOUT1_GROWS.get(family, "crawl")


def family_of(key: str, families: list[tuple[str, str, str]]) -> str:
    namespace, _, rest = key.partition(":")
    if rest.startswith("{"):
        rest = rest.split("}:", 1)[-1]
    for space, suffix, family in families:
        if space == namespace and (rest == suffix or (suffix.endswith(":") and rest.startswith(suffix))):
            return family
    return "other:" + rest.split(":", 1)[0]


@dataclass
class Sample:
    seconds: float
    pages: int
    queued: int
    used_memory: int
    families: dict[str, int] = field(default_factory=dict)
    keys: dict[str, int] = field(default_factory=dict)


class Sampler(threading.Thread):
    """Samples the crawl's Redis and the mock web's log while the crawl runs."""

    def __init__(self, socket_path: Path, log: Path, crawl_id: str, every: float, families_every: float) -> None:
        super().__init__(daemon=True)
        self.socket_path = socket_path
        self.log = log
        self.crawl_id = crawl_id
        self.every = every
        self.families_every = families_every
        self.samples: list[Sample] = []
        self.stop_event = threading.Event()
        self.pages = 0
        self._log_offset = 0
        self._families = schema_families()
        self.started = time.monotonic()

    def count_pages(self) -> int:
        """Responses the mock web logged so far (robots.txt included)."""
        if not self.log.exists():
            return self.pages
        with open(self.log, "rb") as handle:
            handle.seek(self._log_offset)
            data = handle.read()
        complete = data.rfind(b"\n") + 1
        self.pages += data.count(b"\n", 0, complete)
        self._log_offset += complete
        return self.pages

    def client(self) -> redis.Redis | None:
        if not self.socket_path.exists():
            return None
        return redis.Redis(unix_socket_path=str(self.socket_path), socket_timeout=120)

    def queued(self, client: redis.Redis) -> int:
        total = 0
        for key in client.scan_iter(match=f"frontier:{{{self.crawl_id}.*}}:queued", count=1000):
            total += int(client.get(key) or 0)
        return total

    def by_family(self, client: redis.Redis) -> tuple[dict[str, int], dict[str, int]]:
        sizes: dict[str, int] = defaultdict(int)
        counts: dict[str, int] = defaultdict(int)
        batch: list[bytes] = []

        def flush() -> None:
            pipe = client.pipeline(transaction=False)
            for key in batch:
                pipe.memory_usage(key, samples=64)
            for key, size in zip(batch, pipe.execute()):
                family = family_of(key.decode("utf-8", "replace"), self._families)
                sizes[family] += int(size or 0)
                counts[family] += 1
            batch.clear()

        for key in client.scan_iter(count=5000):
            batch.append(key)
            if len(batch) >= 5000:
                flush()
        if batch:
            flush()
        return dict(sizes), dict(counts)

    def sample(self, families: bool) -> None:
        client = self.client()
        if client is None:
            return
        try:
            info = client.info("memory")
            sample = Sample(time.monotonic() - self.started, self.count_pages(), self.queued(client),
                            int(info["used_memory"]))
            if families:
                sample.families, sample.keys = self.by_family(client)
            self.samples.append(sample)
            print(f"{sample.seconds:7.0f} s {sample.pages:>9,} pages {sample.queued:>9,} queued "
                  f"{sample.used_memory / 1e6:9.1f} MB used_memory{' (families sampled)' if families else ''}",
                  flush=True)
        except redis.RedisError as exc:
            print(f"sample failed: {exc}", flush=True)
        finally:
            client.close()

    def run(self) -> None:
        last_families = 0.0
        while not self.stop_event.wait(self.every):
            self.count_pages()
            now = time.monotonic()
            families = now - last_families >= self.families_every
            self.sample(families)
            if families:
                last_families = now

    def final(self) -> None:
        """One last sample with families (the crawl has stopped fetching; its Redis still runs)."""
        self.sample(True)


def slope(samples: list[Sample], value: Any, over: Any) -> float | None:
    """Least-squares slope of value(sample) against over(sample)."""
    points = [(over(s), value(s)) for s in samples]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    if var == 0:
        return None
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / var


def report(samples: list[Sample], hosts: int) -> dict[str, Any]:
    with_families = [s for s in samples if s.families]
    last = with_families[-1]
    half_pages = last.pages / 2
    second_half = [s for s in with_families if s.pages >= half_pages] or with_families[-2:]
    if len(second_half) < 2:
        second_half = with_families[-2:]
    names = sorted({name for s in with_families for name in s.families}, key=lambda n: -last.families.get(n, 0))
    rows: list[dict[str, Any]] = []
    per_class: dict[str, float] = defaultdict(float)
    level_class: dict[str, float] = defaultdict(float)
    for name in names:
        grows = grows_with(name)
        end = last.families.get(name, 0)
        row: dict[str, Any] = {"family": name, "grows": grows, "bytes": end, "keys": last.keys.get(name, 0)}
        if grows == "page":
            rate = slope(second_half, lambda s, n=name: s.families.get(n, 0), lambda s: s.pages)
            row["per_page"] = rate
            row["per_page_average"] = end / last.pages if last.pages else None
            per_class["page"] += rate or 0.0
        elif grows == "queued":
            row["per_queued"] = end / last.queued if last.queued else None
            rate = slope(second_half, lambda s, n=name: s.families.get(n, 0), lambda s: s.queued)
            row["per_queued_slope"] = rate
            level_class["queued"] += end
        elif grows == "host":
            row["per_host"] = end / hosts
            level_class["host"] += end
        else:
            level_class[grows] += end
        rows.append(row)
    used_slope = slope(second_half, lambda s: s.used_memory, lambda s: s.pages)
    per_queued = level_class["queued"] / last.queued if last.queued else 0.0
    queued_growth = slope(second_half, lambda s: s.queued, lambda s: s.pages) or 0.0
    return {
        "pages": last.pages, "queued": last.queued, "used_memory": last.used_memory,
        "families_total": sum(last.families.values()),
        "rows": rows,
        "per_page": per_class["page"],
        "per_queued": per_queued,
        "fixed": level_class["fixed"],
        "host_total": level_class["host"],
        "crawl_total": level_class["crawl"],
        "used_memory_slope_per_page": used_slope,
        "queued_per_page_slope": queued_growth,
        "second_half": [second_half[0].pages, second_half[-1].pages],
    }


def bloom_bytes(urls: float, rate: float = 0.01) -> float:
    """The Bloom filter for ``urls`` at ``rate`` with the shipped hash count (``SEEN_BLOOM_HASHES``)."""
    from crawler.defaults import SEEN_BLOOM_HASHES
    from crawler.frontier.seen import bits_for

    return bits_for(int(urls), rate, SEEN_BLOOM_HASHES) / 8


def print_report(result: dict[str, Any], samples: list[Sample]) -> None:
    print()
    print(f"{'pages':>10} {'queued':>10} {'used_memory MB':>15}")
    for s in samples:
        print(f"{s.pages:>10,} {s.queued:>10,} {s.used_memory / 1e6:>15.1f}{'  *' if s.families else ''}")
    print("(* key families sampled)")
    print()
    low, high = result["second_half"]
    print(f"By key family at the end ({result['pages']:,} pages crawled, {result['queued']:,} URLs queued); slopes "
          f"over the last half ({low:,} -> {high:,} pages):")
    print(f"{'family':<22} {'grows with':<10} {'keys':>9} {'MB':>9} {'B/page (slope)':>15} {'B/page (avg)':>13} "
          f"{'B/queued URL':>13}")
    for row in result["rows"]:
        per_page = f"{row['per_page']:.1f}" if row.get("per_page") is not None else ""
        average = f"{row['per_page_average']:.1f}" if row.get("per_page_average") is not None else ""
        per_queued = f"{row['per_queued']:.1f}" if row.get("per_queued") is not None else ""
        print(f"{row['family']:<22} {row['grows']:<10} {row['keys']:>9,} {row['bytes'] / 1e6:>9.2f} {per_page:>15} "
              f"{average:>13} {per_queued:>13}")
    print()
    print(f"per crawled page (slope over the last half, every page family): {result['per_page']:.1f} bytes")
    print(f"per queued URL (queue families / queued URLs at the end): {result['per_queued']:.1f} bytes")
    print(f"fixed: {result['fixed'] / 1e6:.1f} MB; per host: {result['host_total'] / 1e6:.1f} MB in all; "
          f"crawl-wide (bounded): {result['crawl_total'] / 1e6:.1f} MB")
    if result["used_memory_slope_per_page"] is not None:
        print(f"used_memory over the last half: {result['used_memory_slope_per_page']:.1f} bytes per crawled page "
              f"(queued URLs grew {result['queued_per_page_slope']:.2f} per page crawled meanwhile); "
              f"MEMORY USAGE of all keys {result['families_total'] / 1e6:.1f} MB of used_memory "
              f"{result['used_memory'] / 1e6:.1f} MB")
    print()
    print("Projection (bytes = fixed + per page x pages + per queued URL x queued; Bloom filter sized for the "
          "URLs at 1%; queued URLs taken equal to the pages crawled):")
    for pages in (100_000_000, 1_000_000_000):
        total = bloom_bytes(2 * pages) + result["per_page"] * pages + result["per_queued"] * pages
        print(f"  {pages:>13,} pages + {pages:,} queued: {total / 1e9:8.1f} GB "
              f"({result['per_page'] * pages / 1e9:.1f} GB pages, {result['per_queued'] * pages / 1e9:.1f} GB queue, "
              f"{bloom_bytes(2 * pages) / 1e9:.1f} GB Bloom filter for {2 * pages:,} URLs)")


def main() -> None:
    parser = argparse.ArgumentParser(description="Redis bytes per crawled page and per queued URL")
    parser.add_argument("--pages", type=int, default=1_000_000, help="pages to crawl (responses)")
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--pages-per-host", type=int, default=1000)
    parser.add_argument("--sample", type=float, default=15.0, help="seconds between used_memory samples")
    parser.add_argument("--families", type=float, default=120.0, help="seconds between key-family samples")
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (crawl data, logs)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="an extra crawler setting")
    args = parser.parse_args()

    spec = WebSpec(hosts=args.hosts, sizes=f"uniform:{args.pages_per_host}", fanout=4, nav=6, cross=2,
                   filler_words=690, latency_ms=(5.0, 10.0, 20.0, 30.0), paths="real")
    workdir = Path(tempfile.mkdtemp(prefix="crawler-memory-"))
    crawl_id = f"memory-{uuid.uuid4().hex[:6]}"
    data_dir = workdir / "crawl-data"
    socket_path = EmbeddedRedisServer(data_dir / crawl_id / "redis").socket_path
    print(f"web: {spec.hosts} hosts x {args.pages_per_host} pages, URLs like the real web's; crawl {crawl_id}; "
          f"work directory {workdir}", flush=True)
    web = Web(spec, workdir / "web.log")
    sampler = Sampler(socket_path, workdir / "web.log", crawl_id, args.sample, args.families)
    try:
        seeds = web.seeds(workdir / "seeds.txt")
        command = [
            sys.executable, "-m", "scrapy", "crawl", "web", "-a", f"seeds={seeds}",
            "-s", f"FRONTIER_CRAWL_ID={crawl_id}", "-s", f"CRAWL_DATA_DIR={data_dir}",
            "-s", "LOG_LEVEL=INFO",
            "-s", "FRONTIER_MIN_DELAY=0", "-s", "FRONTIER_DELAY_FACTOR=0",
            "-s", "ALLOW_PRIVATE_NETWORKS=True", "-s", "USER_AGENT=benchbot/1.0 (+https://example.org/bench)",
            "-s", "REPORT_ENABLED=False",
        ]
        for extra in args.set:
            command += ["-s", extra]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        env.pop("REDIS_URL", None)
        log = open(workdir / "crawl.log", "wb")  # noqa: SIM115 - open while the crawl runs
        crawl = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
        sampler.start()
        # The last sample is taken while the crawl still runs (its embedded Redis stops with it),
        # once the web has answered --pages requests; then the crawl is stopped.
        while crawl.poll() is None and sampler.pages < args.pages:
            time.sleep(1)
        sampler.stop_event.set()
        sampler.join()
        if crawl.poll() is None:
            sampler.final()
            os.killpg(crawl.pid, signal.SIGINT)
        crawl.wait(timeout=600)
        log.close()
        if sampler.pages < args.pages:
            print((workdir / "crawl.log").read_text(errors="replace")[-3000:])
    finally:
        if crawl.poll() is None:
            os.killpg(crawl.pid, signal.SIGTERM)
        web.stop()
    result = report(sampler.samples, args.hosts)
    print_report(result, sampler.samples)
    if args.json:
        Path(args.json).write_text(json.dumps({"result": result, "samples": [s.__dict__ for s in sampler.samples]},
                                              indent=1))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
