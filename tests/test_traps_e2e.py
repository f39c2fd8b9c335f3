"""Trap defences end to end: a crawl through traps finishes, each trap bounded, every normal page fetched."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
import redis

from crawler.crawlstate.keys import ShardKeys
from support.mockweb import LogEntry, WebSpec, host_index, host_ip, parse_page_path
from tests.conftest import MockWeb, RedisServer, run_crawl, start_mockweb, stat

HOSTS = 60
NORMAL = range(0, 10)
CALENDAR, SESSION, REPEAT, SITEMAP = 10, 11, 12, 13
FARM = range(20, 60)  # 40 hosts named h<i>.farm.test
SCENARIO = {
    "traps": {str(CALENDAR): "calendar", str(SESSION): "session", str(REPEAT): "repeat", str(SITEMAP): "sitemap"},
    "farm": {"start": FARM.start, "count": len(FARM), "domain": "farm.test"},
}
HOST_BUDGET = 30
DOMAIN_BUDGET = 60



@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("traps")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    spec = WebSpec(hosts=HOSTS, sizes="uniform:8", fanout=3, nav=1, cross=0, scenario=str(scenario))
    web: MockWeb = start_mockweb(spec, tmp / "mockweb.log")
    hosts_file = tmp / "hosts"
    hosts_file.write_text("".join(f"{host_ip(h)} h{h}.farm.test\n" for h in FARM))
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(14)) + f"http://h{FARM.start}.farm.test:{web.port}/\n")
    try:
        result = run_crawl(
            "-a", f"seeds={seeds}",
            settings={
                "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "traps", "FRONTIER_MIN_DELAY": 0.02,
                "FRONTIER_DELAY_FACTOR": 0, "HOST_PAGE_BUDGET": HOST_BUDGET, "DOMAIN_PAGE_BUDGET": DOMAIN_BUDGET,
                "DNS_HOSTS_FILE": hosts_file, "SEEN_EXPECTED_URLS": 100_000, "CONCURRENT_REQUESTS": 16,
                "USER_AGENT": "trapbot/1.0 (+https://example.org/trapbot)",
            },
            timeout=300,
        )
        entries = web.entries()
    finally:
        web.stop()
    hosts: dict[int, list[LogEntry]] = defaultdict(list)
    for entry in entries:
        hosts[host_index(entry.host)].append(entry)
    client = redis.Redis.from_url(redis_server.url)
    return {"result": result, "hosts": hosts, "spec": spec, "client": client}


def pages(entries: list[LogEntry]) -> list[str]:
    return [e.path for e in entries if e.path != "/robots.txt"]


def test_the_crawl_finishes(crawl: dict[str, Any]) -> None:
    assert crawl["result"].returncode == 0, crawl["result"].stderr[-3000:]
    assert crawl["result"].stats["finish_reason"] == "finished"


def test_every_normal_page_is_fetched_once(crawl: dict[str, Any]) -> None:
    for host in NORMAL:
        fetched = sorted(parse_page_path(p) for p in pages(crawl["hosts"][host]))
        assert fetched == list(range(8)), host


def test_infinite_calendar_is_bounded_by_the_host_budget(crawl: dict[str, Any]) -> None:
    fetched = pages(crawl["hosts"][CALENDAR])
    assert len(fetched) == HOST_BUDGET
    assert len(set(fetched)) == len(fetched)
    assert stat(crawl["result"], "urls/dropped/host_budget") >= 1


def test_session_ids_in_every_link_do_not_multiply_pages(crawl: dict[str, Any]) -> None:
    fetched = pages(crawl["hosts"][SESSION])
    assert sorted(fetched) == sorted({"/", *(f"/p/{i}" for i in range(1, 8))})


def test_repeated_segments_stop_the_nesting(crawl: dict[str, Any]) -> None:
    fetched = sorted(p for p in pages(crawl["hosts"][REPEAT]) if p.startswith("/r/"))
    assert "/r/a/b/a/b/a/b/" not in fetched
    assert len(fetched) < 20
    assert stat(crawl["result"], "urls/dropped/repeated_segments") >= 1


def test_link_farm_is_bounded_by_the_domain_budget(crawl: dict[str, Any]) -> None:
    farm_requests = sum(len(pages(crawl["hosts"][h])) for h in FARM)
    assert 0 < farm_requests <= DOMAIN_BUDGET
    assert stat(crawl["result"], "urls/dropped/domain_budget") >= 1
    assert stat(crawl["result"], "dns/static_hits") >= 1
    budget = crawl["client"].hget(ShardKeys("traps").domain_pages, "farm.test")
    assert int(budget) == DOMAIN_BUDGET


def test_sitemap_urls_are_found_through_index_and_gzip(crawl: dict[str, Any]) -> None:
    fetched = pages(crawl["hosts"][SITEMAP])
    assert {"/sitemap_index.xml", "/sitemap1.xml.gz", "/sitemap2.xml"} <= set(fetched)
    assert {f"/s/{i}" for i in range(1, 9)} <= set(fetched)  # linked from nowhere else
    result = crawl["result"]
    assert stat(result, "sitemaps/sitemapindex") == 1
    assert stat(result, "sitemaps/urlset") == 2
    assert stat(result, "sitemaps/foreign_url") == 1
