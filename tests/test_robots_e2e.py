"""robots.txt as the real web writes it, end to end: a crawl as ``mybot``, checked from the server's log.

Hosts write rules for our bot the ways sites do (a version suffix on the
``User-agent`` line, a byte-order mark, an unknown line inside the group), one
answers 429 with ``Retry-After`` to its first robots.txt request, one
redirects robots.txt twice; every request to a host, hops included, waits for
the politeness delay.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

import pytest

from support.mockweb import LogEntry, WebSpec, host_ip
from tests.conftest import RedisServer, run_crawl, start_mockweb

UA = "mybot/1.0 (+https://example.org/mybot)"
DELAY = 0.2
RETRY_AFTER = 3
SCENARIO: dict[str, Any] = {
    "robots": {
        "0": {"body": "User-agent: mybot/1.0\nDisallow: /p/\n\nUser-agent: *\nDisallow:\n"},
        "1": {"body": "\ufeffUser-agent: *\nDisallow: /p/1\n"},
        "2": {"body": "User-agent: MyBot 2.1 (+http://mybot.example/)\nSome-Unknown-Key: x\n"
                      "User-agent: otherbot\nDisallow: /p/2\n"},
        "3": {"status": 429, "fail_times": 1, "retry_after": RETRY_AFTER, "body": "User-agent: *\nAllow: /\n"},
        "4": {"redirects": 2, "body": "User-agent: MYBOT extra words\nDisallow: /p/3\n"},
    },
}
FORBIDDEN = {0: {"/p/1", "/p/2", "/p/3"}, 1: {"/p/1"}, 2: {"/p/2"}, 4: {"/p/3"}}


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("robots")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    web = start_mockweb(WebSpec(hosts=5, sizes="uniform:4", fanout=3, nav=0, cross=0, scenario=str(scenario)),
                        tmp / "mockweb.log")
    try:
        result = run_crawl(
            "-a", "urls=" + ",".join(web.url(host) for host in range(5)),
            settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "robots-real", "USER_AGENT": UA,
                      "FRONTIER_MIN_DELAY": DELAY, "FRONTIER_DELAY_FACTOR": 0, "ROBOTS_RETRY_DELAY": 1},
            timeout=120,
        )
        entries = web.entries()
    finally:
        web.stop()
    hosts: dict[int, list[LogEntry]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: e.start):
        hosts[next(h for h in range(5) if host_ip(h) == entry.host)].append(entry)
    return {"result": result, "hosts": hosts}


def test_the_crawl_finishes(crawl: dict[str, Any]) -> None:
    assert crawl["result"].returncode == 0, crawl["result"].stderr[-3000:]
    assert crawl["result"].stats["finish_reason"] == "finished"


def test_rules_for_our_bot_are_obeyed_however_the_file_writes_them(crawl: dict[str, Any]) -> None:
    for host, forbidden in FORBIDDEN.items():
        paths = {e.path for e in crawl["hosts"][host]}
        assert not paths & forbidden, (host, sorted(paths))
        assert "/" in paths, host  # the rest was crawled


def test_a_429_on_robots_txt_holds_every_page_until_retry_after(crawl: dict[str, Any]) -> None:
    entries = crawl["hosts"][3]
    assert [e.status for e in entries[:2]] == [429, 200] and entries[1].path == "/robots.txt"
    assert entries[1].start - entries[0].end >= RETRY_AFTER - 0.01
    pages = [e for e in entries if e.path != "/robots.txt"]
    assert len(pages) == 4 and min(e.start for e in pages) > entries[1].end


def test_every_request_to_a_host_waits_for_the_delay_robots_hops_included(crawl: dict[str, Any]) -> None:
    assert [e.path for e in crawl["hosts"][4][:3]] == ["/robots.txt", "/robots-hop-1.txt", "/robots-hop-2.txt"]
    for host, entries in crawl["hosts"].items():
        for before, after in itertools.pairwise(entries):
            assert after.start >= before.end and after.start - before.start >= DELAY - 0.002, (host, after)
