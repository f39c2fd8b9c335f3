"""How much this machine gives two CPU-bound Python processes over one.

The crawler's "two workers >= 1.7x one" target assumes two cores that do not
slow each other down. This runs a fixed CPU-bound workload shaped like a
crawler's per-page work (parse an HTML page with lexbor, extract and resolve
its links, hash them) in one process, then in two processes at once, for the
same time, and prints the work done per second and the ratio. Nothing else
runs: no Redis, no mock web. If two processes get less than 2x here, no
crawler can get 2x from two workers on this machine, and the shortfall is the
machine's (virtual CPUs sharing physical cores, noisy neighbours).

Usage: ``python benchmarks/machine.py [--seconds 10] [--repeat 2]``.
"""

from __future__ import annotations

import argparse
import hashlib
import multiprocessing
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selectolax.lexbor import LexborHTMLParser  # noqa: E402

from crawler.modules.linkextractor import LinkExtractor  # noqa: E402


def page() -> bytes:
    words = " ".join(f"word{i % 97}" for i in range(600))
    links = "".join(f'<li><a href="/p/{i}">page {i}</a></li>' for i in range(40))
    return f"<html><head><title>t</title></head><body><p>{words}</p><ul>{links}</ul></body></html>".encode()


def work(seconds: float, results: multiprocessing.Queue[int]) -> None:  # type: ignore[type-arg]
    body = page()
    extractor = LinkExtractor()
    deadline = time.monotonic() + seconds
    done = 0
    while time.monotonic() < deadline:
        for _ in range(20):
            links = extractor.extract_tree(LexborHTMLParser(body), "http://example.com/a").links
            for link in links:
                hashlib.sha1(link.encode()).digest()
        done += 20
    results.put(done)


def run(processes: int, seconds: float) -> float:
    results: multiprocessing.Queue[int] = multiprocessing.Queue()
    workers = [multiprocessing.Process(target=work, args=(seconds, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    total = sum(results.get() for _ in workers)
    for worker in workers:
        worker.join()
    return total / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    ones, twos = [], []
    for _ in range(args.repeat):
        ones.append(run(1, args.seconds))
        twos.append(run(2, args.seconds))
        print(f"1 process: {ones[-1]:,.0f} pages/s; 2 processes: {twos[-1]:,.0f} pages/s "
              f"({twos[-1] / ones[-1]:.2f}x)", flush=True)
    print(f"CPUs: {multiprocessing.cpu_count()}; best 1 process {max(ones):,.0f}/s, best 2 processes "
          f"{max(twos):,.0f}/s: 2 processes / 1 = {max(twos) / max(ones):.2f}x")


if __name__ == "__main__":
    main()
