"""The URL metadata store: bytes per URL in Redis at 100,000 URLs.

Records 100,000 fetches (1,000 hosts of 100 URLs, realistic field values:
ETag, Last-Modified, digests, SimHash) through the store's own script, then
sums ``MEMORY USAGE`` of the per-host hashes. Run against a redis-server with
its default configuration and with the embedded server's (larger listpacks).

Usage: ``python benchmarks/metadata.py [--urls 100000]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from redis.asyncio import Redis  # noqa: E402

from benchmarks.scratch_redis import scratch_redis  # noqa: E402
from crawler.crawlstate.shards import ShardRouter  # noqa: E402
from crawler.metadata.recordstore import UrlMetadataStore, UrlRecord, UrlState  # noqa: E402


async def measure(port: int, urls: int, per_host: int, label: str) -> None:
    client = Redis(host="127.0.0.1", port=port)
    store = UrlMetadataStore(client, ShardRouter("meta-bench"))
    await store.open()
    rng = random.Random(3)
    calls = []
    hosts = urls // per_host
    for i in range(urls):
        host = f"www.site{i % hosts}.example.com"
        url = f"https://{host}/section/{i}/article-{rng.randrange(10**6)}.html"
        record = UrlRecord(
            UrlState.FETCHED, 1_700_000_000 + i, 200, hashlib.sha1(url.encode()).digest()[:8],
            rng.getrandbits(64).to_bytes(8, "big"), f'"{rng.getrandbits(48):x}"', 1_699_999_000 + i,
            rng.randrange(2_000, 200_000), rng.randrange(10, 150),
        )
        calls.append(store.record(url, host, record))
        if len(calls) == 1000:
            await asyncio.gather(*calls)
            calls = []
    await asyncio.gather(*calls)
    total = 0
    encodings: dict[bytes, int] = {}
    for h in range(hosts):
        key = store.host_key(f"www.site{h}.example.com")
        total += int(await client.memory_usage(key, samples=0) or 0)
        encoding = await client.object("encoding", key)
        encodings[encoding] = encodings.get(encoding, 0) + 1
    print(f"{label}: {urls:,} URLs on {hosts:,} hosts: {total:,} bytes = {total / urls:.1f} bytes/URL "
          f"(encodings {encodings})")
    await store.close()
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--urls", type=int, default=100_000)
    parser.add_argument("--per-host", type=int, default=100)
    args = parser.parse_args()
    for label, extra in (("default Redis config", []),
                         ("embedded server config", ["--hash-max-listpack-entries", "512",
                                                     "--hash-max-listpack-value", "128"])):
        with scratch_redis(*extra, layout=False) as (_, port):
            asyncio.run(measure(port, args.urls, args.per_host, label))


if __name__ == "__main__":
    main()
