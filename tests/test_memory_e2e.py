"""A crawl within a small Redis: bounded by its memory limit, degrading visibly, losing nothing.

A redis-server with ``maxmemory 64mb`` (noeviction) holds the whole crawl: the
Bloom filter and in-link sketch are sized within the limit (the default
``SEEN_EXPECTED_URLS`` of 100 million would need ~125 MiB), and near the limit
the crawl admits fewer new URLs instead of meeting an out-of-memory error.
``FRONTIER_PAGE_BYTES`` (what a queued URL will take once fetched) is set
high so that a short crawl reaches the admission thresholds: the policy counts
``used + queued x page bytes``, as it does on a long crawl with the default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crawler.crawlstate.compact import LinearHash
from crawler.crawlstate.encodings import server_arguments
from crawler.crawlstate.keys import ShardKeys
from support.mockweb import WebSpec
from tests.conftest import RedisServer, run_crawl, stat

SPEC = WebSpec(hosts=40, sizes="uniform:150", fanout=6, nav=3, cross=3, latency_ms=(2, 6))
LIMIT = 64 * 2**20


@pytest.fixture(scope="module")
def small_redis(tmp_path_factory: pytest.TempPathFactory) -> Any:
    # The settings docs/sizing.md gives an external server.
    options = ["--maxmemory", str(LIMIT), "--maxmemory-policy", "noeviction", *server_arguments()]
    server = RedisServer(Path(tmp_path_factory.mktemp("small-redis")), options=tuple(options))
    server.start()
    yield server
    server.stop()


def test_a_crawl_within_64_mb_runs_to_its_end_and_loses_nothing_it_admitted(
    small_redis: RedisServer, mockweb_factory: Any, tmp_path: Path
) -> None:
    web = mockweb_factory(SPEC)
    crawl_id = "small"
    result = run_crawl(
        "-a", f"urls={web.url(0)},{web.url(10)},{web.url(20)},{web.url(30)}",
        settings={
            "REDIS_URL": small_redis.url, "FRONTIER_CRAWL_ID": crawl_id, "CRAWL_DATA_DIR": tmp_path / "data",
            "SEEN_EXPECTED_URLS": 100_000_000, "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
            "FRONTIER_PAGE_BYTES": 48 * 1024, "FRONTIER_MEMORY_CHECK_INTERVAL": 0.2, "CONCURRENT_REQUESTS": 16,
            "PROGRESS_INTERVAL": 2,
        },
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stats["finish_reason"] == "finished"
    for never in ("OutOfMemoryError", "Traceback", "Frontier Redis error", "Scheduler close failure"):
        assert never not in result.stderr, never
    client = small_redis.client()
    info = client.info("memory")
    assert info["maxmemory"] == LIMIT and info["used_memory_peak"] < LIMIT
    # The Bloom filter was sized within the limit (SEEN_BLOOM_SHARE of it), not for 100 million URLs.
    meta = client.hgetall(ShardKeys(crawl_id).crawl_key("meta"))
    assert int(meta[b"bloom_bits"]) // 8 <= LIMIT // 8
    # Near the limit it admitted fewer URLs, counted them, and said why in the log (the progress
    # line's wording is tested in test_ops).
    refused = stat(result, "frontier/refused/memory")
    print(f"64 MB Redis: {stat(result, 'frontier/enqueued'):,} URLs admitted and fetched, {refused:,} refused; "
          f"used_memory peak {info['used_memory_peak'] / 2**20:.1f} MiB; Bloom filter "
          f"{int(meta[b'bloom_bits']) // 8 / 2**20:.1f} MiB")
    assert refused > 0
    assert "Redis memory committed at" in result.stderr
    assert result.stats["redis/memory_limit"] == LIMIT
    # Nothing admitted was lost: every URL enqueued was fetched (a record each) and nothing is left
    # queued or leased.
    keys = ShardKeys(crawl_id)
    records = LinearHash.parse(client.get(keys.lh("url"))).entries
    assert stat(result, "frontier/enqueued") == records == stat(result, "metadata/recorded") > 0
    assert int(client.get(keys.queued) or 0) == 0 and client.zcount(keys.leases, "-inf", "(inf") == 0
    assert client.hlen(keys.dead) == 0
    # Some of the web was not crawled: the limit, not the web, ended the crawl.
    assert records < sum(SPEC.pages(h) for h in range(SPEC.hosts))


@pytest.mark.parametrize(("options", "setting", "words"), [
    # 16 MB cannot hold a Bloom filter, the in-link sketch and room to work: the figure it needs.
    (("--maxmemory", "16mb", "--maxmemory-policy", "noeviction"), "REDIS_MEMORY_LIMIT",
     ("too small for this crawl", "need a limit of at least")),
    # A server that evicts keys when full would lose queued URLs and records in silence.
    (("--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"), "REDIS_URL",
     ("maxmemory-policy allkeys-lru", "noeviction")),
])
def test_a_redis_the_crawl_cannot_live_in_is_refused_at_start_in_one_line(
    options: tuple[str, ...], setting: str, words: tuple[str, ...], tmp_path: Path
) -> None:
    server = RedisServer(tmp_path / "redis", options=options)
    server.start()
    try:
        result = run_crawl("-a", "urls=http://127.0.0.1:9/", settings={
            "REDIS_URL": server.url, "FRONTIER_CRAWL_ID": "refused", "CRAWL_DATA_DIR": tmp_path / "data",
            "SEEN_EXPECTED_URLS": 100_000_000,
        }, timeout=120)
    finally:
        server.stop()
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if setting in line]
    assert lines, result.stderr[-3000:]
    assert all(word in lines[0] for word in words), lines[0]
    assert "Traceback" not in result.stderr
