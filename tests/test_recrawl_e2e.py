"""Freshness and priority end to end: real crawls of the mock web, Redis, WARC files.

The mock web's changing hosts have pages that change at every fetch, at the
times of a Poisson process (one generator per page, so the change times are
fixed) or never, with ETag and Last-Modified and 304 answers to conditional
requests. Time is simulated on both sides (``RECRAWL_TIME_SCALE``: one real
second is a quarter of an hour), never waited for. The demand (every page at
the minimum interval) stays well under what one polite host can serve, so the
low-priority static pages are not starved by the changing ones.

The continuous crawl's revisit counts are compared with margins that
``tests/test_policy.py`` establishes for the same settings on a
deterministic clock (200 pages of each kind, revisits on time or late by a
whole minimum interval): the claims hold by the policy's construction, and
20 pages of each kind make the crawl's means close to the policy's.
"""

from __future__ import annotations

import glob
import json
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from warcio.archiveiterator import ArchiveIterator

from crawler.crawlstate.keys import ShardKeys
from crawler.policy.recrawl import ChangeHistory, estimate_change_rate
from support.mockweb import WebSpec, host_ip
from tests.conftest import TEST_SETTINGS, MockWeb, RedisServer, run_crawl, start_mockweb, stat, url_record

CHANGING = 1
PAGES = 3
PERIOD = 3600.0  # mean gap between changes of a Poisson page, simulated seconds
SCALE = 900.0  # simulated seconds per real second: 45 s of crawl are 11 simulated hours
UA = "freshbot/1.0 (+https://example.org/freshbot)"
#: The continuous crawl: 4 changing hosts of 5 pages of each kind (20 per kind), and
#: Poisson pages changing every 3 hours on average, so that their revisit interval
#: (half the expected gap, halved again for a fast-changing page's importance) is
#: 3 times the minimum one.
CONTINUOUS_HOSTS = (1, 2, 3, 4)
CONTINUOUS_PAGES = 5
CONTINUOUS_PERIOD = 3 * 3600.0
KINDS = ("every", "poisson", "never")



def changing_web(
    tmp: Path, epoch: float, hosts: int = 3, changing: tuple[int, ...] = (CHANGING,), pages: int = PAGES,
    period: float = PERIOD,
) -> MockWeb:
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"changing": {"hosts": list(changing), "pages": pages, "period": period,
                                                 "epoch": epoch, "scale": SCALE}}))
    spec = WebSpec(hosts=hosts, sizes="uniform:4", fanout=2, nav=0, cross=0, scenario=str(scenario))
    return start_mockweb(spec, tmp / "mockweb.log")


def fetches_by_path(web: MockWeb, hosts: tuple[int, ...]) -> dict[tuple[str, str], Counter[int]]:
    """(host, path) -> Counter of statuses answered."""
    names = {host_ip(host) for host in hosts}
    out: dict[tuple[str, str], Counter[int]] = {}
    for entry in web.entries():
        if entry.host in names and entry.path != "/robots.txt":
            out.setdefault((entry.host, entry.path), Counter())[entry.status] += 1
    return out


def changing_pages(kind: str) -> list[tuple[str, str]]:
    """(host, path) of the continuous crawl's pages of one kind."""
    return [(host_ip(host), f"/c/{kind}/{i}") for host in CONTINUOUS_HOSTS for i in range(CONTINUOUS_PAGES)]


def warc_records(crawl_data: Path, crawl_id: str) -> list[Any]:
    out = []
    for path in sorted(glob.glob(str(crawl_data / crawl_id / "warc" / "*.warc.gz"))):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle):
                record.content_stream().read()
                out.append(record)
    return out


# -- continuous mode, simulated hours -------------------------------------------------------


@pytest.fixture(scope="module")
def continuous(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("continuous")
    epoch = time.time()
    web = changing_web(tmp, epoch, hosts=1 + len(CONTINUOUS_HOSTS), changing=CONTINUOUS_HOSTS,
                       pages=CONTINUOUS_PAGES, period=CONTINUOUS_PERIOD)
    crawl_id = "fresh-continuous"
    try:
        result = run_crawl(
            "-a", "urls=" + ",".join(web.url(host) for host in CONTINUOUS_HOSTS), "-a", "mode=continuous",
            settings={
                "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "USER_AGENT": UA,
                "FRONTIER_MIN_DELAY": 0.05, "FRONTIER_DELAY_FACTOR": 0,
                "RECRAWL_TIME_SCALE": SCALE, "RECRAWL_TIME_EPOCH": epoch,
                "RECRAWL_MIN_INTERVAL": 900, "RECRAWL_INITIAL_INTERVAL": 3600, "RECRAWL_MAX_INTERVAL": 2 * 86400,
                "RECRAWL_DRAIN_INTERVAL": 0.5, "CLOSESPIDER_TIMEOUT": 45,
            },
            timeout=150,
        )
        fetches = fetches_by_path(web, CONTINUOUS_HOSTS)
    finally:
        web.stop()
    client = redis.Redis.from_url(redis_server.url)
    keys = ShardKeys(crawl_id)
    metadata = {}
    for kind in KINDS:
        for host, path in changing_pages(kind):
            url = f"http://{host}:{web.port}{path}"
            metadata[(host, path)] = url_record(client, crawl_id, url)
    quality = {k.decode(): int(v) for k, v in client.hgetall(keys.host_quality).items() if k}  # b"": the placeholder
    due = int(client.get(keys.due_count) or 0)
    waiting = int(client.get(keys.queued) or 0) + client.zcount(keys.leases, "-inf", "(inf")
    client.close()
    return {"result": result, "fetches": fetches, "metadata": metadata, "quality": quality, "due": due, "waiting": waiting,
            "crawl_id": crawl_id}


def test_continuous_mode_keeps_revisiting(continuous: dict[str, Any]) -> None:
    result = continuous["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    # The frontier was empty most of the time: only the time limit ended the crawl.
    assert result.stats["finish_reason"] == "closespider_timeout"
    assert stat(result, "recrawl/drained") > 30
    # Every page waits for its next visit in the due set, or (drained when the crawl
    # stopped) in the frontier's queues: none is lost, none is there twice.
    assert continuous["due"] + continuous["waiting"] == len(CONTINUOUS_HOSTS) * (1 + 3 * CONTINUOUS_PAGES)


def mean_fetches(fetches: dict[tuple[str, str], Counter[int]], kind: str) -> float:
    return statistics.mean(sum(fetches.get(page, Counter()).values()) for page in changing_pages(kind))


def test_fast_changing_pages_are_revisited_more_often(continuous: dict[str, Any]) -> None:
    fetches = continuous["fetches"]
    every, poisson, never = (mean_fetches(fetches, kind) for kind in KINDS)
    # The policy separates them by 2x and 1.6x (tests/test_policy.py); 1.3x leaves room for the crawl.
    assert every > 1.3 * poisson > 1.3 * never, (every, poisson, never)
    assert never >= 3  # revisited (conditionally) all the same, at doubling intervals


def test_estimated_change_rates(continuous: dict[str, Any]) -> None:
    """Poisson pages (true rate 1 / 3 hours): the mean estimate of the 20 is within 50% of the true rate."""
    estimates = {}
    for kind in KINDS:
        rates = []
        for page in changing_pages(kind):
            record = continuous["metadata"][page]
            assert record is not None and record.observations >= 2, (kind, page, record)
            history = ChangeHistory(record.observations, record.changes, record.first_fetch, record.fetched_at)
            rates.append(estimate_change_rate(history) or 0.0)
        estimates[kind] = statistics.mean(rates)
    assert estimates["poisson"] == pytest.approx(1 / CONTINUOUS_PERIOD, rel=0.5), estimates["poisson"] * CONTINUOUS_PERIOD
    assert estimates["never"] == 0.0
    assert estimates["every"] > 2 * estimates["poisson"]
    record = continuous["metadata"][changing_pages("never")[0]]
    assert record.next_visit > record.fetched_at  # the next visit is recorded with the URL


def test_conditional_requests_get_304_and_revisit_records(continuous: dict[str, Any]) -> None:
    result, fetches = continuous["result"], continuous["fetches"]
    never = changing_pages("never")
    never_304 = sum(fetches.get(page, Counter())[304] for page in never)
    never_200 = sum(fetches.get(page, Counter())[200] for page in never)
    assert never_200 == len(never)  # the first fetch; every revisit cost a 304
    assert never_304 >= len(never)
    assert sum(fetches.get(page, Counter())[304] for page in changing_pages("every")) == 0
    assert stat(result, "recrawl/conditional") >= never_304
    assert stat(result, "recrawl/not_modified") == sum(c[304] for c in fetches.values())
    records = warc_records(Path(str(TEST_SETTINGS["CRAWL_DATA_DIR"])), continuous["crawl_id"])
    not_modified = [r for r in records if r.rec_type == "revisit"
                    and r.rec_headers.get_header("WARC-Profile", "").endswith("/server-not-modified")]
    assert len(not_modified) == sum(c[304] for c in fetches.values())
    # Each 304 stands for the latest capture of its URL that holds a payload
    # (one writer: the records are in fetch order).
    latest: dict[str, str] = {}
    checked = 0
    for record in records:
        uri = record.rec_headers.get_header("WARC-Target-URI")
        if record.rec_type == "response":
            latest[uri] = record.rec_headers.get_header("WARC-Date")
        elif record in not_modified:
            assert record.http_headers.get_statuscode() == "304"
            assert record.rec_headers.get_header("WARC-Refers-To-Target-URI") == uri
            assert record.rec_headers.get_header("WARC-Refers-To-Date") == latest[uri]
            checked += 1
    assert checked == len(not_modified)
    host, path = never[0]
    requests = [r for r in records if r.rec_type == "request"
                and r.rec_headers.get_header("WARC-Target-URI", "").endswith(path)
                and f"//{host}:" in r.rec_headers.get_header("WARC-Target-URI", "")]
    assert requests[0].http_headers.get_header("If-None-Match") is None
    assert all(r.http_headers.get_header("If-None-Match") == '"_c_never_0-v0"' for r in requests[1:])


def test_host_quality_counters(continuous: dict[str, Any]) -> None:
    quality = continuous["quality"]
    for index in CONTINUOUS_HOSTS:
        host = host_ip(index)
        pages = sum(sum(c.values()) for (name, _), c in continuous["fetches"].items() if name == host)
        assert quality[f"{host}|n"] == pages
        assert quality.get(f"{host}|e", 0) == 0


# -- batch mode: ends by itself; the next run revisits what is due --------------------------------


def test_batch_mode_ends_and_the_next_run_revisits(tmp_path: Path, redis_server: RedisServer) -> None:
    epoch = time.time()
    web = changing_web(tmp_path, epoch, hosts=3)
    crawl_id = f"fresh-batch-{int(epoch)}"
    settings: dict[str, object] = {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "USER_AGENT": UA,
        "FRONTIER_MIN_DELAY": 0.02, "FRONTIER_DELAY_FACTOR": 0,
        # The mock web's clock runs fast; the crawler's stays real in run 1.
        "RECRAWL_MIN_INTERVAL": 3600, "RECRAWL_INITIAL_INTERVAL": 86400,
    }
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(3)))
    client = redis.Redis.from_url(redis_server.url)
    keys = ShardKeys(crawl_id)
    try:
        started = time.time()
        first = run_crawl("-a", f"seeds={seeds}", settings=settings, timeout=120)
        assert first.returncode == 0, first.stderr[-3000:]
        assert first.stats["finish_reason"] == "finished"
        assert time.time() - started < 60
        # Every page answered 200; robots.txt (a 404 here) is not revisited.
        pages_first = stat(first, "downloader/response_status_count/200")
        # Every page waits for its revisit, a day from now: nothing is due, so the run ended.
        assert int(client.get(keys.due_count)) == stat(first, "recrawl/scheduled") == 2 * 4 + 1 + 3 * PAGES
        assert stat(first, "recrawl/drained") == 0
        web.entries()  # the log so far
        before = len(web.entries())

        # Two days later: everything is due. The second run drains it, revisits, and ends.
        second = run_crawl(settings={**settings, "RECRAWL_TIME_OFFSET": 2 * 86400}, timeout=120)
        assert second.returncode == 0, second.stderr[-3000:]
        assert second.stats["finish_reason"] == "finished"
        assert stat(second, "recrawl/drained") == int(client.get(keys.due_count)) == pages_first
        revisits = [e for e in web.entries()[before:] if e.path != "/robots.txt"]
        statuses = Counter(e.status for e in revisits if e.host == host_ip(CHANGING))
        # The static pages of the changing host (root, never) answer 304; "every" pages 200.
        assert statuses[304] >= 1 + PAGES and statuses[200] >= PAGES
        # The plain mock hosts send no validators: unconditional revisits, exact duplicates of themselves.
        assert stat(second, "dedup/exact_same_url") >= 1
        assert stat(second, "frontier/enqueued") == 0  # no new URL: only revisits
    finally:
        web.stop()
        client.close()


# -- priority under a constrained budget -------------------------------------------------------------


def run_budgeted(tmp: Path, redis_server: RedisServer, web: MockWeb, importance: dict[str, float]) -> list[str]:
    """Hosts of the pages fetched, in order, with one back queue at a time and a 12-response budget."""
    crawl_id = f"prio-{len(importance)}-{int(time.time() * 1000)}"
    seeds = tmp / f"seeds-{crawl_id}.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(6)))
    before = len(web.entries())
    result = run_crawl(
        "-a", f"seeds={seeds}",
        settings={
            "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "USER_AGENT": UA,
            "FRONTIER_MIN_DELAY": 0, "FRONTIER_DELAY_FACTOR": 0, "CONCURRENT_REQUESTS": 1,
            # One back queue at a time: when a host is done, the front queues'
            # priority decides which host comes next.
            "FRONTIER_ACTIVE_HOSTS": 1, "CLOSESPIDER_PAGECOUNT": 12,
            "PRIORITY_HOST_IMPORTANCE": json.dumps(importance),
        },
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return [e.host for e in web.entries()[before:] if e.path != "/robots.txt"]


def test_important_hosts_are_fetched_first_under_a_budget(tmp_path: Path, redis_server: RedisServer) -> None:
    # Six hosts of three pages; the budget (robots.txt answers count) covers about three of them.
    spec = WebSpec(hosts=6, sizes="uniform:3", fanout=2, nav=0, cross=0)
    web = start_mockweb(spec, tmp_path / "mockweb.log")
    important = host_ip(4)
    try:
        plain = run_budgeted(tmp_path, redis_server, web, {})
        ranked = run_budgeted(tmp_path, redis_server, web, {important: 1.0})
    finally:
        web.stop()
    # Without a signal, hosts come in seed order and the fifth is never reached.
    assert important not in plain, plain
    # With it, the important host is the first or the second host crawled
    # (the first seed may be claimed before the others are enqueued), in full.
    assert ranked[:6].count(important) == 3, ranked
