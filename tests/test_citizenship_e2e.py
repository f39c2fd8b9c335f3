"""Good citizenship end to end: robots.txt, backoff, fetch limits and the address guard.

One crawl of a mock web whose hosts misbehave each in their own way (see the
scenario below), checked from the server's request log and the crawl's stats.
"""

from __future__ import annotations

import itertools
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import redis

from crawler.crawlstate.keys import ShardKeys
from crawler.metadata.recordstore import UrlState
from support.mockweb import LogEntry, WebSpec, host_ip
from tests.conftest import MockWeb, RedisServer, run_crawl, stat, url_record

SCENARIO: dict[str, Any] = {
    "robots": {
        "0": {"status": 403},
        "1": {"status": 500, "fail_times": 1},
        "2": {"status": 500},
        "3": {"delay": 4, "body": "User-agent: *\nAllow: /\n"},
        "4": {"redirects": 3, "body": "User-agent: *\nDisallow: /p/1\n"},
        "5": {"redirects": 7, "body": "User-agent: *\nDisallow: /\n"},
        "6": {"body": "User-agent: *\nDisallow: /p/2\n", "pad": 600_000, "after_pad": "User-agent: *\nDisallow: /\n"},
        "7": {"body": "User-agent: *\nCrawl-delay: 1\nSitemap: http://127.20.1.8:{port}/sitemap.xml\n"},
        "8": {"body": "User-agent: crawler\nDisallow: /p/\nAllow: /p/1$\nDisallow: /*.html$\n\n"
                      "User-agent: *\nDisallow: /\n"},
        "9": {"body": "User-agent: *\nCrawl-delay: 1000\n"},
    },
    "specials": {
        "10": ["/throttle-seconds", "/throttle-date"],
        "11": ["/flaky"],
        "12": ["/slow"],
        "13": ["/huge.html"],
        "14": ["/bomb"],
        "15": ["/truncated"],
        "16": ["/loop-a", "/chain-7"],
        "17": ["/private-links"],
        "18": ["/server-error"],
        "19": ["/big.html", "/large.html"],
    },
}
HOSTS = 20



def by_host(entries: list[LogEntry]) -> dict[int, list[LogEntry]]:
    hosts: dict[int, list[LogEntry]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: e.start):
        hosts[_index(entry.host)].append(entry)
    return hosts


def _index(ip: str) -> int:
    for i in range(HOSTS):
        if host_ip(i) == ip:
            return i
    return -1


def paths(entries: list[LogEntry]) -> list[str]:
    return [e.path for e in entries]


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    from tests.conftest import start_mockweb

    tmp = tmp_path_factory.mktemp("citizenship")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    spec = WebSpec(hosts=HOSTS, sizes="uniform:4", fanout=3, nav=1, cross=0, scenario=str(scenario))
    web: MockWeb = start_mockweb(spec, tmp / "mockweb.log")
    crawl_id = "citizenship"
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(HOSTS)))
    try:
        result = run_crawl(
            "-a", f"seeds={seeds}",
            settings={
                "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id,
                "ALLOW_PRIVATE_NETWORKS": False, "PRIVATE_NETWORKS_ALLOWLIST": "127.20.0.0/16",
                "FRONTIER_MIN_DELAY": 0.1, "FRONTIER_DELAY_FACTOR": 0,
                "DOWNLOAD_TIMEOUT": 2, "DOWNLOAD_MAXSIZE": 1024 * 1024, "DOWNLOAD_WARNSIZE": 512 * 1024,
                "RETRY_TIMES": 1, "RETRY_BASE_DELAY": 0.3,
                "BACKOFF_BASE_DELAY": 0.5, "BACKOFF_MAX_DELAY": 5,
                "ROBOTS_RETRY_DELAY": 1.5, "ROBOTS_MAX_FAILURES": 2, "ROBOTS_MAX_CRAWL_DELAY": 2,
                # Host 3 never answers robots.txt within DOWNLOAD_TIMEOUT: parked at once, for this long.
                "HOST_PARK_BASE_DELAY": 1.5,
            },
            timeout=180,
        )
        entries = web.entries()
    finally:
        web.stop()
    client = redis.Redis.from_url(redis_server.url)
    dead = {
        key.decode(): value.decode().split("\t")
        for key, value in client.hgetall(ShardKeys(crawl_id).dead_info).items()
    }
    sitemaps = client.smembers(ShardKeys(crawl_id).sitemaps(host_ip(7)))
    server_error_record = url_record(client, crawl_id, f"http://{host_ip(18)}:{web.port}/server-error")
    return {"result": result, "hosts": by_host(entries), "all": entries, "dead": dead, "sitemaps": sitemaps,
            "port": web.port, "server_error_record": server_error_record}


def test_the_crawl_finishes(crawl: dict[str, Any]) -> None:
    result = crawl["result"]
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stats["finish_reason"] == "finished"


def test_robots_fetched_once_per_host_before_any_page(crawl: dict[str, Any]) -> None:
    for host in (0, 4, 6, 7, 8, 9, 10, 17):
        entries = crawl["hosts"][host]
        assert entries[0].path == "/robots.txt", (host, paths(entries))
        assert paths(entries).count("/robots.txt") == 1, host


def test_robots_4xx_allows_everything(crawl: dict[str, Any]) -> None:
    assert sorted(paths(crawl["hosts"][0])) == ["/", "/p/1", "/p/2", "/p/3", "/robots.txt"]


def test_robots_5xx_blocks_the_host_until_the_retry(crawl: dict[str, Any]) -> None:
    entries = crawl["hosts"][1]
    assert paths(entries)[:2] == ["/robots.txt", "/robots.txt"]
    first, second = entries[0], entries[1]
    assert second.start - first.end >= 1.5 - 0.01
    assert sorted(paths(entries[2:])) == ["/", "/p/1", "/p/2", "/p/3"]
    assert all(e.start > second.end for e in entries[2:])


def test_robots_always_failing_sends_the_pages_to_dead_letters(crawl: dict[str, Any]) -> None:
    for host in (2, 3):  # 500 every time; a timeout every time
        assert paths(crawl["hosts"][host]) == ["/robots.txt", "/robots.txt"], host
    dead_hosts = {info[0]: info[3] for info in crawl["dead"].values()}
    assert dead_hosts[host_ip(2)] == "robots_unreachable"
    assert dead_hosts[host_ip(3)] == "robots_unreachable"


def test_robots_redirects_followed_up_to_five(crawl: dict[str, Any]) -> None:
    within = paths(crawl["hosts"][4])
    assert within[:4] == ["/robots.txt", "/robots-hop-1.txt", "/robots-hop-2.txt", "/robots-hop-3.txt"]
    assert "/p/1" not in within and "/p/2" in within
    beyond = paths(crawl["hosts"][5])
    assert beyond[:6] == ["/robots.txt"] + [f"/robots-hop-{i}.txt" for i in range(1, 6)]
    # More than 5 redirects: unavailable, so everything is allowed.
    assert sorted(beyond[6:]) == ["/", "/p/1", "/p/2", "/p/3"]


def test_only_the_first_500_kib_of_robots_are_parsed(crawl: dict[str, Any]) -> None:
    fetched = paths(crawl["hosts"][6])
    assert "/p/2" not in fetched
    assert sorted(fetched) == ["/", "/p/1", "/p/3", "/robots.txt"]
    assert stat(crawl["result"], "robots/truncated") == 1


def test_crawl_delay_raises_the_host_delay_and_is_capped(crawl: dict[str, Any]) -> None:
    for host, delay, requests in ((7, 1.0, 6), (9, 2.0, 5)):  # host 7 also has a sitemap
        entries = crawl["hosts"][host]
        assert len(entries) == requests
        gaps = [b.start - a.end for a, b in itertools.pairwise(entries)]
        assert min(gaps) >= delay - 0.01, (host, gaps)
    assert stat(crawl["result"], "robots/crawl_delay_capped") == 1


def test_group_of_our_token_longest_match_allow_wins_and_wildcards(crawl: dict[str, Any]) -> None:
    assert sorted(paths(crawl["hosts"][8])) == ["/", "/p/1", "/robots.txt"]
    assert stat(crawl["result"], "robots/disallowed") >= 3


def test_sitemap_lines_are_recorded(crawl: dict[str, Any]) -> None:
    assert crawl["sitemaps"] == {f"http://{host_ip(7)}:{crawl['port']}/sitemap.xml".encode()}
    assert "/sitemap.xml" in paths(crawl["hosts"][7])  # fetched through the frontier (a 404 here)


def test_429_waits_at_least_retry_after_in_both_forms(crawl: dict[str, Any]) -> None:
    entries = crawl["hosts"][10]
    for path, wait in (("/throttle-seconds", 2.0), ("/throttle-date", 2.0)):
        hits = [i for i, e in enumerate(entries) if e.path == path]
        assert len(hits) == 2, (path, paths(entries))
        first = entries[hits[0]]
        assert first.status == 429
        after = entries[hits[0] + 1]
        assert after.start - first.end >= wait - 0.01, (path, after.start - first.end)
    assert stat(crawl["result"], "retry/retry_after") == 2


def test_intermittent_503_backs_off_exponentially(crawl: dict[str, Any]) -> None:
    entries = crawl["hosts"][11]
    flaky = [i for i, e in enumerate(entries) if e.path == "/flaky"]
    assert [entries[i].status for i in flaky] == [503, 503, 200]
    first_gap = entries[flaky[0] + 1].start - entries[flaky[0]].end
    second_gap = entries[flaky[1] + 1].start - entries[flaky[1]].end
    assert first_gap >= 0.5 - 0.01
    assert second_gap >= 1.0 - 0.01


def test_slow_drip_is_cut_at_the_total_timeout_then_dead_lettered(crawl: dict[str, Any]) -> None:
    slow = [e for e in crawl["hosts"][12] if e.path == "/slow"]
    assert len(slow) == 2  # one retry
    assert all(e.end - e.start < 3.0 for e in slow)
    errors = {info[3] for info in crawl["dead"].values() if info[0] == host_ip(12)}
    assert errors == {"DownloadTimeoutError"}


def test_huge_octet_stream_stops_at_the_headers(crawl: dict[str, Any]) -> None:
    huge = [e for e in crawl["hosts"][13] if e.path == "/huge.html"]
    assert len(huge) == 1
    assert huge[0].end - huge[0].start < 2.0
    assert stat(crawl["result"], "fetch/content_type_skipped") == 1


def test_gzip_bomb_is_stopped_at_the_size_cap(crawl: dict[str, Any]) -> None:
    assert paths(crawl["hosts"][14]).count("/bomb") == 1
    assert stat(crawl["result"], "fetch/decompression_bomb") == 1


def test_truncated_body_is_retried_never_parsed(crawl: dict[str, Any]) -> None:
    assert paths(crawl["hosts"][15]).count("/truncated") == 2
    errors = {info[3] for info in crawl["dead"].values() if info[0] == host_ip(15)}
    assert errors == {"ResponseDataLossError"}
    assert stat(crawl["result"], "fetch/truncated") == 2


def test_redirect_loops_end_and_chains_stop_at_the_limit(crawl: dict[str, Any]) -> None:
    fetched = paths(crawl["hosts"][16])
    assert fetched.count("/loop-a") == 1 and fetched.count("/loop-b") == 1
    assert [p for p in fetched if p.startswith("/chain-")] == [f"/chain-{n}" for n in range(7, 1, -1)]
    assert stat(crawl["result"], "fetch/redirect_limit") == 1


def test_private_addresses_are_never_requested(crawl: dict[str, Any]) -> None:
    assert "/private-links" in paths(crawl["hosts"][17])
    assert not [e for e in crawl["all"] if not e.host.startswith("127.20.")]
    # 169.254.169.254 and 10.0.0.1 (IP literals), localhost (resolved: 127.0.0.1).
    assert stat(crawl["result"], "fetch/blocked_address") == 3
    assert stat(crawl["result"], "dns/lookups") >= 1


def test_server_errors_are_retried_then_the_last_answer_goes_on_as_scrapys(crawl: dict[str, Any]) -> None:
    """Out of retries with an answer, as Scrapy's RetryMiddleware: the response goes on (archived,
    the URL done with its status), not to the dead letters."""
    assert paths(crawl["hosts"][18]).count("/server-error") == 2
    assert not [info for info in crawl["dead"].values() if info[0] == host_ip(18)]
    record = crawl["server_error_record"]
    assert record is not None and record.state is UrlState.FAILED and record.status == 500  # fetched: an error answer
    assert stat(crawl["result"], "retry/max_reached/http_500") == 1


def test_bodies_over_the_size_cap_are_cut_and_large_ones_counted(crawl: dict[str, Any]) -> None:
    fetched = paths(crawl["hosts"][19])
    assert fetched.count("/big.html") == 1  # over DOWNLOAD_MAXSIZE: dropped, not retried
    assert fetched.count("/large.html") == 1
    assert stat(crawl["result"], "fetch/size_exceeded") == 1
    # /large.html, and host 6's robots.txt: its download stops at the chunk that
    # crosses 500 KiB, which here also crosses the 512 KiB warn size.
    assert stat(crawl["result"], "fetch/size_warning") == 2


def test_politeness_held_throughout(crawl: dict[str, Any]) -> None:
    """One request at a time per host, and starts at least FRONTIER_MIN_DELAY apart: robots.txt
    redirect hops too (hosts 4 and 5), which wait for the delay like any request."""
    for host, entries in crawl["hosts"].items():
        for before, after in itertools.pairwise(entries):
            assert after.start >= before.end, (host, before, after)
            assert after.start - before.start >= 0.1 - 0.002, (host, before, after)


def test_dead_letters_can_be_listed_and_requeued(crawl: dict[str, Any], redis_server: RedisServer) -> None:
    import subprocess

    from tests.conftest import ROOT, crawl_env

    env = crawl_env()
    command = [sys.executable, "-m", "scrapy", "frontier", "dead-letters", "-s", f"REDIS_URL={redis_server.url}",
               "-s", "FRONTIER_CRAWL_ID=citizenship"]
    listing = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert "robots_unreachable" in listing.stdout and "http_500" not in listing.stdout
    assert len(crawl["dead"]) == 4
    requeue = subprocess.run([*command, "--requeue"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert "requeued 4" in requeue.stdout
    client = redis.Redis.from_url(redis_server.url)
    assert client.hlen(ShardKeys("citizenship").dead_info) == 0
    assert int(client.get(ShardKeys("citizenship").queued) or 0) == 4


def test_placeholder_user_agent_stops_at_the_first_foreign_host_and_keeps_the_url(
    mockweb_factory: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"specials": {"0": ["/foreign"]}}))
    web = mockweb_factory(WebSpec(hosts=1, sizes="uniform:1", nav=0, cross=0, scenario=str(scenario)))
    (tmp_path / "page").write_text("")
    # The mock root links to /foreign, which (as a special) answers with a link
    # to a public address: with the placeholder user agent, the crawl stops there.
    result = run_crawl(
        "-a", f"urls={web.url(0)}",
        settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "identity", "FRONTIER_MIN_DELAY": 0},
    )
    assert result.stats["finish_reason"] == "user_agent_placeholder", result.stderr[-3000:]
    assert "USER_AGENT: still the placeholder" in result.stderr
    client = redis.Redis.from_url(redis_server.url)
    assert int(client.get(ShardKeys("identity").queued) or 0) == 1  # the foreign URL is kept
    assert not [e for e in web.entries() if not e.host.startswith("127.20.")]


def test_dead_letter_listing_of_an_unknown_crawl_is_one_clear_line(redis_server: RedisServer, tmp_path: Path) -> None:
    import subprocess

    from tests.conftest import ROOT, crawl_env

    result = subprocess.run(
        [sys.executable, "-m", "scrapy", "frontier", "dead-letters", "-s", f"REDIS_URL={redis_server.url}",
         "-s", "FRONTIER_CRAWL_ID=nothing-here"],
        cwd=ROOT, env=crawl_env(), capture_output=True, text=True, check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: FRONTIER_CRAWL_ID: no crawl 'nothing-here' in Redis at {redis_server.url}"
    )


def test_every_key_the_crawl_left_in_redis_is_one_the_schema_names(
    crawl: dict[str, Any], redis_server: RedisServer
) -> None:
    """robots.txt, dead letters, sitemaps, backoff, parking, metadata, dedup: all keys are in the schema."""
    from crawler.crawlstate.keys import CRAWL_KEYS, SHARD_KEYS

    client = redis.Redis.from_url(redis_server.url)
    shard, crawl_wide = ShardKeys("citizenship").prefix, "frontier:{citizenship}:"
    schemas = {shard: SHARD_KEYS, crawl_wide: CRAWL_KEYS}
    seen_suffixes: set[str] = set()
    for prefix, schema in schemas.items():
        for raw in client.scan_iter(match=prefix.replace("{", "\\{").replace("}", "\\}") + "*", count=1000):
            suffix = raw.decode()[len(prefix):]
            known = [key.suffix for key in schema.values()
                     if suffix == key.suffix or (key.suffix.endswith(":") and suffix.startswith(key.suffix))]
            assert known, f"{prefix}{suffix} is not in the schema"
            seen_suffixes.add(max(known, key=len))
    # Nothing outside the crawl's two prefixes (no key of the first layout's single-slot dedup index).
    assert not list(client.scan_iter(match="dedup:*"))
    client.close()
    # The crawl reached the schema's corners, not a few keys only.
    assert {"robots:", "robots", "sitemaps:", "hostdelay", "hostfail", "url:", "due", "due:", "dx:", "nd:", "lh:",
            "seen:x:", "meta"} <= seen_suffixes
