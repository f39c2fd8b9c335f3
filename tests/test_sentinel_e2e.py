"""Redis under Sentinel: a primary, a replica and three sentinels (Debian's redis-server and redis-sentinel),
`REDIS_URL = redis+sentinel://.../crawl`; the primary is killed (`kill -9`) in mid-crawl, the sentinels
promote the replica, and the crawl goes on against it: no worker exits, no request breaks politeness."""

from __future__ import annotations

import itertools
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from support.mockweb import WebSpec, free_port, politeness
from tests.conftest import RedisServer, RunningCrawl, _wait_for_port

SERVICE = "crawl"


@dataclass
class SentinelSet:
    primary: RedisServer
    replica: RedisServer
    sentinels: list[subprocess.Popen[bytes]] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)

    @property
    def url(self) -> str:
        return "redis+sentinel://" + ",".join(f"127.0.0.1:{port}" for port in self.ports) + f"/{SERVICE}"

    def primary_port(self) -> int:
        client = redis.Redis(port=self.ports[0])
        return int(client.sentinel_get_master_addr_by_name(SERVICE)[1])


@pytest.fixture
def sentinel_set(tmp_path: Path) -> Iterator[SentinelSet]:
    binary = shutil.which("redis-sentinel")
    if binary is None:
        pytest.fail("redis-sentinel is missing: make test installs Debian's redis-sentinel")
    primary = RedisServer(tmp_path / "primary")
    primary.start()
    replica = RedisServer(tmp_path / "replica", options=("--replicaof", "127.0.0.1", str(primary.port)))
    replica.start()
    deadline = time.monotonic() + 30
    while replica.client().info("replication").get("master_link_status") != "up":
        assert time.monotonic() < deadline, "the replica never synced"
        time.sleep(0.1)
    found = SentinelSet(primary, replica)
    for index in range(3):
        port = free_port()
        config = tmp_path / f"sentinel-{index}.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {tmp_path}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {primary.port} 2\n"
            f"sentinel down-after-milliseconds {SERVICE} 1000\n"
            f"sentinel failover-timeout {SERVICE} 10000\n"
            f"sentinel parallel-syncs {SERVICE} 1\n"
        )
        found.sentinels.append(subprocess.Popen([binary, str(config)], stdout=subprocess.DEVNULL,
                                                stderr=subprocess.DEVNULL))
        found.ports.append(port)
        _wait_for_port(port, process=found.sentinels[-1])
    try:
        yield found
    finally:
        for process in found.sentinels:
            process.terminate()
            process.wait(timeout=30)
        replica.stop()
        primary.stop()


def test_a_crawl_goes_on_when_the_primary_under_sentinel_is_killed(
    sentinel_set: SentinelSet, mockweb_factory: Any, crawl_id: str, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=30, sizes="uniform:12", fanout=3, nav=1, cross=1, latency_ms=(20,))
    web = mockweb_factory(spec)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(30)))
    delay = 0.2
    settings = {"REDIS_URL": sentinel_set.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": delay,
                "FRONTIER_DELAY_FACTOR": 0, "CONCURRENT_REQUESTS": 8, "FRONTIER_LEASE_TIMEOUT": 10}
    workers = [RunningCrawl("-a", f"seeds={seeds}", settings=settings) for _ in range(2)]
    reachable = spec.reachable((h, 0) for h in range(30))
    try:
        deadline = time.monotonic() + 120
        while len(web.entries()) < len(reachable) // 3:
            assert all(w.process.poll() is None for w in workers), "a worker exited before the kill"
            assert time.monotonic() < deadline
            time.sleep(0.1)
        killed_at = time.time()
        assert sentinel_set.primary.process is not None
        sentinel_set.primary.process.send_signal(signal.SIGKILL)
        sentinel_set.primary.process.wait(timeout=10)
        sentinel_set.primary.process = None
        deadline = time.monotonic() + 60
        while sentinel_set.primary_port() != sentinel_set.replica.port:
            assert time.monotonic() < deadline, "the sentinels never promoted the replica"
            time.sleep(0.2)
    finally:
        results = [worker.finish(timeout=300) for worker in workers]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
    entries = web.entries()
    pages = [e for e in entries if e.path != "/robots.txt"]
    after = [e for e in pages if e.start > killed_at]
    starts = sorted(e.start for e in entries)
    gap = max((b - a for a, b in itertools.pairwise(starts) if b > killed_at - 5), default=0.0)
    fetched = {(e.host, e.path) for e in pages}
    report = politeness(entries, min_gap=delay)
    print(f"\nsentinel failover: {len(pages)} page requests ({len(fetched)} distinct of {len(reachable)} "
          f"reachable; {len(pages) - len(fetched)} fetched twice), {len(after)} after the kill, "
          f"longest time without a request around it {gap:.1f} s; politeness {report}")
    assert after, "the crawl went on after the failover"
    assert report.overlaps == 0 and report.short_gaps == 0, report
    assert len(fetched) == len(reachable), "every page reachable was fetched"
