"""Scrapy's own floor per request beside plain Scrapy and the crawler, alternated in one run.

The "floor" is a plain Scrapy spider that fetches a list of the 5 KB web's
page URLs (no link extraction, a callback that yields one small item),
with the settings of ``throughput.py``'s plain Scrapy run: what Scrapy's
engine, scheduler and HTTP handler cost per request before any parse. Its
difference to plain Scrapy follow-all is what the follow-all's parse and
link handling cost; the crawler's figure (as shipped) is beside them. Each
round runs the three in turn, 30 s each (``--seconds``); medians printed.
Not a test: the figures depend on the machine and its load.

Usage: ``python benchmarks/scrapy_floor.py [--rounds 3] [--seconds 30] [--urls 200000]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy

ROOT = Path(__file__).resolve().parent.parent


class FloorSpider(scrapy.Spider):
    """Run by ``scrapy runspider`` on this file: each URL of the list, fetched, no links followed."""

    name = "floor"

    def __init__(self, urls: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls_path = urls

    async def start(self) -> AsyncIterator[scrapy.Request]:
        with open(self.urls_path) as handle:
            for line in handle:
                yield scrapy.Request(line.strip(), callback=self.parse)

    def parse(self, response: scrapy.http.Response) -> Iterator[Any]:
        yield {"url": response.url, "status": response.status}


def main() -> None:
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import throughput

    from support.mockweb.web import host_ip, page_path

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--urls", type=int, default=200_000, help="page URLs in the floor spider's list")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="scrapy-floor-"))
    plain_cwd = workdir / "plain"  # no scrapy.cfg: Scrapy's defaults
    plain_cwd.mkdir()
    services = throughput.Services(workdir)
    spec = throughput.headline_webs(2000)["5 KB/12 links"]
    web = throughput.Web(spec, workdir / "web.log")
    try:
        seeds = web.seeds(workdir / "seeds.txt")
        sizes = [spec.pages(host) for host in range(spec.hosts)]
        lines = [f"http://{host_ip(host)}:{web.port}{page_path(page, spec.paths)}\n"
                 for page in range(max(sizes)) for host in range(spec.hosts) if page < sizes[host]][:args.urls]
        urls = workdir / "urls.txt"
        urls.write_text("".join(lines))
        floor = [sys.executable, "-m", "scrapy", "runspider", str(Path(__file__).resolve()), "-a", f"urls={urls}",
                 *throughput.plain_command(seeds, args.seconds)[7:]]
        medians: dict[str, list[float]] = {"crawler (defaults)": [], "plain Scrapy follow-all": [],
                                            "Scrapy floor (no parse)": []}
        for round_ in range(args.rounds):
            for name in medians:
                if name.startswith("crawler"):
                    command = throughput.crawler_command(seeds, services, f"floor-{uuid.uuid4().hex[:8]}", args.seconds)
                    commands = [(command, ROOT)]
                elif name.startswith("plain"):
                    commands = [(throughput.plain_command(seeds, args.seconds), plain_cwd)]
                else:
                    commands = [(floor, plain_cwd)]
                run = throughput.measure(name, web, services, commands, args.seconds, polite=name.startswith("crawler"))
                medians[name].append(run.tree_ms_per_page)
                print(f"round {round_ + 1}: {name:<26} {run.pages:>6} pages {run.pages_per_second:>6.0f} pages/s "
                      f"{run.tree_ms_per_page:6.3f} ms CPU per page (tree)", flush=True)
        for name, values in medians.items():
            print(f"{name:<26} median {statistics.median(values):.3f} ms per page "
                  f"(rounds: {', '.join(f'{value:.3f}' for value in values)})")
    finally:
        services.stop()
        web.stop()


if __name__ == "__main__":
    main()
