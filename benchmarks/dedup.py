"""Near-duplicate detection: precision and recall at distance 3, and lookups per second.

A generated corpus: base articles (500 words from a 20,000-word vocabulary),
near copies of each with the small edits that real near duplicates have
(a timestamp, a banner, a session token, all three), and unrelated articles.
Every document goes through the crawler's own path: HTML -> visible text ->
words -> SimHash of 3-shingles (crawler.dedup.text) -> the shared Redis index
(crawler.dedup.index, block permutation). The bases are indexed first; each
near copy should find its base; each unrelated article should find nothing.

``--fill N`` first indexes N pages of random SimHashes (as a crawl of N pages would have), then
prints redis-server's CPU per lookup of the corpus, so that the index's cost at a crawl's size is
seen, not only at its start.

``--count`` runs that redis-server under valgrind's callgrind and prints its instructions per page
over the fill's last sixth instead (a figure the machine's load does not move; the corpus is then
skipped; needs valgrind).

Usage: ``python benchmarks/dedup.py [--bases 2000] [--fill 0] [--count]`` (starts its own
redis-server, with the embedded server's settings).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from redis.asyncio import Redis  # noqa: E402
from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from benchmarks.redis_cost import control, program_total  # noqa: E402
from benchmarks.scratch_redis import scratch_redis  # noqa: E402
from benchmarks.throughput import wait_port  # noqa: E402
from crawler.crawlstate.encodings import server_arguments  # noqa: E402
from crawler.crawlstate.shards import ShardRouter  # noqa: E402
from crawler.dedup.index import DedupIndex  # noqa: E402
from crawler.dedup.text import content_simhash, visible_text, words  # noqa: E402
from crawler.warc.dates import micros_of_warc_date  # noqa: E402
from crawler.warc.digests import payload_digest  # noqa: E402
from support.mockweb import free_port  # noqa: E402

EDITS = ("timestamp", "banner", "token", "all three")
#: The pages' capture time (epoch microseconds, as the pipeline gives it).
CAPTURED = micros_of_warc_date("2026-11-30T00:00:00Z")


def article(rng: random.Random) -> list[str]:
    return [f"w{rng.randrange(20_000)}" for _ in range(500)]


def page(body_words: list[str], edit: str | None, rng: random.Random) -> bytes:
    extra = ""
    if edit in ("timestamp", "all three"):
        extra += f"<p>Last updated 2026-11-{rng.randrange(1, 29):02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}</p>"
    if edit in ("banner", "all three"):
        extra += f"<div class=banner>Sale ends soon offer {rng.randrange(100)} percent</div>"
    if edit in ("token", "all three"):
        extra += f"<span>session {rng.getrandbits(64):x}</span>"
    return f"<html><body>{extra}<p>{' '.join(body_words)}</p></body></html>".encode()


def fingerprint(html: bytes, min_block_words: int = 10) -> int | None:
    """The crawler's own path: parse, visible text, content words, SimHash (crawler.modules.text)."""
    tree = LexborHTMLParser(html)
    return content_simhash(tree, visible_text(tree), min_block_words=min_block_words)


def within(pairs: list[tuple[bytes, bytes]], min_block_words: int, distance: int = 3) -> float:
    """The share of (page, near copy) pairs whose fingerprints are within ``distance`` (no index)."""
    near = sum((fingerprint(a, min_block_words) ^ (fingerprint(b, min_block_words) or 0)).bit_count() <= distance
               for a, b in pairs if fingerprint(a, min_block_words) is not None)
    return near / len(pairs)


def breakdown(base_pages: list[bytes], copies: list[tuple[int, bytes]], rng: random.Random) -> None:
    """Rows beside the headline: boilerplate removal off, and edits inside the article's own text."""
    pairs = [(base_pages[b], html) for b, html in copies]
    print(f"  breakdown, boilerplate removal off (DEDUP_MIN_BLOCK_WORDS=0): within 3 bits "
          f"{within(pairs, 0):.3f} of the near copies (version 1 of the fingerprint: 0.785)")
    for changed in (1, 3, 10):
        edited = []
        for b in range(min(500, len(base_pages))):
            text = words_of(base_pages[b])
            for _ in range(changed):
                text[rng.randrange(len(text))] = f"edit{rng.randrange(10**6)}"
            edited.append((base_pages[b], page(text, None, rng)))
        print(f"  breakdown, {changed} word(s) of the article itself changed: within 3 bits {within(edited, 10):.3f}")


async def fill(index: DedupIndex, start: int, end: int, rng: random.Random) -> None:
    """Index pages ``start`` to ``end`` of random SimHashes (each a distinct payload), in batches as a
    crawl's pipeline sends them."""
    for batch in range(start, end, 1000):
        await asyncio.gather(*[
            index.check(f"http://fill/{n}", "fill", payload_digest(b"fill %d" % n), CAPTURED,
                        rng.getrandbits(64))
            for n in range(batch, min(end, batch + 1000))
        ])


async def run(bases: int, port: int, server: psutil.Process, filled: int) -> None:
    rng = random.Random(42)
    client = Redis(host="127.0.0.1", port=port)
    for _ in range(100):
        try:
            await client.ping()
            break
        except OSError:
            await asyncio.sleep(0.05)
    await client.flushall()
    index = DedupIndex(client, ShardRouter("dedup-bench"), 3)
    await index.open()
    base_pages = [page(article(rng), None, rng) for _ in range(bases)]
    copies = [(b, page(words_of(base_pages[b]), EDITS[i % 4], rng)) for i, b in enumerate(range(bases))]
    unrelated = [page(article(rng), None, rng) for _ in range(bases)]

    started = time.process_time()
    base_hashes = [fingerprint(html) for html in base_pages]
    copy_hashes = [fingerprint(html) for _, html in copies]
    unrelated_hashes = [fingerprint(html) for html in unrelated]
    per_doc = (time.process_time() - started) / (3 * bases)

    async def check_all(items: list[tuple[str, bytes, int | None]]) -> list[object]:
        return await asyncio.gather(*[
            index.check(url, url.split("/")[2], payload_digest(body), CAPTURED, sh)
            for url, body, sh in items
        ])

    if filled:
        # The last sixth of the fill, measured: redis-server's CPU per page at about that size.
        await fill(index, 0, filled - filled // 6, rng)
        server_cpu = sum(server.cpu_times()[:2])
        await fill(index, filled - filled // 6, filled, rng)
        server_cpu = sum(server.cpu_times()[:2]) - server_cpu
        print(f"fill: redis-server {1e6 * server_cpu / (filled // 6):.1f} us CPU per page (check + record) "
              f"while the index grew from {filled - filled // 6:,} to {filled:,} pages")
    await check_all([(f"http://b/{i}", html, sh) for i, (html, sh) in enumerate(zip(base_pages, base_hashes))])
    wall = time.perf_counter()
    server_cpu = sum(server.cpu_times()[:2])
    copy_verdicts = await check_all([(f"http://c/{i}", html, sh) for i, ((_, html), sh) in
                                     enumerate(zip(copies, copy_hashes))])
    unrelated_verdicts = await check_all([(f"http://u/{i}", html, sh) for i, (html, sh) in
                                          enumerate(zip(unrelated, unrelated_hashes))])
    elapsed = time.perf_counter() - wall
    server_cpu = sum(server.cpu_times()[:2]) - server_cpu
    true_positive = sum(1 for (b, _), v in zip(copies, copy_verdicts) if v.near_duplicate_of == f"http://b/{b}")
    wrong_match = sum(1 for (b, _), v in zip(copies, copy_verdicts)
                      if v.near_duplicate_of not in (None, f"http://b/{b}"))
    false_positive = sum(1 for v in unrelated_verdicts if v.near_duplicate_of is not None) + wrong_match
    precision = true_positive / max(true_positive + false_positive, 1)
    recall = true_positive / len(copies)
    by_edit = {edit: 0 for edit in EDITS}
    for i, ((b, _), v) in enumerate(zip(copies, copy_verdicts)):
        if v.near_duplicate_of == f"http://b/{b}":
            by_edit[EDITS[i % 4]] += 1
    print(f"corpus: {bases} articles of 500 words, {bases} near copies ({', '.join(EDITS)}), {bases} unrelated")
    print(f"SimHash (content blocks of 10+ words, else all visible text; 3-shingles): "
          f"{per_doc * 1000:.2f} ms CPU per document (HTML parse included)")
    print(f"distance <= 3: precision {precision:.4f}, recall {recall:.4f} "
          f"(found {true_positive}/{len(copies)}; false positives {false_positive})")
    print("  recall by edit: " + ", ".join(f"{e} {n / (len(copies) / 4):.3f}" for e, n in by_edit.items()))
    print(f"lookups: {2 * bases / elapsed:,.0f} per second (check + record, one process, batched); "
          f"redis-server {1e6 * server_cpu / (2 * bases):.1f} us CPU per lookup, the index holding "
          f"{filled + bases:,} pages")
    breakdown(base_pages, copies, rng)
    await index.close()
    await client.aclose()


def words_of(html: bytes) -> list[str]:
    return words(visible_text(LexborHTMLParser(html)), 10_000)


async def counted_fill(port: int, server: subprocess.Popen[bytes], filled: int) -> None:
    """``--count``: the fill with redis-server's instructions counted over its last sixth."""
    client = Redis(host="127.0.0.1", port=port)
    index = DedupIndex(client, ShardRouter("dedup-bench"), 3)
    await index.open()
    rng = random.Random(42)
    await fill(index, 0, filled - filled // 6, rng)
    control(server, "-i", "on")
    await fill(index, filled - filled // 6, filled, rng)
    control(server, "-i", "off")
    control(server, "-d", "fill")
    await index.close()
    await client.aclose()


def count(filled: int) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="dedup-count-"))
    port = free_port()
    out = workdir / "callgrind.out"
    server = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir), *server_arguments()],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_port("127.0.0.1", port, 60)
        asyncio.run(counted_fill(port, server, filled))
    finally:
        server.terminate()
        server.wait(timeout=120)
    instructions = sum(program_total(dump) for dump in workdir.glob("callgrind.out*") if dump.stat().st_size)
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"fill: redis-server {instructions / (filled // 6) / 1000:.1f} k instructions per page (check + record) "
          f"while the index grew from {filled - filled // 6:,} to {filled:,} pages")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bases", type=int, default=2000)
    parser.add_argument("--fill", type=int, default=0, help="pages of random SimHashes indexed first")
    parser.add_argument("--count", action="store_true",
                        help="count redis-server's instructions over the fill's last sixth (callgrind)")
    args = parser.parse_args()
    if args.count:
        if args.fill < 6:
            parser.error("--count measures the fill: give --fill")
        count(args.fill)
        return
    with scratch_redis() as (process, port):
        asyncio.run(run(args.bases, port, psutil.Process(process.pid), args.fill))


if __name__ == "__main__":
    main()
