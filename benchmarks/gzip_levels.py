"""CPU and size of one gzip member per page, by library and level (``WARC_GZIP_LIBRARY``, ``WARC_GZIP_LEVEL``).

Pages: the two headline mock webs of ``throughput.py`` (5 KB and 30 KB pages)
and, with ``--html DIR`` (repeatable), real HTML files found under those
directories (at most ``--max-files``, 10 KB to 400 KB each, in sorted order).
Each page is compressed alone, as the WARC writer compresses each record; the
CPU is the best of three timed passes (``time.process_time``). Not a test.

Usage: ``python benchmarks/gzip_levels.py [--html DIR ...] [--max-files 80]``.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import headline_webs  # noqa: E402

from crawler.warc.gzip import LEVELS, Gzip, GzipLibrary  # noqa: E402
from support.mockweb import render_page  # noqa: E402


def html_files(directories: list[Path], limit: int) -> list[bytes]:
    found = sorted(path for directory in directories for path in directory.rglob("*.html")
                   if 10_000 <= path.stat().st_size <= 400_000)
    return [path.read_bytes() for path in found[:limit]]


def measure(pages: list[bytes], compress: Gzip) -> tuple[float, float]:
    """(ms of CPU per page, compressed size / raw size)."""
    size = sum(len(compress(page)) for page in pages)
    assert gzip.decompress(compress(pages[0])) == pages[0]
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        rounds = 0
        while time.process_time() - started < 0.5:
            for page in pages:
                compress(page)
            rounds += 1
        best = min(best, (time.process_time() - started) / rounds / len(pages))
    return best * 1000, size / sum(map(len, pages))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--html", type=Path, action="append", default=[])
    parser.add_argument("--max-files", type=int, default=80)
    args = parser.parse_args()
    corpora = {name: [render_page(spec, host, page, 8000) for host in range(10) for page in range(5)]
               for name, spec in headline_webs(10).items()}
    if args.html:
        real = html_files(args.html, args.max_files)
        if real:
            corpora[f"real HTML ({len(real)} files)"] = real
    default = Gzip()
    for name, pages in corpora.items():
        mean = sum(map(len, pages)) / len(pages) / 1024
        print(f"\n{name}: {len(pages)} pages, {mean:.1f} KB on average")
        print("| library | level | CPU ms/page | size / raw |")
        print("|---|---|---|---|")
        for library in GzipLibrary:
            low, high, _ = LEVELS[library]
            for level in range(low, high + 1):
                compress = Gzip(library, level)
                ms, ratio = measure(pages, compress)
                mark = " (default)" if compress == default else ""
                print(f"| {library.value}{mark} | {level} | {ms:.4f} | {ratio:.3f} |", flush=True)


if __name__ == "__main__":
    main()
