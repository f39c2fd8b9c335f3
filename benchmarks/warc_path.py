"""The WARC writer's CPU per page, in-process: what ``WarcPipeline`` does for each page, step by step.

For pages of ``throughput.py``'s 5 KB web (and 30 KB with ``--web 30``), as
the crawl archives them: the request, response and metadata records built
(digests, record ids), each serialised and gzipped (``encode``), appended to
a spool file (``fill``), and the file's CDXJ index line written when it is
finished. Each step is timed over ``--pages`` pages, best of ``--repeat``
loops (an in-process loop moves far less with the machine's load than a
crawl does, so a change of a few microseconds shows). Not a test.

Usage: ``python benchmarks/warc_path.py [--pages 2000] [--repeat 5] [--web 5|30]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from throughput import headline_webs  # noqa: E402

from crawler.warc.records import Fetch, RecordBuilder  # noqa: E402
from crawler.warc.writer import WarcFileWriter  # noqa: E402
from support.mockweb.web import render_page  # noqa: E402


def fetches(web: str, pages: int) -> list[Fetch]:
    spec = next(spec for name, spec in headline_webs(2000).items() if name.startswith(f"{web} KB"))
    out = []
    for n in range(pages):
        host, page = n % 2000, n // 2000
        body = render_page(spec, host, page, 8080)
        url = f"http://127.20.{host // 256}.{host % 256}:8080/p/{page}"
        out.append(Fetch(
            url=url, method="GET",
            request_headers=[("Host", url.split("/")[2]), ("User-Agent", "benchbot/1.0 (+https://example.org/bench)"),
                             ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
                             ("Accept-Encoding", "gzip, deflate, br")],
            status=200, reason="OK", protocol="HTTP/1.1",
            response_headers=[("Server", "mockweb"), ("Date", "Sat, 05 Dec 2026 08:00:00 GMT"),
                              ("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(body)))],
            payload=body, fetched_at=1_796_457_600.0 + n / 1000, ip_address=url.split("/")[2].split(":")[0],
            outlinks=[f"http://127.20.0.{i}:8080/p/{i}" for i in range(12)], fetch_duration=0.004,
        ))
    return out


def best(repeat: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--web", choices=("5", "30"), default="5")
    args = parser.parse_args()
    pages = fetches(args.web, args.pages)
    builder = RecordBuilder()
    spool = Path(tempfile.mkdtemp(prefix="warc-path-"))
    writer = WarcFileWriter(spool, "bench", 10**12, builder, {"software": "warc_path.py"})
    built = [builder.fetch_records(fetch, with_metadata=True) for fetch in pages]
    encoded = [writer.encode(records) for records in built]
    writer.fill(encoded)
    full = writer.detach()
    rows = {
        "build the records (digests, ids)": best(args.repeat, lambda: [builder.fetch_records(f, with_metadata=True)
                                                                         for f in pages]),
        "serialise and gzip them (encode)": best(args.repeat, lambda: [writer.encode(r) for r in built]),
        "append to the spool file (fill)": best(args.repeat, lambda: writer.fill(encoded)),
        "CDXJ index lines": best(args.repeat, lambda: [fields.line(offset, length, full.name)
                                                       for fields, offset, length in full.index]),
    }
    writer.close_if_open()
    full.handle.close()
    total = sum(rows.values())
    print(f"{args.pages:,} pages of the {args.web} KB web ({sum(len(f.payload) for f in pages) / len(pages):,.0f} "
          f"bytes on average), best of {args.repeat}:")
    for name, seconds in rows.items():
        print(f"  {1e6 * seconds / args.pages:7.2f} us/page  {name}")
    print(f"  {1e6 * total / args.pages:7.2f} us/page  in all")


if __name__ == "__main__":
    main()
