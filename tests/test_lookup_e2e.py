"""``scrapy frontier url|host`` and ``--json``, against the Redis of real crawls.

One crawl of a small mock web leaves URLs in most states: fetched, failed (a
404), dead-lettered (a page that drips past ``DOWNLOAD_TIMEOUT`` twice), refused
(robots.txt of host 1 disallows ``/private/``; an ftp URL), never seen;
``scrapy frontier seed`` then queues host 2's root; a second crawl is killed
while its only page is in flight, leaving it leased. Each command is run as an
operator runs it, once as text and once with ``--json``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from support.mockweb import WebSpec
from tests.conftest import ROOT, MockWeb, RedisServer, crawl_command, crawl_env, run_crawl, start_mockweb
from tests.test_ops import frontier_command

CRAWL = "lookup"
STUCK = "lookup-stuck"
ROBOTS = "User-agent: *\nDisallow: /private/\n"


@pytest.fixture(scope="module")
def crawled(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("lookup")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"robots": {"1": {"status": 200, "body": ROBOTS}},
                                    "specials": {"0": ["/slow", "/copy-a", "/copy-b"], "3": ["/slow"]}}))
    web: MockWeb = start_mockweb(WebSpec(hosts=4, sizes="uniform:3", fanout=2, nav=0, cross=0,
                                         scenario=str(scenario)), tmp / "mockweb.log")
    settings: dict[str, object] = {"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": CRAWL,
                                   "CRAWL_DATA_DIR": tmp / "data"}
    seeds = [web.url(0), web.url(0, 99), web.url(0).rstrip("/") + "/slow", web.url(1)]
    try:
        result = run_crawl("-a", "urls=" + ",".join(seeds), settings={
            **settings, "FRONTIER_MIN_DELAY": 0.1, "FRONTIER_DELAY_FACTOR": 0, "DOWNLOAD_TIMEOUT": 1.5,
            "RETRY_TIMES": 1, "RETRY_BASE_DELAY": 0.2}, timeout=180)
        assert result.returncode == 0, result.stderr[-3000:]
        seeded = frontier_command("seed", web.url(2), settings=settings)
        assert seeded.returncode == 0, seeded.stderr
        stuck = stuck_crawl(web, redis_server, tmp)
    finally:
        web.stop()
    return {"web": web, "settings": settings, "stuck": stuck, "result": result}


def stuck_crawl(web: MockWeb, redis_server: RedisServer, tmp: Path) -> dict[str, object]:
    """A worker SIGKILLed while host 3's page drips, once it has renewed (and so named) its lease: the
    lease stays until it expires."""
    settings: dict[str, object] = {"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": STUCK,
                                   "CRAWL_DATA_DIR": tmp / "data-stuck"}
    command = crawl_command("-a", "urls=" + web.url(3).rstrip("/") + "/slow",
                            settings={**settings, "DOWNLOAD_TIMEOUT": 120, "FRONTIER_MIN_DELAY": 0.1,
                                      "FRONTIER_LEASE_TIMEOUT": 6})
    worker = subprocess.Popen(command, cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    client = redis.Redis.from_url(redis_server.url)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            # A page lease (not the robots.txt one: its id is 0) of host 3, named by its worker.
            pages = [member.split()[0] for key in client.scan_iter(match=f"frontier:{{{STUCK}*:leases")
                     for member in client.zrange(key, 0, -1) if member.split()[2] != b"0"]
            named = [held.split()[1:] for key in client.scan_iter(match=f"frontier:{{{STUCK}*:holders")
                     for held in client.hvals(key)]
            if pages and any(pages[0] in numbers for numbers in named):
                break
            time.sleep(0.1)
        else:
            pytest.fail("the stuck crawl never leased its page")
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=30)
    return settings


def ask(*args: str, settings: dict[str, object]) -> dict[str, Any]:
    done = frontier_command(*args, "--json", settings=settings)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_a_fetched_url(crawled: dict[str, Any]) -> None:
    web = crawled["web"]
    answer = ask("url", web.url(0), settings=crawled["settings"])
    assert answer["status"] == "fetched" and answer["normalized"] == web.url(0)
    assert answer["last_fetch"]["status"] == 200 and answer["last_fetch"]["observations"] == 1
    assert answer["seen"]["member"] is True and answer["robots"]["allowed"] is True
    assert answer["recrawl"]["next_visit"] is not None
    # Found at least once (its seed), counted in the in-link sketch the lookup reads.
    assert isinstance(answer["inlinks"], int) and answer["inlinks"] >= 1
    [record] = answer["warc"]["records"]
    assert record["file"].endswith(".warc.gz") and record["status"] == "200" and record["length"] > 0
    text = frontier_command("url", web.url(0), settings=crawled["settings"]).stdout
    assert "status      fetched" in text and "last fetch" in text and ".warc.gz offset" in text


def test_an_exact_duplicate_names_the_first_capture(crawled: dict[str, Any]) -> None:
    """/copy-a and /copy-b of host 0 answer the same body: whichever came second is a duplicate of the other."""
    base = crawled["web"].url(0).rstrip("/")
    answers = {path: ask("url", base + path, settings=crawled["settings"]) for path in ("/copy-a", "/copy-b")}
    assert all(answer["status"] == "fetched" for answer in answers.values()), answers
    duplicates = {path: answer["duplicate_of"] for path, answer in answers.items() if answer["duplicate_of"]}
    assert len(duplicates) == 1, answers
    [(path, duplicate)] = duplicates.items()
    other = "/copy-b" if path == "/copy-a" else "/copy-a"
    assert duplicate["url"] == base + other and duplicate["captured"] and duplicate["digest"].startswith("sha1:")
    assert [record["kind"] for record in answers[path]["warc"]["records"]] == ["warc/revisit"]
    text = frontier_command("url", base + path, settings=crawled["settings"]).stdout
    assert f"duplicate   of {base + other}" in text


def test_a_failed_url(crawled: dict[str, Any]) -> None:
    answer = ask("url", crawled["web"].url(0, 99), settings=crawled["settings"])
    assert answer["status"] == "failed" and answer["last_fetch"]["status"] == 404


def test_a_dead_letter(crawled: dict[str, Any]) -> None:
    url = crawled["web"].url(0).rstrip("/") + "/slow"
    answer = ask("url", url, settings=crawled["settings"])
    assert answer["status"] == "dead letter", answer
    assert answer["dead_letter"]["error"] and answer["dead_letter"]["at"]


def test_a_url_robots_txt_refuses_names_the_rule(crawled: dict[str, Any]) -> None:
    url = crawled["web"].url(1).rstrip("/") + "/private/a.html"
    answer = ask("url", url, settings=crawled["settings"])
    assert answer["status"] == "refused"
    assert answer["refused_by"] == {"rule": "robots.txt", "detail": "disallow: /private/"}
    assert answer["robots"]["allowed"] is False and answer["robots"]["rule"] == "disallow: /private/"
    text = frontier_command("url", url, settings=crawled["settings"]).stdout
    assert "refused by robots.txt: disallow: /private/" in text


def test_a_url_a_filter_refuses(crawled: dict[str, Any]) -> None:
    answer = ask("url", "ftp://example.test/file", settings=crawled["settings"])
    assert answer["status"] == "refused" and answer["refused_by"]["rule"] == "scheme"


def test_urls_never_seen(crawled: dict[str, Any]) -> None:
    web = crawled["web"]
    answer = ask("url", web.url(0).rstrip("/") + "/never/linked", settings=crawled["settings"])
    assert answer["status"] == "not seen" and answer["robots"]["allowed"] is True
    assert answer["last_fetch"] is None and answer["warc"]["records"] == []
    text = frontier_command("url", web.url(0).rstrip("/") + "/never/linked", settings=crawled["settings"]).stdout
    assert "not in the frontier; robots.txt of its host would allow it" in text


def test_a_trap_is_refused_by_its_defence(crawled: dict[str, Any]) -> None:
    url = crawled["web"].url(0).rstrip("/") + "/a/b/a/b/a/b/a/b/a/b/a/b/"
    answer = ask("url", url, settings=crawled["settings"])
    assert answer["status"] == "refused" and answer["refused_by"]["rule"] == "repeated_segments", answer


def test_a_new_url_refused_by_memory(crawled: dict[str, Any], redis_server: RedisServer) -> None:
    """With a limit just above what Redis holds, the admission the workers apply refuses any new URL."""
    used = int(redis.Redis.from_url(redis_server.url).info("memory")["used_memory"])
    settings = {**crawled["settings"], "REDIS_MEMORY_LIMIT": int(used * 1.01)}
    answer = ask("url", crawled["web"].url(0).rstrip("/") + "/never/linked", settings=settings)
    assert answer["status"] == "refused" and answer["refused_by"]["rule"] == "memory", answer
    assert "of the limit" in answer["refused_by"]["detail"]
    assert ask("url", crawled["web"].url(0), settings=settings)["status"] == "fetched"


def test_a_new_url_refused_by_the_host_budget(crawled: dict[str, Any]) -> None:
    settings = {**crawled["settings"], "HOST_PAGE_BUDGET": 2}
    answer = ask("url", crawled["web"].url(0).rstrip("/") + "/never/linked", settings=settings)
    assert answer["status"] == "refused" and answer["refused_by"]["rule"] == "host_budget", answer
    assert "HOST_PAGE_BUDGET is 2" in answer["refused_by"]["detail"]


def test_a_queued_url(crawled: dict[str, Any]) -> None:
    answer = ask("url", crawled["web"].url(2), settings=crawled["settings"])
    assert answer["status"] == "queued"
    assert answer["queued"]["queue"] == "front" and answer["queued"]["level"] >= 0


def test_a_leased_url(crawled: dict[str, Any]) -> None:
    answer = ask("url", crawled["web"].url(3).rstrip("/") + "/slow", settings=crawled["stuck"])
    assert answer["status"] == "leased", answer
    assert answer["leased"]["until"] and answer["leased"]["reported_at"]
    host, pid = answer["leased"]["worker"].rsplit("-", 1)
    assert host == socket.gethostname().split(".")[0] and int(pid) > 0
    text = frontier_command("url", crawled["web"].url(3).rstrip("/") + "/slow", settings=crawled["stuck"]).stdout
    assert f"held by {answer['leased']['worker']}" in text


def test_hosts_answer_why(crawled: dict[str, Any]) -> None:
    web = crawled["web"]
    fetched = ask("host", web.url(0), settings=crawled["settings"])
    assert fetched["status"] == "idle" and fetched["pages"] >= 3 and fetched["errors"] >= 1
    assert fetched["robots"]["state"] == "allow_all" and fetched["robots"]["status"] == 404
    assert [letter["error"] for letter in fetched["dead_letters"]]
    ruled = ask("host", web.url(1), settings=crawled["settings"])
    assert ruled["robots"]["group"] == ["user-agent: *", "disallow: /private/"]
    queued = ask("host", web.url(2), settings=crawled["settings"])
    assert queued["status"] == "waiting" and queued["queued"] == {"total": 1, "by_level": {}, "front": 1}
    assert queued["robots"]["state"] is None
    active = ask("host", web.url(3), settings=crawled["stuck"])
    assert active["status"] == "active" and active["in_flight"] == 1
    assert ask("host", "never.test", settings=crawled["settings"])["status"] == "unknown"
    text = frontier_command("host", web.url(1), settings=crawled["settings"]).stdout
    assert "group for 'crawler': user-agent: *; disallow: /private/" in text


@pytest.mark.parametrize("args", [
    ("stats",), ("hosts", "--top", "2"), ("dead-letters",), ("render",), ("reset", "--crawl-id", CRAWL),
    ("seed", "http://127.20.9.9:1/"), ("report", "--out", "{tmp}/r.html"), ("drain",), ("drain", "--resume"),
])
def test_every_subcommand_prints_one_json_document(crawled: dict[str, Any], args: tuple[str, ...],
                                                    tmp_path: Path) -> None:
    args = tuple(arg.format(tmp=tmp_path) for arg in args)
    document = ask(*args, settings=crawled["settings"])
    assert document["crawl"] == CRAWL
    expected = {"stats": "memory", "hosts": "hosts", "dead-letters": "dead_letters", "render": "marks",
                "reset": "keys", "seed": "added", "report": "path", "drain": "draining"}[args[0]]
    assert expected in document
    if args[0] == "stats":
        memory = document["memory"]
        assert memory["used"] > 0 and memory["bytes_per_page"] > 0 and len(memory["servers"]) == 1
        assert document["pages"] > 0 and document["status_codes"]["200"] > 0
    if args[0] == "reset":
        assert document["deleted"] == 0 and document["keys"] > 0  # no --yes: nothing deleted


def test_the_report_answers_for_the_hosts_to_look_at(crawled: dict[str, Any], tmp_path: Path) -> None:
    """Host 0 (a 404 and a dead letter) is listed for its errors with its state; the crawl, seconds long
    with the default PROGRESS_INTERVAL (30 s), still has a timeline to chart."""
    out = tmp_path / "report.html"
    assert frontier_command("report", "--out", str(out), settings=crawled["settings"]).returncode == 0
    html = out.read_text()
    section = html[html.index("Hosts to look at"):]
    host = crawled["web"].url(0).split("/")[2]
    assert host in section and "errors</td>" in section and "idle: " in section
    assert "TimeoutError" in section or "Timeout" in section
    client = redis.Redis.from_url(crawled["settings"]["REDIS_URL"])
    assert client.llen(f"frontier:{{{CRAWL}}}:timeline") >= 3
    pages_chart = html[html.index('aria-label="Pages per second"'):].split("</svg>", 1)[0]
    points = re.search(r'<polyline[^>]* points="([^"]+)"', pages_chart)
    assert points is not None and len(points.group(1).split()) >= 2, pages_chart[:500]


def test_a_mistake_is_json_too(crawled: dict[str, Any]) -> None:
    done = frontier_command("stats", "--json", settings={**crawled["settings"], "FRONTIER_CRAWL_ID": "nope"})
    assert done.returncode == 2 and json.loads(done.stdout)["error"].startswith("FRONTIER_CRAWL_ID")
