"""Hosts that need JavaScript, rendered in headless Chromium, end to end.

A mock web of static hosts and of hosts whose pages are application shells
(their text and links are built by a script from a JSON API); one of those
("evil") also asks for a path its robots.txt forbids, for another address and
for an image. One crawl, then the server's own log, the stats and the WARC
files are checked.
"""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from support.mockweb import LogEntry, WebSpec, delay_audit, host_ip
from tests.conftest import RedisServer, run_crawl, start_mockweb, stat
from tests.test_ops import frontier_command

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(shutil.which("chromium") is None, reason="needs chromium")]

STATIC = (0, 3, 4)
JS = 1
EVIL = 2
PAGES = 4
DELAY = 0.25
LEAK = "127.99.0.1"
ROBOTS = "User-agent: *\nDisallow: /private/\n"


@pytest.fixture(scope="module")
def render_crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("render")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({
        "js": {"hosts": [JS], "evil": [EVIL], "leak": f"http://{LEAK}:{{port}}/leak"},
        "robots": {str(JS): {"body": ROBOTS}, str(EVIL): {"body": ROBOTS}},
    }))
    spec = WebSpec(hosts=5, sizes=f"uniform:{PAGES}", fanout=2, nav=1, cross=0, latency_ms=(2.0,),
                   scenario=str(scenario))
    web = start_mockweb(spec, tmp / "mockweb.log")
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(web.url(host) + "\n" for host in range(spec.hosts)))
    data = tmp / "crawl-data"
    try:
        result = run_crawl(
            "-a", f"seeds={seeds}",
            settings={
                "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "render", "CRAWL_DATA_DIR": str(data),
                "FRONTIER_MIN_DELAY": DELAY, "FRONTIER_DELAY_FACTOR": 0,
                # Only the mock web's addresses may be contacted: the leak's address may not.
                "ALLOW_PRIVATE_NETWORKS": False, "PRIVATE_NETWORKS_ALLOWLIST": "127.20.0.0/16",
                "RENDER_SUBREQUEST_HOSTS": LEAK, "RENDER_SAMPLE_PAGES": 2,
                "CLOSESPIDER_TIMEOUT": 90, "LOG_LEVEL": "DEBUG",
            },
            timeout=180,
        )
        entries = web.entries()
    finally:
        web.stop()
    records: list[dict[str, Any]] = []
    for path in sorted(data.rglob("*.warc.gz")):
        with open(path, "rb") as handle:
            for record in ArchiveIterator(handle):
                records.append({
                    "type": record.rec_type, "url": record.rec_headers.get_header("WARC-Target-URI"),
                    "id": record.rec_headers.get_header("WARC-Record-ID"),
                    "refers_to": record.rec_headers.get_header("WARC-Refers-To"),
                    "body": record.content_stream().read(),
                })
    return {"result": result, "entries": entries, "records": records, "port": web.port}


def test_links_built_by_javascript_are_found_on_rendered_hosts(render_crawl: dict[str, Any]) -> None:
    result = render_crawl["result"]
    assert result.returncode == 0, result.stderr[-3000:]
    entries: list[LogEntry] = render_crawl["entries"]
    for host in (*STATIC, JS, EVIL):
        pages = sorted(e.path for e in entries if e.host == host_ip(host) and e.path in ("/", "/p/1", "/p/2", "/p/3"))
        # The shells link nowhere: /p/N of a JavaScript host is known only from its rendered DOM.
        assert pages == ["/", "/p/1", "/p/2", "/p/3"], (host, pages)
    assert stat(result, "render/rendered") == 2 * PAGES
    assert stat(result, "render/browser_launches") == 1
    assert stat(result, "render/marked/js") == 2
    # Static hosts were sampled, marked static, and never rendered.
    assert stat(result, "render/marked/static") == len(STATIC)
    assert stat(result, "render/detected/no_scripts") >= 2 * len(STATIC)


def test_the_browser_asks_only_for_what_robots_addresses_and_types_allow(render_crawl: dict[str, Any]) -> None:
    result = render_crawl["result"]
    entries: list[LogEntry] = render_crawl["entries"]
    paths = [e.path for e in entries]
    assert not [p for p in paths if p.startswith("/private/")], "robots.txt disallows /private/"
    assert "/leak" not in paths, "the leak address is not in PRIVATE_NETWORKS_ALLOWLIST"
    assert "/static/logo.png" not in paths, "images are not fetched"
    # The scripts and their data calls were fetched, once per page.
    for host in (JS, EVIL):
        asked = [e.path for e in entries if e.host == host_ip(host)]
        assert asked.count("/static/app.js") == PAGES
        assert len([p for p in asked if p.startswith("/api/page?")]) == PAGES
    assert stat(result, "render/subrequests/blocked_robots") == PAGES
    assert stat(result, "render/subrequests/blocked_address") == PAGES
    assert stat(result, "render/subrequests/blocked_type") == PAGES
    assert stat(result, "render/subrequests/fetched") == 2 * 2 * PAGES


def test_politeness_holds_for_the_browser_requests_too(render_crawl: dict[str, Any]) -> None:
    by_host: dict[str, list[LogEntry]] = defaultdict(list)
    for entry in render_crawl["entries"]:
        by_host[entry.host].append(entry)
    for host, entries in by_host.items():
        audit = delay_audit(entries, DELAY, 0.0)
        assert (audit.overlaps, audit.short_gaps) == (0, 0), host


def test_the_rendered_dom_is_archived_beside_the_response(render_crawl: dict[str, Any]) -> None:
    records = render_crawl["records"]
    port = render_crawl["port"]
    responses = {r["url"]: r for r in records if r["type"] in ("response", "revisit")}
    conversions = [r for r in records if r["type"] == "conversion"]
    rendered_urls = {f"http://{host_ip(h)}:{port}{p}" for h in (JS, EVIL) for p in ("/", "/p/1", "/p/2", "/p/3")}
    assert {r["url"] for r in conversions} == rendered_urls
    for conversion in conversions:
        response = responses[conversion["url"]]
        assert conversion["refers_to"] == response["id"]
        assert b"<a href=" in conversion["body"] and b"<div id=\"root\">" in conversion["body"]
    # The raw responses are the shells the server sent.
    for url in rendered_urls:
        if responses[url]["type"] == "response":
            assert b"<div id='root'></div>" in responses[url]["body"]


def test_rendered_pages_reach_the_index_by_their_rendered_text(render_crawl: dict[str, Any]) -> None:
    result = render_crawl["result"]
    # The shells are byte for byte the same (WARC revisits), yet every rendered page passes the
    # index gate: its text and SimHash are the rendered DOM's, different on every page.
    assert stat(result, "index/skipped/exact_duplicate") == 0
    assert stat(result, "index/passed") == 5 * PAGES


def test_no_browser_for_a_crawl_of_static_hosts(tmp_path: Path, redis_server: RedisServer) -> None:
    spec = WebSpec(hosts=3, sizes="uniform:3", fanout=2, nav=1, cross=0)
    web = start_mockweb(spec, tmp_path / "mockweb.log")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(host) + "\n" for host in range(spec.hosts)))
    try:
        result = run_crawl("-a", f"seeds={seeds}", settings={
            "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "render-static", "FRONTIER_MIN_DELAY": 0.05,
            "FRONTIER_DELAY_FACTOR": 0, "CLOSESPIDER_TIMEOUT": 60,
        })
    finally:
        web.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    assert stat(result, "response_received_count") >= 3 * 3
    assert stat(result, "render/browser_launches") == 0
    assert stat(result, "render/rendered") == 0
    assert stat(result, "render/marked/static") == 3


def test_an_operator_forces_rendering_on_and_off(tmp_path: Path, redis_server: RedisServer) -> None:
    """RENDER_HOSTS / RENDER_NEVER_HOSTS win over detection; ``scrapy frontier render`` lists and changes marks."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"js": {"hosts": [JS]}}))
    spec = WebSpec(hosts=2, sizes="uniform:3", fanout=2, nav=1, cross=0, scenario=str(scenario))
    web = start_mockweb(spec, tmp_path / "mockweb.log")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(host) + "\n" for host in range(spec.hosts)))
    settings: dict[str, object] = {"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "render-forced"}
    try:
        result = run_crawl("-a", f"seeds={seeds}", settings={
            **settings, "FRONTIER_MIN_DELAY": 0.05, "FRONTIER_DELAY_FACTOR": 0, "CLOSESPIDER_TIMEOUT": 60,
            "RENDER_HOSTS": host_ip(0), "RENDER_NEVER_HOSTS": host_ip(JS),
        })
        entries = web.entries()
    finally:
        web.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    # The static host is rendered because the operator says so; the JavaScript host never is,
    # so its links stay invisible and only its root is fetched.
    assert stat(result, "render/rendered") == 3
    assert sorted(e.path for e in entries if e.host == host_ip(JS)) == ["/", "/robots.txt"]
    assert stat(result, "render/detected/empty_app_root") == 0  # a forced host is not sampled

    listed = frontier_command("render", settings=settings)
    assert listed.returncode == 0, listed.stderr
    assert f"{host_ip(0)}\ton (operator)" in listed.stdout and f"{host_ip(JS)}\toff (operator)" in listed.stdout
    changed = frontier_command("render", "auto", host_ip(JS), settings=settings)
    assert changed.returncode == 0 and "rendered as detected" in changed.stdout
    assert host_ip(JS) not in frontier_command("render", settings=settings).stdout
    wrong = frontier_command("render", "sometimes", "example.org", settings=settings)
    assert wrong.returncode != 0


HOSTILE = ("never_settles", "allocate", "busy", "popup", "download", "scroll")


def test_hostile_pages_are_bounded_and_the_crawl_goes_on(tmp_path: Path, redis_server: RedisServer) -> None:
    """A page that never settles, allocates without end, loops, opens popups, downloads, scrolls forever:
    each render ends within its limits, is counted, and every page is still archived as fetched."""
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"js": {"hostile": {str(i): kind for i, kind in enumerate(HOSTILE)}}}))
    spec = WebSpec(hosts=len(HOSTILE), sizes="uniform:1", fanout=1, nav=0, cross=0, scenario=str(scenario))
    web = start_mockweb(spec, tmp_path / "mockweb.log")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(host) + "\n" for host in range(spec.hosts)))
    data = tmp_path / "crawl-data"
    # A small budget: a page's script and its data take two requests, so the page that
    # never settles reaches the budget with its second ping, however slow the machine.
    budget = 3
    try:
        result = run_crawl("-a", f"seeds={seeds}", settings={
            "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "render-hostile", "CRAWL_DATA_DIR": str(data),
            "FRONTIER_MIN_DELAY": 0.1, "FRONTIER_DELAY_FACTOR": 0, "CLOSESPIDER_TIMEOUT": 120,
            "RENDER_TIMEOUT": 8, "RENDER_JS_HEAP_MB": 32, "RENDER_CONCURRENCY": 3, "RENDER_MAX_SUBREQUESTS": budget,
        }, timeout=240)
        entries = web.entries()
    finally:
        web.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    tried = stat(result, "render/rendered") + sum(v for k, v in result.stats.items() if k.startswith("render/failed/"))
    assert tried == len(HOSTILE), result.stats
    # Every page is archived as fetched, rendered or not (and every robots.txt answer).
    responses = []
    for path in sorted(data.rglob("*.warc.gz")):
        with open(path, "rb") as handle:
            responses += [r.rec_headers.get_header("WARC-Target-URI") for r in ArchiveIterator(handle)
                          if r.rec_type in ("response", "revisit")]
    pages = [uri for uri in responses if not uri.endswith("/robots.txt")]
    assert sorted(pages) == sorted(web.url(host) for host in range(spec.hosts))
    assert len(responses) - len(pages) == spec.hosts
    paths = [e.path for e in entries]
    assert "/file.bin" not in paths, "the browser downloads nothing"
    pings = [p for p in paths if p.startswith("/api/ping")]
    assert len(pings) <= budget - 2, "the per-page budget holds (after the script and its data)"
    assert stat(result, "render/timeout") + stat(result, "render/failed/no_dom") >= 1  # never_settles, busy
    assert stat(result, "render/popups_closed") >= 1
    assert stat(result, "render/subrequests/blocked_budget") >= 1


def test_a_detected_mark_never_overwrites_an_operator_s(redis_server: RedisServer) -> None:
    """RenderMarks.detected checks and writes in one script: an operator's on/off set meanwhile stays."""
    import asyncio

    from redis.asyncio import Redis

    from crawler.redisconn.batch import BatchedScripts
    from crawler.render.marks import HostMark, Mark, RenderMarks

    async def run() -> tuple[HostMark, HostMark, HostMark, dict[bytes, bytes]]:
        client = Redis.from_url(redis_server.url)
        key = "render-test:marks"
        await client.delete(key)
        await client.hset(key, "forced.test", "off")
        batch = BatchedScripts(client)
        marks = RenderMarks(batch, key)
        kept = await marks.detected("forced.test", Mark.JS, 3600)
        placed = await marks.detected("free.test", Mark.STATIC, 3600)
        again = await marks.detected("free.test", Mark.JS, 3600)  # a detected mark is replaced
        # A lookup of several hosts met together: one batch, each its own answer.
        marks._cache.clear()
        looked_up = await asyncio.gather(marks.get("forced.test"), marks.get("free.test"), marks.get("new.test"))
        assert [m.mark if m else None for m in looked_up] == [Mark.OFF, Mark.JS, None]
        stored = await client.hgetall(key)
        await batch.close()
        await client.aclose()
        return kept, placed, again, stored

    kept, placed, again, stored = asyncio.run(run())
    assert kept == HostMark(Mark.OFF)
    assert placed.mark is Mark.STATIC and again.mark is Mark.JS
    assert stored[b"forced.test"] == b"off"
    assert stored[b"free.test"].startswith(b"js:")
