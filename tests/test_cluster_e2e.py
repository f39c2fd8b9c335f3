"""The frontier on a real 3-primary Redis Cluster, and sharded on a single Redis.

Every guarantee of the single-server crawl is checked the same way, from the
mock web's request log: every reachable page fetched exactly once, one
request per host at a time, no gap shorter than the politeness delay.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import redis

from crawler.crawlstate.keys import ShardKeys
from crawler.crawlstate.shards import ShardRouter
from crawler.urls import normalize_url
from support.mockweb import WebSpec, host_ip, politeness
from tests.conftest import (
    ROOT,
    RedisClusterServers,
    RedisServer,
    RunningCrawl,
    crawl_command,
    crawl_env,
    run_crawl,
    stat,
    url_record,
)
from tests.test_crawl_e2e import fetched_pages
from tests.test_ops import frontier_command

SPEC = WebSpec(hosts=40, sizes="uniform:8", fanout=3, nav=2, cross=2, latency_ms=(10, 30))
SEEDS = range(0, 40, 2)


def crawl_with_two_workers(web: Any, settings: dict[str, object]) -> list[str]:
    seeds = ",".join(web.url(h) for h in SEEDS)
    base = {"FRONTIER_MIN_DELAY": 0.1, "FRONTIER_DELAY_FACTOR": 1, "CONCURRENT_REQUESTS": 8,
            "FRONTIER_IDLE_POLL": 0.2, **settings}
    workers = [RunningCrawl("-a", f"urls={seeds}", settings=base) for _ in range(2)]
    results = [worker.finish(timeout=180) for worker in workers]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished", result.stderr[-3000:]
        assert stat(result, "frontier/acked") > 0, "both workers fetched"
    return [result.stderr for result in results]


def assert_guarantees(web: Any) -> None:
    fetched = fetched_pages(web)
    assert set(fetched) == SPEC.reachable((h, 0) for h in SEEDS)
    assert max(fetched.values()) == 1
    report = politeness(web.entries(), min_gap=0.1)
    assert (report.overlaps, report.short_gaps) == (0, 0)


def test_two_workers_on_a_redis_cluster(
    mockweb_factory: Any, redis_cluster: RedisClusterServers, crawl_id: str, tmp_path: Path
) -> None:
    web = mockweb_factory(SPEC)
    outputs = crawl_with_two_workers(web, {
        "REDIS_CLUSTER_NODES": redis_cluster.nodes, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_SHARDS": 6,
        "CRAWL_DATA_DIR": tmp_path / "data",
    })
    assert "6 shards" in outputs[0]
    assert_guarantees(web)
    # The shards really are spread over the primaries, and each host's back
    # queue, seen set and metadata live in its own shard.
    router = ShardRouter(crawl_id, 6)
    cluster = redis.RedisCluster(host="127.0.0.1", port=redis_cluster.ports[0])
    owners = [cluster.get_node_from_key(keys.leases).port for keys in router.keys]
    # The shards' tags are salted for an even spread: 6 shards are 2 per primary.
    assert sorted(owners.count(port) for port in set(owners)) == [2, 2, 2], owners
    host = SEEDS[0]
    pages = [page for h, page in fetched_pages(web) if h == host]
    assert len(pages) == 8
    for page in pages:
        url, _ = normalize_url(web.url(host, page))
        record = url_record(cluster, crawl_id, url, 6)
        assert record is not None and record.host == host_ip(host), url
    cluster.close()
    # The operator's commands on a cluster: memory per primary, a URL and a host found on their shard.
    settings = {"REDIS_CLUSTER_NODES": redis_cluster.nodes, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_SHARDS": 6,
                "CRAWL_DATA_DIR": tmp_path / "data"}
    stats = json.loads(frontier_command("stats", "--json", settings=settings).stdout)
    servers = stats["memory"]["servers"]
    assert sorted(int(server["server"].rsplit(":", 1)[1]) for server in servers) == sorted(redis_cluster.ports)
    assert all(server["used"] > 0 and server["records"] > 0 for server in servers), servers
    assert sum(server["records"] for server in servers) == stats["url_records"]
    assert stats["memory"]["used"] == sum(server["used"] for server in servers)
    text = frontier_command("stats", settings=settings).stdout
    assert sum(f"127.0.0.1:{port}" in text for port in redis_cluster.ports) == 3, text
    url = web.url(host, pages[0])
    answer = json.loads(frontier_command("url", url, "--json", settings=settings).stdout)
    assert answer["status"] == "fetched" and answer["shard"] == router.shard_of(answer["host"])
    assert answer["seen"]["member"] is True and answer["last_fetch"]["status"] == 200
    assert json.loads(frontier_command("host", url, "--json", settings=settings).stdout)["pages"] >= len(pages)


def test_sharded_frontier_on_one_redis(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    web = mockweb_factory(SPEC)
    crawl_with_two_workers(web, {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_SHARDS": 4,
        "CRAWL_DATA_DIR": tmp_path / "data",
    })
    assert_guarantees(web)
    client = redis_server.client()
    # Every shard got hosts (40 hosts over 4 shards).
    for shard in range(4):
        assert int(client.get(ShardRouter(crawl_id, 4).keys[shard].seen_count) or 0) > 0


@pytest.mark.parametrize(("settings", "message"), [
    ({"REDIS_CLUSTER_NODES": "nohost"}, "REDIS_CLUSTER_NODES"),
    ({"REDIS_URL": "redis+cluster://127.0.0.1:notaport"}, "REDIS_URL"),
    ({"FRONTIER_SHARDS": 0}, "FRONTIER_SHARDS"),
])
def test_bad_cluster_configuration_names_the_setting(settings: dict[str, object], message: str, tmp_path: Path) -> None:
    result = subprocess.run(
        crawl_command("-a", "urls=http://127.0.0.1:9/", settings={"CRAWL_DATA_DIR": tmp_path, **settings}),
        cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.startswith("error: ") and message in result.stderr, result.stderr


def move_slot(cluster: RedisClusterServers, slot: int) -> tuple[int, int]:
    """Migrate one hash slot, keys and all, to another primary (the documented manual procedure).

    Returns (old owner port, new owner port).
    """
    clients = {port: redis.Redis(port=port) for port in cluster.ports}
    ids = {port: client.execute_command("CLUSTER", "MYID").decode() for port, client in clients.items()}
    owner = next(
        port for port in cluster.ports
        if any(start <= slot <= end for start, end, master, *_ in clients[port].execute_command("CLUSTER", "SLOTS")
               if master[1] == port)
    )
    target = next(port for port in cluster.ports if port != owner)
    clients[target].execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", ids[owner])
    clients[owner].execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", ids[target])
    while keys := clients[owner].execute_command("CLUSTER", "GETKEYSINSLOT", slot, 100):
        clients[owner].execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *keys)
    for client in clients.values():
        client.execute_command("CLUSTER", "SETSLOT", slot, "NODE", ids[target])
    return owner, target


def test_a_shard_whose_slot_moved_is_found_on_its_new_node(redis_cluster: RedisClusterServers, crawl_id: str) -> None:
    import asyncio

    from redis.asyncio.cluster import ClusterNode, RedisCluster
    from scrapy.settings import Settings

    from crawler.frontier.config import FrontierConfig
    from crawler.frontier.redisfrontier import Completion, RedisFrontier
    from crawler.frontier.seen import SeenConfig
    from crawler.metadata.recordstore import UrlMetadataStore, UrlRecord, UrlState
    from crawler.redisconn.link import SlotMovedError
    from crawler.urls import url_fingerprint

    keys = ShardKeys(crawl_id, 3)
    config = FrontierConfig.from_settings(Settings({"FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0}), crawl_id)
    seen = SeenConfig.sized(10_000, 0.01)

    async def main() -> None:
        client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", port) for port in redis_cluster.ports])
        await client.initialize()
        frontier = RedisFrontier(client, keys, config, seen=seen)
        await frontier.prepare()
        router = ShardRouter(crawl_id, 1)
        router.keys = [keys]  # every host in shard 3, the one whose slot moves
        metadata = UrlMetadataStore(client, router)
        await metadata.open()
        urls = [f"http://h{i}.test/" for i in range(20)]
        added, _ = await frontier.enqueue(
            [frontier.entry(url_fingerprint(u), f"h{i}.test", f"h{i}.test", 1, u.encode()) for i, u in enumerate(urls)]
        )
        assert added == 20
        await metadata.record(urls[0], "h0.test", UrlRecord(UrlState.FETCHED, 1, 200, b"D" * 8, b"S" * 8))
        slot = client.keyslot(keys.leases)
        old, new = move_slot(redis_cluster, slot)
        assert old != new
        # The frontier's connection still points at the old node: MOVED, the map is
        # refreshed, and the step sent again reaches the new node with every URL.
        now = 10**12
        with pytest.raises(SlotMovedError):
            await frontier.claim(now, 50)
        claimed = (await frontier.claim(now, 50)).claimed
        assert sorted(blob.decode() for _, blob in claimed) == sorted(urls)
        assert (await frontier.ack([Completion(lease.member, now, now) for lease, _ in claimed])) == (20, 0)
        # Batched scripts (the URL metadata store) find the new node too.
        record = UrlRecord(UrlState.FETCHED, 2, 200, b"E" * 8, b"S" * 8)
        for attempt in range(2):
            try:
                observation = await metadata.record(urls[0], "h0.test", record)
                break
            except SlotMovedError:
                assert attempt == 0
        assert observation.observations == 2
        assert client.get_node_from_key(keys.leases).port == new
        await metadata.close()
        await frontier.close()
        await client.aclose()

    asyncio.run(main())


def test_a_sharded_crawl_claims_a_host_again_when_its_ack_lands(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """At delay 0 a host is ready again at its ack: the shard the ack went to is asked at once.

    The idle poll is 30 s, so a host that waited for it would take 30 s a page (12 minutes for
    these 25): the crawl ends within the 2-minute timeout only if each ack's shard claims again.
    """
    spec = WebSpec(hosts=1, sizes="uniform:25", fanout=3, nav=2, cross=0)
    web = mockweb_factory(spec)
    result = run_crawl("-a", f"urls={web.url(0)}", settings={
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_SHARDS": 4,
        "CRAWL_DATA_DIR": tmp_path / "data", "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0,
        "FRONTIER_IDLE_POLL": 30,
    }, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished"
    assert set(fetched_pages(web)) == spec.reachable([(0, 0)])
