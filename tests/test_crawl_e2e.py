"""End to end: `scrapy crawl web` against the mock web, checked from the server's log."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crawler.crawlstate.keys import ShardKeys
from crawler.frontier.codec import stored_url
from support.mockweb import WebSpec, host_index, parse_page_path, politeness
from tests.conftest import ROOT, MockWeb, RedisServer, RunningCrawl, crawl_command, crawl_env, run_crawl, stat


def fetched_pages(web: MockWeb) -> Counter[tuple[int, int]]:
    """How many times each (host, page) was fetched, from the server's log (pages only)."""
    pages: Counter[tuple[int, int]] = Counter()
    for entry in web.entries():
        page = parse_page_path(entry.path)
        if page >= 0:
            pages[(host_index(entry.host), page)] += 1
    return pages


def write_seeds(path: Path, web: MockWeb, hosts: range) -> Path:
    path.write_text("".join(web.url(h) + "\n" for h in hosts))
    return path


def wait_for_log(web: MockWeb, count: int, process: subprocess.Popen[Any], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(web.entries()) < count:
        if process.poll() is not None:
            raise AssertionError(f"crawl ended early with status {process.returncode}")
        if time.monotonic() > deadline:
            raise AssertionError(f"fewer than {count} requests after {timeout} s")
        time.sleep(0.05)


def assert_finished(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stats["finish_reason"] == "finished", result.stderr[-3000:]


def test_crawl_fetches_every_reachable_page_once_and_politely(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=60, sizes="uniform:6", fanout=3, nav=2, cross=2, latency_ms=(5, 15, 30), extras=True)
    web = mockweb_factory(spec)
    seeds = write_seeds(tmp_path / "seeds.txt", web, range(0, 60, 3))
    items = tmp_path / "items.jsonl"
    result = run_crawl(
        "-a", f"seeds={seeds}", "-O", str(items),
        settings={
            "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.2,
            "FRONTIER_DELAY_FACTOR": 2, "CONCURRENT_REQUESTS": 16,
        },
    )
    assert_finished(result)
    expected = spec.reachable((h, 0) for h in range(0, 60, 3))
    # `-O items.jsonl`: one JSON line per page the index gate passes (every page here; not the
    # redirects), bodies omitted (WEB_FEED_PAGE_BODY).
    exported = [json.loads(line) for line in items.read_text().splitlines()]
    assert Counter(item["status"] for item in exported) == {200: len(expected)}
    assert all(item["body"] is None for item in exported)
    pages = fetched_pages(web)
    assert set(pages) == expected
    assert max(pages.values()) == 1
    # The extras: every host's robots.txt and redirect, once; the .bin link
    # (extension filter), mailto: and javascript: never.
    extras = [e for e in web.entries() if parse_page_path(e.path) < 0]
    assert Counter(e.path for e in extras) == {"/robots.txt": 60, "/moved": 60}
    assert stat(result, "urls/dropped/extension") == 60
    report = politeness(web.entries(), min_gap=0.2)
    assert report.overlaps == 0
    assert report.short_gaps == 0
    assert stat(result, "frontier/acked") > 0


def test_a_crawl_on_uvloop_fetches_and_archives_every_page(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    # Scrapy's ASYNCIO_EVENT_LOOP = "uvloop.Loop" under the crawler: the lean HTTP client, Redis,
    # the WARC writer's thread all on uvloop's loop.
    spec = WebSpec(hosts=8, sizes="uniform:4", fanout=2, nav=1, cross=1)
    web = mockweb_factory(spec)
    seeds = write_seeds(tmp_path / "seeds.txt", web, range(8))
    result = run_crawl(
        "-a", f"seeds={seeds}",
        settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0,
                  "ASYNCIO_EVENT_LOOP": "uvloop.Loop"},
    )
    assert_finished(result)
    assert "uvloop.Loop" in result.stderr
    expected = spec.reachable((h, 0) for h in range(8))
    pages = fetched_pages(web)
    assert set(pages) == expected and max(pages.values()) == 1
    assert stat(result, "warc/response_records") == len(expected) + 8  # the pages, each host's robots.txt
    assert stat(result, "downloader/exception_count") == 0


def test_next_host_fetch_starts_when_its_delay_ends(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str
) -> None:
    # One host, a chain of pages: every fetch waits for the previous one's delay.
    spec = WebSpec(hosts=1, sizes="uniform:8", fanout=1, nav=0, cross=0)
    web = mockweb_factory(spec)
    result = run_crawl(
        "-a", f"urls={web.url(0)}",
        settings={
            "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.3,
            "FRONTIER_DELAY_FACTOR": 0, "FRONTIER_IDLE_POLL": 5,
        },
    )
    assert_finished(result)
    entries = sorted(web.entries(), key=lambda e: e.start)
    # robots.txt first, then the 8 pages, each at its turn.
    assert [e.path for e in entries][:2] == ["/robots.txt", "/"]
    assert len(entries) == 9
    gaps = [after.start - before.end for before, after in itertools.pairwise(entries)]
    assert min(gaps) >= 0.3 - 0.002
    # Not the engine's 5 s heartbeat, nor the 5 s idle poll: about the delay.
    assert max(gaps) < 0.3 + 0.5, gaps


def read_leased_urls(server: RedisServer, crawl_id: str) -> set[str]:
    keys = ShardKeys(crawl_id)
    client = server.client()
    urls = set()
    for member in client.zrangebyscore(keys.leases, "-inf", "(inf"):  # not the anchor (schema.ZSET_ANCHOR)
        leaseno, _level, request_id, host = member.decode().split(" ", 3)
        if request_id == "0":
            continue  # a robots.txt lease: its host's first page stayed queued, nothing is held
        blob = client.hget(keys.leased, leaseno)
        assert blob is not None
        urls.add(stored_url(blob, host))
    return urls


def test_sigkill_then_resume_loses_nothing_and_refetches_only_leased_urls(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=50, sizes="uniform:10", fanout=3, nav=2, cross=3, latency_ms=(20,))
    web = mockweb_factory(spec)
    seeds = write_seeds(tmp_path / "seeds.txt", web, range(50))
    settings = {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 1, "FRONTIER_LEASE_TIMEOUT": 3, "CONCURRENT_REQUESTS": 16,
    }
    command = crawl_command("-a", f"seeds={seeds}", settings=settings)
    first = subprocess.Popen(command, cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_log(web, 250, first)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=10)
    in_flight = read_leased_urls(redis_server, crawl_id)
    assert in_flight, "a crawl killed halfway holds leases"
    fetched_before = fetched_pages(web)
    assert sum(fetched_before.values()) < 500

    result = run_crawl("-a", f"seeds={seeds}", settings=settings)
    assert_finished(result)
    fetched = fetched_pages(web)
    assert set(fetched) == spec.reachable((h, 0) for h in range(50))
    twice = {key for key, n in fetched.items() if n > 1}
    assert max(fetched.values()) <= 2
    in_flight_pages = {(host_index(url.split("/")[2].split(":")[0]), parse_page_path("/" + url.split("/", 3)[3]))
                       for url in in_flight}
    assert twice <= in_flight_pages
    assert stat(result, "frontier/lease_expired") > 0
    assert politeness(web.entries(), min_gap=0.05).overlaps == 0


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_then_same_command_resumes_on_the_embedded_redis(
    mockweb_factory: Any, crawl_id: str, tmp_path: Path, stop_signal: signal.Signals
) -> None:
    spec = WebSpec(hosts=20, sizes="uniform:15", fanout=3, nav=2, cross=2, latency_ms=(10,))
    web = mockweb_factory(spec)
    seeds = write_seeds(tmp_path / "seeds.txt", web, range(20))
    data_dir = tmp_path / "data"
    settings = {
        "CRAWL_DATA_DIR": data_dir, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.1,
        "FRONTIER_DELAY_FACTOR": 1, "CONCURRENT_REQUESTS": 8,
    }
    first = RunningCrawl("-a", f"seeds={seeds}", settings=settings, stdout=subprocess.PIPE)
    wait_for_log(web, 80, first.process)
    first.process.send_signal(stop_signal)
    stopped = first.finish(timeout=60)
    assert stopped.returncode == 0, stopped.stderr[-3000:]
    assert stopped.stats["finish_reason"] == "shutdown"
    redis_dir = data_dir / crawl_id / "redis"
    assert list(redis_dir.glob("appendonlydir/*.aof")), "the embedded server persists to the job directory"
    assert not (redis_dir / "redis.pid").exists(), "the embedded server stopped with the crawl"
    before = fetched_pages(web)
    assert sum(before.values()) < 300

    result = run_crawl("-a", f"seeds={seeds}", settings=settings)
    assert_finished(result)
    fetched = fetched_pages(web)
    assert set(fetched) == spec.reachable((h, 0) for h in range(20))
    assert max(fetched.values()) == 1, "a graceful stop refetches nothing"

    # Once more: every seed was crawled, so nothing is; the crawler says how to start over.
    again = run_crawl("-a", f"seeds={seeds}", settings=settings)
    assert again.returncode == 0 and fetched_pages(web) == fetched
    assert "the URLs given were crawled before" in again.stderr
    assert f"scrapy frontier reset --crawl-id {crawl_id} --yes" in again.stderr


def test_two_workers_share_one_frontier(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=40, sizes="uniform:8", fanout=3, nav=2, cross=2, latency_ms=(10, 30))
    web = mockweb_factory(spec)
    seeds = write_seeds(tmp_path / "seeds.txt", web, range(40))
    settings = {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.1,
        "FRONTIER_DELAY_FACTOR": 1, "CONCURRENT_REQUESTS": 8, "FRONTIER_IDLE_POLL": 0.2,
    }
    workers = [RunningCrawl("-a", f"seeds={seeds}", settings=settings) for _ in range(2)]
    for result in [worker.finish(timeout=120) for worker in workers]:
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished"
        assert stat(result, "frontier/acked") > 0, "both workers fetched"
    fetched = fetched_pages(web)
    assert set(fetched) == spec.reachable((h, 0) for h in range(40))
    assert max(fetched.values()) == 1
    report = politeness(web.entries(), min_gap=0.1)
    assert (report.overlaps, report.short_gaps) == (0, 0)


@pytest.mark.parametrize(
    ("args", "settings", "names"),
    [
        (["-a", "urls=http://127.0.0.1:9/"], {"REDIS_URL": "redis://127.0.0.1:1/0"}, ["REDIS_URL", "cannot reach Redis"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"REDIS_URL": "http://not-redis/"}, ["REDIS_URL", "not a Redis URL"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"REDIS_URL": "redis+sentinel://127.0.0.1:1"},
         ["REDIS_URL", "names no Sentinel service"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"REDIS_URL": "redis+sentinel://127.0.0.1:1,127.0.0.1:2/crawl"},
         ["REDIS_URL", "no sentinel at"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"METRICS_PORT": "9500-9400"}, ["METRICS_PORT", "an empty range"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"METRICS_PORT": "9410", "METRICS_TARGETS_FILE": "/nonexistent/dir/"},
         ["METRICS_TARGETS_FILE", "does not exist or is not writable"]),
        (["-a", "seeds=/nonexistent/seeds.txt"], {}, ["seeds", "does not exist"]),
        (["-a", "seeds={empty}"], {}, ["seeds", "contains no URLs"]),
        (["-a", "urls=example.com"], {}, ["urls", "'example.com' is not an http(s) URL"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"FRONTIER_MIN_DELAY": "soon"}, ["FRONTIER_MIN_DELAY", "expected a number"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"REDIS_SERVER_BINARY": "no-such-redis"}, ["REDIS_SERVER_BINARY", "not found"]),
        (["-a", "urls=http://a.test/"], {}, ["USER_AGENT", "placeholder"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"PRIVATE_NETWORKS_ALLOWLIST": "10.0.0.0/33"},
         ["PRIVATE_NETWORKS_ALLOWLIST", "not a CIDR range"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"RETRY_TIMES": "-1"}, ["RETRY_TIMES", "at least 0"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"DOWNLOAD_SLOTS": '{{"a.test": {{"delay": "slow"}}}}'},
         ["DOWNLOAD_SLOTS", "delay must be a number"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"REDIS_PARAMS": '{{"pasword": "x"}}'}, ["REDIS_PARAMS", "unknown key"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"METRICS_PORT": "{busy}"}, ["METRICS_PORT", "cannot listen on"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"METRICS_PORT": "70000"}, ["METRICS_PORT", "not a TCP port"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"SEEN_BLOOM_HASHES": "0"}, ["SEEN_BLOOM_HASHES", "at least 1"]),
        (["-a", "urls=http://127.0.0.1:9/"], {"SEEN_EXPECTED_URLS": "1000000000"},
         ["SEEN_EXPECTED_URLS", "SEEN_BLOOM_HASHES", "FRONTIER_SHARDS"]),
    ],
)
def test_bad_configuration_is_one_clear_line(
    args: list[str], settings: dict[str, object], names: list[str], tmp_path: Path
) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("\n# no urls\n")
    args = [arg.format(empty=empty) for arg in args]
    busy = socket.socket()  # a port something else already listens on
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    settings = {name: str(value).format(busy=busy.getsockname()[1]) for name, value in settings.items()}
    settings = {"CRAWL_DATA_DIR": tmp_path / "data", **settings}
    try:
        result = run_crawl(*args, settings=settings, timeout=60)
    finally:
        busy.close()
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for name in names:
        assert name in lines[0]


def test_unknown_spider_is_one_clear_line() -> None:
    result = subprocess.run(
        [*crawl_command()[:4], "nope"], cwd=ROOT, env=crawl_env(), capture_output=True, text=True, check=False
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "error: no spider named 'nope' (available: web)"


def test_scrapy_list_shows_web() -> None:
    result = subprocess.run(
        [*crawl_command()[:3], "list"], cwd=ROOT, env=crawl_env(), capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["web"]
