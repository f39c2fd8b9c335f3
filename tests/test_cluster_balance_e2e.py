"""A crawl's Redis state spread evenly over a 3-primary Redis Cluster.

Two workers crawl 100,000+ pages with 16 frontier shards on a cluster of
their own (created with equal slot ranges, as ``redis-cli --cluster create``
does). Every structure that grows with the crawl lives in the shards (URL
records, the seen set, the recrawl schedule, the duplicate index split by
digest and SimHash block), and the shards' tags are placed evenly over the
slot space, so each primary's ``used_memory`` ends within 1.5x of the mean.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from crawler.crawlstate.compact import LinearHash
from crawler.crawlstate.shards import ShardRouter
from support.mockweb import WebSpec
from tests.conftest import RedisClusterServers, RunningCrawl, stat

#: 600 hosts of 170 pages: 102,000 pages.
SPEC = WebSpec(hosts=600, sizes="uniform:170", fanout=8, nav=3, cross=4, filler_words=120, paths="real")
SHARDS = 16


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    cluster = RedisClusterServers(tmp_path_factory.mktemp("balance-cluster"))
    cluster.start()
    yield cluster
    cluster.stop()


def test_each_primary_holds_an_even_share_after_100k_pages(
    own_cluster: RedisClusterServers, mockweb_factory: Any, tmp_path: Path
) -> None:
    web = mockweb_factory(SPEC)
    crawl_id = "balance"
    seeds = ",".join(web.url(h) for h in range(0, SPEC.hosts, 25))
    settings = {
        "REDIS_CLUSTER_NODES": own_cluster.nodes, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_SHARDS": SHARDS,
        "CRAWL_DATA_DIR": tmp_path / "data", "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
        "CONCURRENT_REQUESTS": 64, "SEEN_EXPECTED_URLS": 1_000_000, "PROGRESS_INTERVAL": 30,
    }
    workers = [RunningCrawl("-a", f"urls={seeds}", settings=settings) for _ in range(2)]
    results = [worker.finish(timeout=900) for worker in workers]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    pages = sum(stat(result, "metadata/recorded") for result in results)
    assert pages >= 100_000
    router = ShardRouter(crawl_id, SHARDS)
    cluster = redis.RedisCluster(host="127.0.0.1", port=own_cluster.ports[0])
    try:
        records = sum(LinearHash.parse(cluster.get(keys.lh("url"))).entries for keys in router.keys)
        assert records == pages
        owners = [cluster.get_node_from_key(keys.leases).port for keys in router.keys]
        # 16 shards on 3 equal slot ranges: 5, 6 and 5.
        assert sorted(owners.count(port) for port in own_cluster.ports) == [5, 5, 6], owners
    finally:
        cluster.close()
    used = {port: redis.Redis(port=port).info("memory")["used_memory"] for port in own_cluster.ports}
    mean = sum(used.values()) / len(used)
    print(f"per-primary used_memory after {pages:,} pages: "
          + ", ".join(f"{port}: {value / 2**20:.1f} MiB" for port, value in sorted(used.items()))
          + f"; mean {mean / 2**20:.1f} MiB; max/mean {max(used.values()) / mean:.2f}")
    for port, value in used.items():
        assert mean / 1.5 <= value <= mean * 1.5, (port, used)
