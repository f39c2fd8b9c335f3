"""Operating a crawl: figures, the progress line, metrics over HTTP, the frontier command, the report."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
import time
import urllib.request
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from crawler.crawlstate.keys import ShardKeys
from crawler.extensions.progress import ticks
from crawler.ops.figures import (
    MIN_RECORDS_FOR_TIME,
    FrontierFigures,
    Progress,
    ServerFigures,
    delta,
    latency_buckets,
    progress_line,
    totals_from_stats,
)
from crawler.ops.metrics import CrawlCollector
from crawler.ops.timeline import Sample
from crawler.report.html import ReportData, bucket, render
from support.mockweb import WebSpec, free_port
from tests.conftest import ROOT, RedisServer, crawl_command, crawl_env, run_crawl

STATS = {
    "downloader/response_count": 120,
    "downloader/response_bytes": 50_000,
    "downloader/response_status_count/200": 100,
    "downloader/response_status_count/404": 18,
    "robots/status/404": 3,
    "downloader/response_status_count/503": 5,
    "downloader/exception_type_count/builtins.TimeoutError": 2,
    "downloader/exception_type_count/crawler.frontier.outcome.Rescheduled": 40,
    "downloader/exception_type_count/scrapy.exceptions.IgnoreRequest": 9,
    "downloader/latency_le/0.05": 90,
    "downloader/latency_le/0.1": 25,
    "downloader/latency_le/+Inf": 5,
    "downloader/latency_sum": 7.5,
    "dedup/exact": 3,
    "dedup/near": 4,
    "robots/disallowed": 6,
    "start_time": "not a number",
}


def test_totals_from_stats_and_delta() -> None:
    totals = totals_from_stats(STATS)
    assert totals["pages"] == 120 and totals["bytes"] == 50_000
    assert totals["status:404"] == 18  # every response; the robots.txt 404s are not errors
    assert totals["error:http_4xx"] == 15 and totals["error:http_5xx"] == 5 and totals["error:TimeoutError"] == 2
    assert totals["latency:0.05"] == 90 and totals["latency:+Inf"] == 5
    assert "start_time" not in str(totals)
    assert not any("Rescheduled" in key or "IgnoreRequest" in key for key in totals), "control flow, not errors"
    later = dict(totals, pages=130, **{"status:200": 110})
    assert delta(later, totals) == {"pages": 10, "status:200": 10}
    assert [n for _, n in latency_buckets(totals)][:4] == [0, 0, 90, 25]


def test_progress_line_names_every_figure() -> None:
    totals = totals_from_stats(STATS)
    progress = Progress(totals, {"pages": 30}, 10.0, 60.0, FrontierFigures(1234, 8, 24, 3, 5000, 7))
    line = progress_line(progress)
    assert line.startswith("Progress: 120 pages (3.0/s now, 2.0/s overall)")
    for part in ("queued 1,234", "in flight 8", "hosts 24 active / 3 ready", "due 7", "http_4xx 15", "http_5xx 5",
                 "TimeoutError 2", "duplicates 3 exact / 4 near", "robots.txt drops 6"):
        assert part in line, part
    # Redis memory, its share of the limit and bytes per page; why fewer URLs are admitted.
    figures = FrontierFigures(1234, 8, 24, 3, 5000, 7, records=1000, memory_used=300 * 2**20,
                              memory_limit=2**30, memory_share=300 / 1024)
    line = progress_line(Progress(totals, {"pages": 30}, 10.0, 60.0, figures, "no new URL admitted"))
    assert "Redis 300.0 MiB of 1.0 GiB (29%), 314,573 B/page" in line
    assert line.endswith("| admitting less: no new URL admitted") or "admitting less: no new URL admitted" in line


def test_sample_round_trip_and_unknown_versions() -> None:
    sample = Sample(1700000000.5, "w1-42", 10, 1, 2, 300, 8, 24, 3)
    assert Sample.decode(sample.encode()) == sample
    assert Sample.decode(b"\x93\x02\x01\x02") is None
    assert Sample.decode(b"not msgpack \xff") is None


def test_series_bucket_every_worker() -> None:
    samples = [Sample(1000.0 + 10 * i, f"w{w}", 50, 0, 5, 1000 - i, 4, 8, 2) for i in range(30) for w in (1, 2)]
    series = bucket(samples, max_points=10)
    assert 1 < len(series.minutes) <= 11
    # Two workers at 50 pages per 10 s sample each: 10 pages/s together.
    assert all(abs(rate - 10.0) < 0.01 for rate in series.pages_per_second[:-1])
    assert all(abs(rate - 0.1) < 1e-9 for rate in series.duplicate_rate)


def test_collector_exposes_stable_names() -> None:
    class Stats:  # the one method the collector reads
        def get_stats(self) -> dict[str, object]:
            return dict(STATS)

    collector = CrawlCollector("c1", Stats())
    collector.frontier = FrontierFigures(10, 2, 3, 1, 50, 0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    for expected in (
        'crawler_pages_total{crawl="c1"} 120.0',
        'crawler_responses_total{crawl="c1",status="404"} 18.0',
        'crawler_errors_total{class="http_4xx",crawl="c1"} 15.0',
        'crawler_errors_total{class="TimeoutError",crawl="c1"} 2.0',
        'crawler_duplicates_total{crawl="c1",kind="near"} 4.0',
        'crawler_fetch_latency_seconds_bucket{crawl="c1",le="0.1"} 115.0',
        'crawler_fetch_latency_seconds_bucket{crawl="c1",le="+Inf"} 120.0',
        'crawler_fetch_latency_seconds_sum{crawl="c1"} 7.5',
        'crawler_frontier_queued_urls{crawl="c1"} 10.0',
        'crawler_urls_refused_total{crawl="c1",reason="memory"} 0.0',
        'crawler_redis_memory_used_ratio{crawl="c1"} 0.0',
        # The deprecated copies, until 0.2, saying so.
        'crawler_pages_per_second{crawl="c1",window="overall"}',
        "# HELP crawler_redis_memory_share Deprecated (until 0.2): use crawler_redis_memory_used_ratio",
    ):
        assert expected in text, expected
    assert "# HELP crawler_frontier_ready_hosts Hosts waiting for their next fetch" in text
    # Prometheus' conventions: every counter ends in _total, no gauge is a rate or in hours (but the deprecated).
    from crawler.ops.metrics import DEPRECATED

    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            if kind == "counter":
                assert name.endswith("_total"), name
            if name not in DEPRECATED:
                assert "per_second" not in name and "hours" not in name and not name.endswith("_share"), name
    # A worker that does not hold the crawl's lease exports no crawl-wide gauge: a fleet's sum is the crawl's.
    collector.crawl_wide = False
    quiet = generate_latest(registry).decode()
    assert "crawler_frontier_queued_urls" not in quiet and "crawler_redis_memory_used_bytes" not in quiet
    assert 'crawler_pages_total{crawl="c1"} 120.0' in quiet


def test_report_is_self_contained_and_escapes_names() -> None:
    samples = [Sample(1000.0 + 30 * i, "w1", 40, 1, 2, 500 - i, 4, 8, 2) for i in range(20)]
    data = ReportData("c<1>", 2000.0, totals_from_stats(STATS), samples, FrontierFigures(480, 4, 8, 2, 900, 3), [])
    html = render(data)
    assert html.count("<svg") == 6
    assert "c&lt;1&gt;" in html and "c<1>" not in html
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html), "no external resource"
    assert "<script" not in html


def test_hours_to_the_memory_limit_per_server_and_not_before_enough_pages() -> None:
    # Two primaries: 20,000 records each, 1 GiB limits, 100 MiB of fixed costs each.
    mib = 2**20
    full = ServerFigures("a:1", 600 * mib, 1024 * mib, 20_000, 100 * mib)
    roomy = ServerFigures("b:1", 300 * mib, 1024 * mib, 20_000, 100 * mib)
    figures = FrontierFigures(records=40_000, memory_used=900 * mib, memory_limit=2048 * mib,
                              memory_share=600 / 1024, servers=(full, roomy), growth=10.0)
    # Server a grows 500 MiB over the crawl's 40,000 records: 424 MiB left at 10 records/s.
    assert full.seconds_to_limit(10.0, 40_000) == pytest.approx(424 / (500 / 40_000 * 10))
    assert figures.hours_to_limit() == pytest.approx(424 / (500 / 40_000 * 10) / 3600)
    assert figures.hours_to_limit(20.0) == pytest.approx(figures.hours_to_limit() / 2)
    assert f"{figures.hours_to_limit():,.1f} h to the limit at this rate" in figures.memory_text()
    assert full.as_dict(10.0, 40_000)["bytes_per_page"] == round(500 * mib / 20_000, 1)
    # Not told without a limit, a rate, or before enough pages to tell.
    assert ServerFigures("c:1", 600 * mib, 0, 20_000, 0).seconds_to_limit(10.0, 40_000) is None
    assert full.seconds_to_limit(0.0, 40_000) is None
    early = replace(figures, records=MIN_RECORDS_FOR_TIME - 1)
    assert early.hours_to_limit() is None and "h to the limit" not in early.memory_text()


def test_a_report_lists_the_hosts_to_look_at_with_their_answers() -> None:
    answer = {"host": "a<b>.example", "status": "sleeping", "why": "backing off after 3 429/503 answers",
              "politeness": {"delay_reason": "backoff: 3 429/503 answers in a row"},
              "robots": {"state": "unreachable", "status": 503, "error": "http_503"},
              "queued": {"total": 41}, "pages": 1204, "errors": 37,
              "dead_letters": [{"error": "TimeoutError", "message": "took longer than 1.5 s"}]}
    data = ReportData("c1", 2000.0, {}, [], FrontierFigures(), [], [("37 errors, 41 queued", answer)])
    html = render(data)
    assert "Hosts to look at" in html and "a&lt;b&gt;.example" in html and "a<b>" not in html
    for text in ("37 errors, 41 queued", "sleeping: backing off", "unreachable, HTTP 503: http_503",
                 "TimeoutError took longer than 1.5 s", "1,204"):
        assert text in html, text
    assert "No host with errors or a queue." in render(ReportData("c1", 2000.0, {}, [], FrontierFigures(), []))


def test_the_timeline_has_samples_from_the_first_seconds() -> None:
    schedule = list(itertools.islice(ticks(30.0), 8))
    assert schedule == [(1, False), (2, False), (4, False), (8, False), (16, False), (30, True), (60, True),
                        (90, True)]
    assert list(itertools.islice(ticks(1.0), 3)) == [(1, True), (2, True), (3, True)]
    # A 30 s crawl's samples (1, 2, 4, 8, 16, 30 s and the final one) give a chart of several points.
    samples = [Sample(1000.0 + t, "w1", 10, 0, 0, 50, 2, 3, 1) for t in (1, 2, 4, 8, 16, 30, 31)]
    series = bucket(samples)
    assert len(series.minutes) >= 4 and all(rate > 0 for rate in series.pages_per_second)


# -- end to end ---------------------------------------------------------------------


def scrape(port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as reply:
            return str(reply.read().decode())
    except OSError:
        return None


def test_crawl_with_metrics_progress_and_report(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=12, sizes="uniform:12", fanout=3, nav=2, cross=2, latency_ms=(40, 80))
    web = mockweb_factory(spec)
    port = free_port()
    report = tmp_path / "report.html"
    command = crawl_command("-a", "urls=" + ",".join(web.url(h) for h in range(12)), settings={
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.3,
        "FRONTIER_DELAY_FACTOR": 0, "METRICS_PORT": port, "PROGRESS_INTERVAL": 1, "REPORT_PATH": report,
    })
    process = subprocess.Popen(command, cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    scraped = None
    deadline = time.monotonic() + 60
    while process.poll() is None and time.monotonic() < deadline:
        text = scrape(port)
        if text and re.search(r'crawler_pages_total\{crawl="[^"]+"\} [1-9]', text) \
                and "crawler_frontier_queued_urls" in text:
            scraped = text
            break
        time.sleep(0.3)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr[-3000:]
    assert scraped is not None, "the metrics endpoint never showed pages and frontier figures"
    for name in ("crawler_responses_total", "crawler_fetch_latency_seconds_bucket", "crawler_frontier_active_hosts",
                 "crawler_pages_per_second", "crawler_redis_memory_used_bytes", "crawler_redis_bytes_per_page"):
        assert name in scraped
    assert re.search(r"Progress: \d+ pages \([\d.]+/s now, [\d.]+/s overall\) \| queued", stderr)
    # Redis memory in the progress line (the test's redis-server has no maxmemory: no share).
    assert re.search(r"\| Redis [\d.]+ MiB, [\d,]+ B/page \|", stderr)
    assert "Final Progress: " in stderr
    assert report.exists() and "<svg" in report.read_text()
    # The shared record: totals and a timeline in Redis.
    client = redis_server.client()
    keys = ShardKeys(crawl_id)
    assert int(client.hget(keys.crawl_key("totals"), "pages") or 0) == len(web.entries())
    assert client.llen(keys.crawl_key("timeline")) >= 2


def frontier_command(*args: str, settings: dict[str, object]) -> subprocess.CompletedProcess[str]:
    command = [*crawl_command()[:3], "frontier", *args]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    return subprocess.run(command, cwd=ROOT, env=crawl_env(), capture_output=True, text=True, timeout=120,
                          check=False)


def test_frontier_command_seed_stats_hosts_drain_report_reset(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=6, sizes="uniform:5", fanout=2, nav=1, cross=1)
    web = mockweb_factory(spec)
    settings: dict[str, object] = {"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id}
    missing = frontier_command("stats", settings={**settings, "FRONTIER_CRAWL_ID": crawl_id + "x"})
    assert missing.returncode == 2 and missing.stderr.startswith("error: FRONTIER_CRAWL_ID: no crawl")
    unreachable = frontier_command("stats", settings={"REDIS_URL": "redis://127.0.0.1:1/0"})
    assert unreachable.returncode == 2 and "cannot reach Redis" in unreachable.stderr

    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(6)))
    seeded = frontier_command("seed", str(seeds), "ftp://nope/", settings=settings)
    assert seeded.returncode == 2 and "not an http(s) URL" in seeded.stderr
    seeded = frontier_command("seed", str(seeds), settings=settings)
    assert seeded.returncode == 0, seeded.stderr
    assert "6 seeds added, 0 already known" in seeded.stdout
    again = frontier_command("seed", web.url(0), settings=settings)
    assert "0 seeds added, 1 already known" in again.stdout
    stats = frontier_command("stats", settings=settings)
    assert re.search(r"queued URLs\s+6\b", stats.stdout), stats.stdout

    # A worker with no seeds of its own crawls what the command seeded.
    result = run_crawl(settings={**settings, "FRONTIER_MIN_DELAY": 0.05, "PROGRESS_INTERVAL": 1,
                                 "CRAWL_DATA_DIR": tmp_path / "data"})
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.stderr[-3000:]
    assert (tmp_path / "data" / crawl_id / "report.html").exists()
    stats = frontier_command("stats", settings=settings)
    assert re.search(r"pages fetched\s+\d+", stats.stdout) and "status codes" in stats.stdout
    assert re.search(r"URL records\s+[1-9]", stats.stdout), stats.stdout
    assert re.search(r"redis memory\s+[\d.]+ MiB, [\d,]+ B/page", stats.stdout), stats.stdout
    assert re.search(r"queued URLs\s+0\b", stats.stdout), stats.stdout
    hosts = frontier_command("hosts", "--top", "3", settings=settings)
    assert hosts.returncode == 0
    lines = hosts.stdout.strip().splitlines()
    assert lines[0].split()[:3] == ["host", "pages", "queued"] and len(lines) == 4

    # Drain: a running worker stops claiming and closes; resume undoes it.
    seeds2 = tmp_path / "seeds2.txt"
    big = mockweb_factory(WebSpec(hosts=4, sizes="uniform:200", fanout=2, nav=1, cross=0))
    seeds2.write_text("".join(big.url(h) + "\n" for h in range(4)))
    crawl2 = crawl_id + "d"
    settings2: dict[str, object] = {"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl2}
    worker = subprocess.Popen(
        crawl_command("-a", f"seeds={seeds2}", settings={**settings2, "FRONTIER_MIN_DELAY": 0.2,
                                                          "FRONTIER_IDLE_POLL": 0.2}),
        cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 60
    while len(big.entries()) < 8 and time.monotonic() < deadline:
        time.sleep(0.1)
    drained = frontier_command("drain", settings=settings2)
    assert drained.returncode == 0 and "is draining" in drained.stdout
    _, stderr = worker.communicate(timeout=60)
    assert worker.returncode == 0 and "'frontier/drained': True" in stderr, stderr[-3000:]
    left = frontier_command("stats", settings=settings2)
    assert "(draining)" in left.stdout
    queued = int(re.search(r"queued URLs\s+([\d,]+)", left.stdout).group(1).replace(",", ""))  # type: ignore[union-attr]
    assert queued > 0, "nothing was lost: the rest is still queued"
    assert frontier_command("drain", "--resume", settings=settings2).returncode == 0
    assert "(draining)" not in frontier_command("stats", settings=settings2).stdout

    out = tmp_path / "on-demand.html"
    report = frontier_command("report", "--out", str(out), settings=settings)
    assert report.returncode == 0 and out.exists()

    # Reset deletes one crawl's keys, and only them.
    client = redis_server.client()
    neighbours = [f"frontier:{{{crawl_id}2}}:meta", f"frontier:{{{crawl_id}.x}}:meta"]
    for key in neighbours:
        client.set(key, 1)
    refused = frontier_command("reset", settings=settings)
    assert refused.returncode == 2 and "--crawl-id" in refused.stderr
    dry = frontier_command("reset", "--crawl-id", crawl_id, settings=settings)
    assert re.search(r"has \d+ keys; add --yes", dry.stdout)
    done = frontier_command("reset", "--crawl-id", crawl_id, "--yes", settings=settings)
    assert done.returncode == 0 and "deleted" in done.stdout
    assert not list(client.scan_iter(match=f"frontier:{{{crawl_id}}}*"))
    assert not list(client.scan_iter(match=f"frontier:{{{crawl_id}.0}}*"))
    assert all(client.exists(key) for key in neighbours)
    assert client.exists(ShardKeys(crawl2).crawl_key("meta"))


def png_is_blank(png: bytes) -> bool:
    """A screenshot of one flat colour compresses to (nearly) a single byte value once inflated."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    data = b""
    offset = 8
    while offset < len(png):
        length = int.from_bytes(png[offset:offset + 4], "big")
        kind = png[offset + 4:offset + 8]
        if kind == b"IDAT":
            data += png[offset + 8:offset + 8 + length]
        offset += 12 + length
    raw = zlib.decompress(data)
    return len(set(raw)) < 16


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (make test installs it)")
@pytest.mark.e2e
def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    samples = [Sample(1000.0 + 30 * i, f"w{i % 2}", 40 + i, i % 3, 2, 500 - i, 4, 8, 2) for i in range(40)]
    data = ReportData("render", 2000.0, totals_from_stats(STATS), samples, FrontierFigures(480, 4, 8, 2, 900, 3),
                      [])
    page = tmp_path / "report.html"
    page.write_text(render(data))
    shot = tmp_path / "shot.png"
    result = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--window-size=1400,1200", "--enable-logging=stderr", "--v=0", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert shot.exists() and shot.stat().st_size > 5000
    assert not png_is_blank(shot.read_bytes())
    console_errors = [line for line in result.stderr.splitlines() if "CONSOLE" in line and "ERROR" in line.upper()]
    assert not console_errors, console_errors
    blank = tmp_path / "blank.html"
    blank.write_text("<html><body style='background:#fff'></body></html>")
    blank_shot = tmp_path / "blank.png"
    subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp_path / 'profile2'}",
         f"--screenshot={blank_shot}", blank.as_uri()],
        capture_output=True, timeout=120, check=True,
    )
    assert png_is_blank(blank_shot.read_bytes()), "the blank check tells a blank page from the report"


@pytest.mark.parametrize("shards", [1, 3])
def test_the_longest_back_queues_are_counted_over_every_level(redis_server: RedisServer, shards: int) -> None:
    """The report's "N queued" hosts: back-queue lengths summed over the priority levels, read per
    batch of hosts in one script call, largest first; hosts with empty queues are left out."""
    import asyncio

    from redis.asyncio import Redis

    from crawler.crawlstate.shards import ShardRouter
    from crawler.ops.view import longest_queues

    router = ShardRouter(f"backlog-{shards}-{time.time_ns()}", shards)
    client = redis_server.client()
    sizes = {f"h{i}.example": i % 7 for i in range(1200)}  # 0..6 URLs, over levels 0, 5 and 15
    for host, size in sizes.items():
        keys = router.keys_for(host)
        client.sadd(keys.active, host)
        for n in range(size):
            client.lpush(keys.queue(host, (0, 5, 15)[n % 3]), f"entry-{n}")

    async def main() -> list[tuple[str, int]]:
        async_client = Redis.from_url(redis_server.url)
        try:
            return await longest_queues(async_client, router, 5)
        finally:
            await async_client.aclose()

    answer = asyncio.run(main())
    expected = sorted(((size, host) for host, size in sizes.items() if size), reverse=True)[:5]
    assert answer == [(host, size) for size, host in expected]
    assert all(size == 6 for _, size in answer)
