"""A polite crawl of a web with dead hosts, and politeness by domain and by address, end to end.

Real crawls of the mock web (with dead hosts: addresses whose port refuses
connections, and a listener that accepts and never answers), checked from
the server's own request log and the crawl's stats.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from support.mockweb import LogEntry, WebSpec, free_port, host_ip
from tests.conftest import RedisServer, run_crawl, start_mockweb, stat

LIVE = 6
DEAD = 6  # even: silent (accepts, never answers); odd: refuses connections
ROBOTS_5XX = 5  # a live host whose robots.txt always answers 500
DELAY = 0.2



def final_progress(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "Final Progress:" in line]
    return lines[-1] if lines else ""


def audit(entries: list[LogEntry], min_gap: float) -> tuple[int, int]:
    """(overlaps, start-to-start gaps below ``min_gap``) among ``entries`` taken as one politeness group."""
    ordered = sorted(entries, key=lambda e: e.start)
    overlaps = short = 0
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end - 0.002:
            overlaps += 1
        elif after.start - before.start < min_gap - 0.002:
            short += 1
    return overlaps, short


@pytest.fixture(scope="module")
def dead_web_crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("deadweb")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"robots": {str(ROBOTS_5XX): {"status": 500}}}))
    spec = WebSpec(hosts=LIVE, sizes="uniform:6", fanout=2, nav=1, cross=0, latency_ms=(5.0,),
                   scenario=str(scenario))
    silent_port, refused_port = free_port(), free_port()
    web = start_mockweb(spec, tmp / "mockweb.log", silent_port=silent_port)
    seeds = tmp / "seeds.txt"
    lines = []
    for host in range(max(LIVE, DEAD)):
        if host < LIVE:
            lines.append(web.url(host))
        if host < DEAD:
            port = silent_port if host % 2 == 0 else refused_port
            lines.append(f"http://{host_ip(LIVE + host)}:{port}/")
    seeds.write_text("\n".join(lines) + "\n")
    try:
        result = run_crawl(
            "-a", f"seeds={seeds}",
            settings={
                "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "deadweb",
                "FRONTIER_MIN_DELAY": DELAY, "FRONTIER_DELAY_FACTOR": 0,
                # Few fetch slots: dead hosts that held them more than once would stall the crawl.
                "CONCURRENT_REQUESTS": 4, "DOWNLOAD_TIMEOUT": 3,
                "PROGRESS_INTERVAL": 5, "CLOSESPIDER_TIMEOUT": 25,
            },
            timeout=120,
        )
        entries = web.entries()
    finally:
        web.stop()
    return {"result": result, "entries": entries}


def test_live_hosts_are_crawled_in_full_beside_dead_ones(dead_web_crawl: dict[str, Any]) -> None:
    result = dead_web_crawl["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    entries: list[LogEntry] = dead_web_crawl["entries"]
    for host in range(LIVE):
        paths = sorted(e.path for e in entries if e.host == host_ip(host))
        if host == ROBOTS_5XX:
            assert paths == ["/robots.txt"]  # nothing of the host before its robots.txt can be read
        else:
            assert paths == ["/", "/p/1", "/p/2", "/p/3", "/p/4", "/p/5", "/robots.txt"], (host, paths)


def test_a_silent_host_holds_a_slot_once_then_sleeps_parked(dead_web_crawl: dict[str, Any]) -> None:
    result = dead_web_crawl["result"]
    entries: list[LogEntry] = dead_web_crawl["entries"]
    for twin in range(0, DEAD, 2):
        asked = [e for e in entries if e.host == host_ip(LIVE + twin)]
        assert [e.path for e in asked] == ["/robots.txt"], asked  # its first request, never a second
    assert stat(result, "fetch/server_silent") == DEAD // 2
    assert stat(result, "frontier/hosts_parked") >= DEAD // 2
    # Refused connections are known at once, and the hosts sleep until robots.txt is tried again.
    assert stat(result, "robots/error/DownloadConnectionRefusedError") == DEAD // 2
    progress = final_progress(result.stderr)
    sleeping = re.search(r"([\d,]+) sleeping \(([\d,]+) parked\)", progress)
    assert sleeping is not None, progress
    # Every dead host, and the host whose robots.txt fails, sleeps with its queue; the silent ones parked.
    assert int(sleeping.group(1)) == DEAD + 1 and int(sleeping.group(2)) == DEAD // 2, progress


def test_politeness_holds_for_every_host(dead_web_crawl: dict[str, Any]) -> None:
    by_host: dict[str, list[LogEntry]] = defaultdict(list)
    for entry in dead_web_crawl["entries"]:
        by_host[entry.host].append(entry)
    for host, entries in by_host.items():
        assert audit(entries, DELAY) == (0, 0), host


def names_web(tmp: Path, names: list[str], addresses: list[str]) -> tuple[Any, Path, Path]:
    """A mock web whose pages link only relatively (so a name's pages stay under that name), host
    names pinned to ``addresses`` by a hosts file, and seeds at each name's root."""
    spec = WebSpec(hosts=len(set(addresses)), sizes="uniform:3", fanout=1, nav=0, cross=0, latency_ms=(5.0,))
    web = start_mockweb(spec, tmp / "mockweb.log")
    hosts_file = tmp / "hosts"
    hosts_file.write_text("".join(f"{address} {name}\n" for name, address in zip(names, addresses, strict=True)))
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(f"http://{name}:{web.port}/\n" for name in names))
    return web, hosts_file, seeds


@pytest.mark.parametrize("key", ["domain", "ip"])
def test_one_request_at_a_time_per_domain_and_per_address(
    key: str, tmp_path: Path, redis_server: RedisServer
) -> None:
    """domain: 6 hosts of one registered domain on 6 addresses; ip: 6 names of 3 domains on one address.
    Either way the server sees them as one host: one request at a time, gaps at least the delay."""
    if key == "domain":
        names = [f"h{i}.farm.test" for i in range(6)]
        addresses = [host_ip(i) for i in range(6)]
    else:
        names = [f"n{i}.site{i % 3}.test" for i in range(6)]
        addresses = [host_ip(0)] * 6
    web, hosts_file, seeds = names_web(tmp_path, names, addresses)
    try:
        result = run_crawl(
            "-a", f"seeds={seeds}",
            settings={
                "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": f"group-{key}",
                "FRONTIER_POLITENESS_KEY": key, "DNS_HOSTS_FILE": str(hosts_file),
                "USER_AGENT": "politebot/1.0 (+https://example.org/politebot)",
                "FRONTIER_MIN_DELAY": DELAY, "FRONTIER_DELAY_FACTOR": 0,
            },
            timeout=120,
        )
        entries = web.entries()
    finally:
        web.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished"
    assert len(entries) == 6 * 4  # every name's robots.txt and 3 pages
    assert audit(entries, DELAY) == (0, 0)
