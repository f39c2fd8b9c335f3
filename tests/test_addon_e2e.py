"""A team's own Scrapy project on the crawler: the add-on, installed with pip into a fresh venv.

The project lives outside this repository (its own ``scrapy.cfg`` and
settings with ``ADDONS``), has a plain spider with ``allowed_domains``, a
``CrawlSpider`` and a scrapy-redis ``RedisSpider``, all yielding dicts, and
keeps Scrapy's standard settings (``ROBOTSTXT_OBEY``, ``DOWNLOAD_DELAY``,
``DEPTH_LIMIT``, ``FEEDS``). What it must get is checked from the mock web's
log (robots.txt first on every host, nothing off-site, one request in flight
per host and the delay between two, the depth limit) and from its outputs
(the items exported, valid WARC files with a response record for each page).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from support.mockweb import WebSpec, host_ip, parse_page_path, politeness

ROOT = Path(__file__).resolve().parent.parent

SPEC = WebSpec(hosts=5, sizes="uniform:40", fanout=3, nav=1, cross=1, filler_words=50, seed=3)
DELAY = 0.2
#: The shortest gap DOWNLOAD_DELAY allows: Scrapy draws it from 0.5x to 1.5x (RANDOMIZE_DOWNLOAD_DELAY, default on).
MIN_GAP = DELAY * 0.5

SETTINGS = '''
BOT_NAME = "teamproj"
SPIDER_MODULES = ["teamproj.spiders"]
ADDONS = {"crawler.addon.CrawlerAddon": 0}
USER_AGENT = "teambot/1.0 (+https://example.invalid/teambot)"
# Scrapy's standard settings, as a project has them:
ROBOTSTXT_OBEY = True
DOWNLOAD_DELAY = %(delay)r
DEPTH_LIMIT = 2
FEEDS = {"items-%%(name)s.jsonl": {"format": "jsonlines"}}
# The test's own: the mock web is on loopback; a small seen set; data here.
ALLOW_PRIVATE_NETWORKS = True
SEEN_EXPECTED_URLS = 100_000
CRAWL_DATA_DIR = "crawl-data"
REDIS_URL = %(redis)r
MAX_IDLE_TIME_BEFORE_CLOSE = 3
LOG_LEVEL = "INFO"
'''

SPIDERS = '''
import scrapy
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule
from scrapy_redis.spiders import RedisCrawlSpider, RedisSpider


class TeamSpider(scrapy.Spider):
    name = "team"

    def __init__(self, start=None, domain=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = [start] if start else []
        self.allowed_domains = [domain] if domain else []

    def parse(self, response):
        yield {"url": response.url, "title": response.css("title::text").get(), "depth": response.meta.get("depth", 0)}
        yield from response.follow_all(css="a", callback=self.parse)


class RulesSpider(CrawlSpider):
    name = "rules"

    def __init__(self, start=None, domain=None, **kwargs):
        self.start_urls = [start] if start else []
        self.allowed_domains = [domain] if domain else []
        self.rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)
        super().__init__(**kwargs)

    def parse_item(self, response):
        yield {"url": response.url}


class RedirectSpider(scrapy.Spider):
    name = "redirect"

    def __init__(self, start=None, **kwargs):
        super().__init__(**kwargs)
        self.start_urls = start.split(",") if start else []

    def parse(self, response):
        yield {"url": response.url, "status": response.status, "redirect_urls": response.meta.get("redirect_urls")}


class RetrySpider(scrapy.Spider):
    """A 503 it allows (handle_httpstatus_list) and a page that breaks off, with an errback."""
    name = "retry"
    handle_httpstatus_list = [503]
    custom_settings = {"RETRY_TIMES": 1, "RETRY_MAX_THROTTLED": 1, "RETRY_BASE_DELAY": 0.2,
                       "BACKOFF_BASE_DELAY": 0.2}

    def __init__(self, answer=None, broken=None, **kwargs):
        super().__init__(**kwargs)
        self.answer, self.broken = answer, broken

    async def start(self):
        yield scrapy.Request(self.answer, callback=self.parse)
        yield scrapy.Request(self.broken, callback=self.parse, errback=self.failed)

    def parse(self, response):
        yield {"url": response.url, "status": response.status}

    def failed(self, failure):
        yield {"url": failure.request.url, "error": type(failure.value).__name__}


class RulesQueueSpider(RedisCrawlSpider):
    """scrapy-redis's RedisCrawlSpider: start URLs from Redis, rules for the rest."""
    name = "rulesqueue"

    def __init__(self, domain=None, key=None, **kwargs):
        self.allowed_domains = [domain] if domain else []
        self.redis_key = key
        self.rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)
        super().__init__(**kwargs)

    def parse_item(self, response):
        yield {"url": response.url}


class QueueSpider(RedisSpider):
    name = "queue"

    def __init__(self, domain=None, key=None, **kwargs):
        super().__init__(**kwargs)
        self.allowed_domains = [domain] if domain else []
        self.redis_key = key

    def parse(self, response):
        yield {"url": response.url}
        yield from response.follow_all(css="a", callback=self.parse)
'''


CONTRACT_SPIDER = '''
import scrapy


class ContractSpider(scrapy.Spider):
    name = "contract"
    start_urls = [%(url)r]

    def parse(self, response):
        """The page's title.

        @url %(url)s
        @returns items 1 1
        @scrapes title
        """
        yield {"title": response.css("title::text").get()}
'''


def copy_tracked(destination: Path) -> Path:
    """This repository's files as git sees them (tracked, or new and not ignored), copied: no build output."""
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    for name in tracked.decode().split("\0"):
        if name and (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, destination / name)
    return destination


def build_wheel(source: Path, out: Path, env: dict[str, str] | None = None) -> Path:
    """``pip wheel`` of the crawler alone (its build backend in an isolated environment, as a team's pip does)."""
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
                           capture_output=True, text=True, timeout=600, check=False, env=env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [wheel] = out.glob("crawler-*.whl")
    return wheel


@pytest.fixture(scope="module")
def crawler_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_tracked(tmp_path_factory.mktemp("src") / "crawler-src")


@pytest.fixture(scope="module")
def crawler_wheel(crawler_source: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(crawler_source, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def team_venv(tmp_path_factory: pytest.TempPathFactory, crawler_wheel: Path) -> Path:
    """A fresh venv outside the repository with the crawler's wheel pip-installed, scrapy-redis and Spidermon."""
    venv = tmp_path_factory.mktemp("team") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # scrapy-redis and Spidermon, as a team has them beside Scrapy, at the versions requirements-dev.txt pins.
    extras = [line.strip() for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
              if line.startswith(("scrapy-redis==", "spidermon=="))]
    assert len(extras) == 2
    # The Scrapy release this suite runs on (`make compat` runs it on each supported one).
    import scrapy

    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(crawler_wheel), *extras, f"scrapy=={scrapy.__version__}"],
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    return venv


@pytest.fixture
def team_project(tmp_path: Path, team_venv: Path, redis_server: Any) -> Path:
    project = tmp_path / "teamproj-root"
    (project / "teamproj" / "spiders").mkdir(parents=True)
    (project / "scrapy.cfg").write_text("[settings]\ndefault = teamproj.settings\n")
    (project / "teamproj" / "__init__.py").write_text("")
    (project / "teamproj" / "settings.py").write_text(SETTINGS % {"delay": DELAY, "redis": redis_server.url})
    (project / "teamproj" / "spiders" / "__init__.py").write_text(SPIDERS)
    return project


def scrapy(venv: Path, project: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run([str(venv / "bin" / "scrapy"), *args], cwd=project, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


@contextmanager
def scrapy_running(venv: Path, project: Path, *args: str, until: str,
                   timeout: float = 180) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """``scrapy *args`` in the background, its log lines collected as they come: yields once one of them
    contains ``until``; then waits for it to end (killed if it outlives ``timeout``)."""
    import threading

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    process = subprocess.Popen([str(venv / "bin" / "scrapy"), *args], cwd=project, env=env,
                               stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    seen = threading.Event()

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line)
            if until in line:
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(timeout=timeout), "".join(lines)[-4000:]
        yield process, lines
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
        reader.join(timeout=10)


def within_depth(host: int, limit: int) -> set[int]:
    """The pages of ``host`` at most ``limit`` same-host links from its root (Scrapy's depth)."""
    depth = {0: 0}
    frontier = [0]
    while frontier:
        following = []
        for page in frontier:
            if depth[page] == limit:
                continue
            for other, child in SPEC.page_links(host, page):
                if other == host and child not in depth:
                    depth[child] = depth[page] + 1
                    following.append(child)
        frontier = following
    return set(depth)


def warc_responses(data: Path, venv: Path) -> set[str]:
    """The target URIs of the response records of every WARC file, each file checked by ``warcio check``."""
    from warcio.archiveiterator import ArchiveIterator

    files = sorted(data.rglob("*.warc.gz"))
    assert files, f"no WARC file under {data}"
    uris = set()
    for path in files:
        check = subprocess.run([str(venv / "bin" / "warcio"), "check", str(path)], capture_output=True, text=True,
                               check=False)
        assert check.returncode == 0, check.stdout + check.stderr
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle):
                if record.rec_type == "response":
                    uris.add(record.rec_headers.get_header("WARC-Target-URI"))
    return uris


def check_crawl(web: Any, result: subprocess.CompletedProcess[str], host: int, pages: set[int]) -> list[Any]:
    """The crawl of one host: robots.txt first, nothing off-site, paced, exactly ``pages`` fetched."""
    assert result.returncode == 0, result.stderr[-4000:]
    entries = web.entries()
    hosts = {entry.host for entry in entries}
    assert hosts == {host_ip(host)}, f"off-site requests: {hosts - {host_ip(host)}}"
    first = min(entries, key=lambda entry: entry.start)
    assert first.path == "/robots.txt"
    assert sum(entry.path == "/robots.txt" for entry in entries) == 1
    fetched = [parse_page_path(entry.path) for entry in entries if entry.path != "/robots.txt"]
    assert sorted(fetched) == sorted(pages), "each page of the depth limit once"
    report = politeness(entries, min_gap=MIN_GAP)
    assert report.overlaps == 0 and report.short_gaps == 0, report
    return entries


def test_a_team_project_with_the_addon_crawls_politely_with_scrapys_behaviour(
    team_project: Path, team_venv: Path, mockweb_factory: Any
) -> None:
    web = mockweb_factory(SPEC)
    host = 0
    assert any(other != host for page in range(SPEC.pages(host)) for other, _ in SPEC.page_links(host, page)), \
        "the web must link off-site for the offsite check to mean something"
    crawl_id = f"team{uuid.uuid4().hex[:8]}"
    # The crawl id as Scrapyd passes it, a spider argument: the add-on takes it (no custom command).
    result = scrapy(team_venv, team_project, "crawl", "team", "-a", f"start={web.url(host)}",
                    "-a", f"domain={host_ip(host)}", "-a", f"crawl_id={crawl_id}")
    pages = within_depth(host, 2)
    assert len(pages) < SPEC.pages(host), "DEPTH_LIMIT must cut the site for the check to mean something"
    check_crawl(web, result, host, pages)
    # Scrapy's standard settings were read, each said once.
    assert "Scrapy setting: DOWNLOAD_DELAY = 0.2 read as FRONTIER_MIN_DELAY = 0.2" in result.stderr
    assert "Scrapy setting: DOWNLOAD_DELAY = 0.2 read as FRONTIER_RANDOMIZE_DELAY = True" in result.stderr
    # The items, as the spider yielded them (dicts), exported by the feed.
    items = [json.loads(line) for line in (team_project / "items-team.jsonl").read_text().splitlines()]
    assert sorted(parse_page_path(urlsplit(item["url"]).path) for item in items) == sorted(pages)
    assert {item["depth"] for item in items} == {0, 1, 2}
    assert all(item["title"].startswith(f"Host {host} page ") for item in items)
    # Every response archived, though the spider yields only dicts.
    uris = warc_responses(team_project / "crawl-data", team_venv)
    assert {web.url(host, page) for page in pages} <= uris
    # `scrapy frontier` in the team's project: this project has several spiders, so it asks which crawl.
    stats = scrapy(team_venv, team_project, "frontier", "stats", "--crawl-id", crawl_id)
    assert stats.returncode == 0 and crawl_id in stats.stdout, stats.stderr[-3000:]
    unnamed = scrapy(team_venv, team_project, "frontier", "stats")
    assert unnamed.returncode == 2 and "--crawl-id" in unnamed.stderr and "team" in unnamed.stderr, unnamed.stderr


def most_in_flight(entries: list[Any]) -> int:
    """The most requests one host had in flight at once, from the server's log."""
    most = 0
    by_host: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for entry in entries:
        by_host[entry.host] += [(entry.start, 1), (entry.end, -1)]
    for events in by_host.values():
        now = 0
        for _, step in sorted(events):  # an end before a start at the same instant
            now += step
            most = max(most, now)
    return most


@pytest.mark.parametrize("per_host", [4, 1])
def test_several_requests_per_host_across_two_workers_when_the_project_asks(
    team_project: Path, team_venv: Path, mockweb_factory: Any, per_host: int
) -> None:
    """CONCURRENT_REQUESTS_PER_DOMAIN = 4 and DOWNLOAD_DELAY = 0 in the project, on a host answering in
    20-40 ms (the politeness delay, 10x that, is far longer than an answer): two workers together have
    several requests in flight to the host, never more than 4, each slot resting after its own answer;
    = 1: one at a time, as without it."""
    web = mockweb_factory(WebSpec(hosts=5, sizes="uniform:40", fanout=3, nav=1, cross=1, filler_words=50, seed=3,
                                  latency_ms=(20, 40)))
    host = 0
    crawl_id = f"slots{uuid.uuid4().hex[:8]}"
    args = ["crawl", "team", "-a", f"start={web.url(host)}", "-a", f"domain={host_ip(host)}",
            "-a", f"crawl_id={crawl_id}", "-s", f"CONCURRENT_REQUESTS_PER_DOMAIN={per_host}",
            "-s", "DOWNLOAD_DELAY=0", "-s", "DEPTH_LIMIT=3"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env["PATH"] = f"{team_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    workers = [subprocess.Popen([str(team_venv / "bin" / "scrapy"), *args], cwd=team_project, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [worker.communicate(timeout=240) for worker in workers]
    for worker, (_, stderr) in zip(workers, outputs):
        assert worker.returncode == 0, stderr[-4000:]
    entries = web.entries()
    assert {entry.host for entry in entries} == {host_ip(host)}, "nothing off-site"
    assert min(entries, key=lambda entry: entry.start).path == "/robots.txt"
    assert sum(entry.path == "/robots.txt" for entry in entries) == 1
    fetched = [parse_page_path(entry.path) for entry in entries if entry.path != "/robots.txt"]
    # Each page of the depth limit once, by either worker; the start URL once per worker (Scrapy's
    # start requests skip the duplicate filter).
    assert sorted(set(fetched)) == sorted(within_depth(host, 3))
    assert all(fetched.count(page) == (2 if page == 0 else 1) for page in set(fetched)), sorted(fetched)
    most = most_in_flight(entries)
    if per_host == 1:
        assert most == 1
        assert politeness(entries, min_gap=0.01).overlaps == 0
    else:
        assert 2 <= most <= per_host, most
        assert f"read as FRONTIER_CONCURRENCY_PER_KEY = {per_host}" in outputs[0][1]
    uris = warc_responses(team_project / "crawl-data", team_venv)
    assert {web.url(host, page) for page in fetched} <= uris


def test_a_crawlspider_and_a_redisspider_run_on_the_frontier(
    team_project: Path, team_venv: Path, mockweb_factory: Any, redis_server: Any
) -> None:
    web = mockweb_factory(SPEC)
    # CrawlSpider: its rules' requests go through the frontier (callbacks by name).
    result = scrapy(team_venv, team_project, "crawl", "rules", "-a", f"start={web.url(1)}",
                    "-a", f"domain={host_ip(1)}", "-s", f"FRONTIER_CRAWL_ID=rules{uuid.uuid4().hex[:8]}")
    check_crawl(web, result, 1, within_depth(1, 2))
    items = (team_project / "items-rules.jsonl").read_text().splitlines()
    assert len(items) == len(within_depth(1, 2)) - 1, "parse_item for every page but the start URL"
    # RedisSpider: start URLs pushed to its redis_key, as scrapy-redis users do.
    key = f"queue{uuid.uuid4().hex[:8]}:start_urls"
    redis_server.client().lpush(key, json.dumps({"url": web.url(2)}))
    before = len(web.entries())
    result = scrapy(team_venv, team_project, "crawl", "queue", "-a", f"domain={host_ip(2)}", "-a", f"key={key}",
                    "-s", f"FRONTIER_CRAWL_ID=queue{uuid.uuid4().hex[:8]}")
    assert result.returncode == 0, result.stderr[-4000:]
    entries = web.entries()[before:]
    by_host: dict[str, list[Any]] = defaultdict(list)
    for entry in entries:
        by_host[entry.host].append(entry)
    assert set(by_host) == {host_ip(2)}
    assert by_host[host_ip(2)][0].path == "/robots.txt"
    assert sorted(parse_page_path(e.path) for e in entries if e.path != "/robots.txt") == sorted(within_depth(2, 2))


def test_scrapys_commands_work_in_a_project_with_the_addon(
    team_project: Path, team_venv: Path, mockweb_factory: Any
) -> None:
    web = mockweb_factory(SPEC)
    url = web.url(3, 1)
    fetched = scrapy(team_venv, team_project, "fetch", "--nolog", url)
    assert fetched.returncode == 0 and "<title>Host 3 page 1</title>" in fetched.stdout, fetched.stderr[-3000:]
    parsed = scrapy(team_venv, team_project, "parse", "--nolog", "--spider", "team", "-c", "parse", url)
    assert parsed.returncode == 0 and "Host 3 page 1" in parsed.stdout, parsed.stderr[-3000:]
    shell = scrapy(team_venv, team_project, "shell", "--nolog", "-c",
                   f"fetch({url!r}) or response.css('title::text').get()")
    assert shell.returncode == 0 and "Host 3 page 1" in shell.stdout, shell.stderr[-3000:]
    # runspider and check (a contract), with a spider of their own.
    (team_project / "teamproj" / "spiders" / "contract.py").write_text(CONTRACT_SPIDER % {"url": url})
    ran = scrapy(team_venv, team_project, "runspider", "teamproj/spiders/contract.py", "-o", "contract.jsonl")
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads((team_project / "contract.jsonl").read_text()) == {"title": "Host 3 page 1"}
    checked = scrapy(team_venv, team_project, "check", "contract")
    assert checked.returncode == 0 and "Ran 2 contracts" in checked.stderr and "OK" in checked.stderr, \
        checked.stderr[-3000:]
    # bench: Scrapy's own local site, politely (one host), until its timeout.
    bench = scrapy(team_venv, team_project, "bench", "-s", "CLOSESPIDER_TIMEOUT=3")
    assert bench.returncode == 0 and "'finish_reason': 'closespider_timeout'" in bench.stderr, bench.stderr[-3000:]
    assert "'response_received_count'" in bench.stderr


def test_a_redirect_is_followed_through_the_frontier_to_the_original_callback(
    team_project: Path, team_venv: Path, mockweb_factory: Any
) -> None:
    web = mockweb_factory(WebSpec(hosts=2, sizes="uniform:3", fanout=1, nav=0, cross=0, extras=True))
    moved = web.url(1) + "moved"
    missing = web.url(0) + "missing"
    crawl = ("crawl", "redirect", "-a", f"start={moved}", "-s", f"FRONTIER_CRAWL_ID=redirect{uuid.uuid4().hex[:8]}")
    result = scrapy(team_venv, team_project, *crawl[:3], f"start={moved},{missing}", *crawl[4:])
    assert result.returncode == 0, result.stderr[-4000:]
    # The 404 never reaches the callback (Scrapy's HTTP error middleware) but is archived all the same.
    items = [json.loads(line) for line in (team_project / "items-redirect.jsonl").read_text().splitlines()]
    assert items == [{"url": web.url(1, 1), "status": 200, "redirect_urls": [moved]}]
    assert missing in warc_responses(team_project / "crawl-data", team_venv)
    entries = sorted((entry for entry in web.entries() if entry.host == host_ip(1)), key=lambda entry: entry.start)
    assert [entry.path for entry in entries] == ["/robots.txt", "/moved", "/p/1"]
    # The hop went back through the frontier: it waited for the host's delay.
    assert politeness(entries, min_gap=MIN_GAP).short_gaps == 0
    # The same command again: the start URL and its redirect are fetched again, as Scrapy does (its
    # start requests, and their redirects, skip the duplicate filter), but robots.txt is not (still
    # shared); starting over forgets robots.txt too.
    again = scrapy(team_venv, team_project, *crawl)
    assert again.returncode == 0, again.stderr[-3000:]
    assert [entry.path for entry in web.entries()][5:] == ["/moved", "/p/1"]
    over = scrapy(team_venv, team_project, *crawl, "-s", "FRONTIER_RESET_ON_START=True")
    assert over.returncode == 0, over.stderr[-3000:]
    assert "reset (FRONTIER_RESET_ON_START)" in over.stderr
    assert [entry.path for entry in web.entries()][7:] == ["/robots.txt", "/moved", "/p/1"]


def test_out_of_retries_an_answer_goes_to_the_callback_and_an_error_to_the_errback(
    team_project: Path, team_venv: Path, mockweb_factory: Any, redis_server: Any, tmp_path: Path
) -> None:
    """Scrapy's retry semantics: the last 503 reaches the callback of a spider that allows it (and
    its URL is done, not dead-lettered); a download error out of retries is dead-lettered and the
    request's errback gets it. Each retried through the frontier, politely."""
    from crawler.crawlstate.keys import ShardKeys

    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"specials": {"4": ["/unavailable", "/truncated"]}}))
    web = mockweb_factory(WebSpec(hosts=5, sizes="uniform:3", fanout=1, nav=0, cross=0, scenario=str(scenario)))
    answer, broken = web.url(4) + "unavailable", web.url(4) + "truncated"
    crawl_id = f"retry{uuid.uuid4().hex[:8]}"
    result = scrapy(team_venv, team_project, "crawl", "retry", "-a", f"answer={answer}", "-a", f"broken={broken}",
                    "-s", f"FRONTIER_CRAWL_ID={crawl_id}")
    assert result.returncode == 0, result.stderr[-4000:]
    items = [json.loads(line) for line in (team_project / "items-retry.jsonl").read_text().splitlines()]
    assert sorted(items, key=lambda item: item["url"]) == [
        {"url": broken, "error": "ResponseDataLossError"},
        {"url": answer, "status": 503},
    ]
    entries = sorted(web.entries(), key=lambda entry: entry.start)
    assert {entry.host for entry in entries} == {host_ip(4)}, "nothing off-site"
    assert entries[0].path == "/robots.txt"
    assert sorted(entry.path for entry in entries[1:]) == ["/truncated", "/truncated", "/unavailable", "/unavailable"]
    report = politeness(entries, min_gap=MIN_GAP)
    assert report.overlaps == 0 and report.short_gaps == 0, report
    dead = redis_server.client().hgetall(ShardKeys(crawl_id).dead_info)
    assert [value.decode().split("\t")[3] for value in dead.values()] == ["ResponseDataLossError"]
    assert "Gave up retrying " + answer in result.stderr
    # The 503 is archived like any answer.
    assert answer in warc_responses(team_project / "crawl-data", team_venv)


TWISTED_COMPONENTS = '''
from twisted.internet import reactor
from twisted.internet.task import deferLater


class PauseMiddleware:
    """A downloader middleware as older projects and plugins write them: a Deferred on the reactor."""

    def process_request(self, request, spider=None):
        return deferLater(reactor, 0.01, lambda: None)
'''


def test_twisted_components_run_with_the_addon_unchanged(
    team_project: Path, team_venv: Path, mockweb_factory: Any, redis_server: Any
) -> None:
    """A middleware that uses the reactor (deferLater) and scrapy-redis's RedisPipeline (deferToThread),
    in the team's project as they are: the crawl runs, and every item reaches Redis."""
    (team_project / "teamproj" / "twistedmw.py").write_text(TWISTED_COMPONENTS)
    web = mockweb_factory(SPEC)
    host = 4
    crawl_id = f"twisted{uuid.uuid4().hex[:8]}"
    result = scrapy(team_venv, team_project, "crawl", "team", "-a", f"start={web.url(host)}",
                    "-a", f"domain={host_ip(host)}", "-a", f"crawl_id={crawl_id}",
                    "-s", 'DOWNLOADER_MIDDLEWARES={"teamproj.twistedmw.PauseMiddleware": 600}',
                    "-s", 'ITEM_PIPELINES={"scrapy_redis.pipelines.RedisPipeline": 300}',
                    "-s", f"REDIS_ITEMS_KEY={crawl_id}:items")
    pages = within_depth(host, 2)
    check_crawl(web, result, host, pages)
    assert "Error processing" not in result.stderr and "ImportError" not in result.stderr, result.stderr[-3000:]
    stored = [json.loads(item) for item in redis_server.client().lrange(f"{crawl_id}:items", 0, -1)]
    assert sorted(parse_page_path(urlsplit(item["url"]).path) for item in stored) == sorted(pages)
    assert {web.url(host, page) for page in pages} <= warc_responses(team_project / "crawl-data", team_venv)


def test_the_wheel_carries_the_licence_the_lua_scripts_and_the_c_sources(crawler_wheel: Path) -> None:
    """What `pip install` of the wheel gives a team: BSD-3-Clause, one version, every Lua script, both
    C extensions built (this machine has a compiler) with their sources beside them."""
    import zipfile

    import crawler

    assert crawler_wheel.name.startswith(f"crawler-{crawler.__version__}-")
    with zipfile.ZipFile(crawler_wheel) as wheel:
        names = set(wheel.namelist())
        [metadata_name] = [name for name in names if name.endswith(".dist-info/METADATA")]
        metadata = wheel.read(metadata_name).decode()
    lua = {str(path.relative_to(ROOT)) for path in (ROOT / "crawler").rglob("*.lua")}
    assert lua and lua <= names
    assert {"crawler/py.typed", "crawler/dedup/_simhash.c", "crawler/redisconn/_resp.c"} <= names
    built = {name.split("/")[-1].split(".")[0] for name in names if name.endswith(".so")}
    assert built == {"_simhash", "_resp"}
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    headers = metadata.split("\n\n", 1)[0].splitlines()
    assert f"Version: {crawler.__version__}" in headers
    assert "License-Expression: BSD-3-Clause" in headers
    assert "Requires-Python: >=3.11" in headers
    assert "Classifier: Framework :: Scrapy" in headers
    assert "Description-Content-Type: text/markdown" in headers
    assert any(line.startswith("Requires-Dist: scrapy") and "<2.20" in line and ">=2.17" in line for line in headers)
    # The README is the long description.
    assert "a polite, distributed Mercator-style web crawler on Scrapy" in metadata


def test_a_wheel_built_without_a_compiler_runs_the_pure_python_versions_and_says_so(
    team_venv: Path, team_project: Path, mockweb_factory: Any, tmp_path: Path
) -> None:
    """No C compiler where the wheel is built (CC=/bin/false): the build still succeeds, the wheel carries
    no extension, and a team project crawls with it, its log naming each pure-Python fallback."""
    import zipfile

    # (A source tree of its own: pip builds in the tree, and another build's objects would be reused.)
    wheel = build_wheel(copy_tracked(tmp_path / "src"), tmp_path / "nocc", {**os.environ, "CC": "/bin/false"})
    with zipfile.ZipFile(wheel) as archive:
        assert not [name for name in archive.namelist() if name.endswith(".so")]
    # A venv with this wheel over the team venv's packages (a .pth file), so no dependency is installed twice.
    overlay = tmp_path / "overlay"
    subprocess.run([sys.executable, "-m", "venv", str(overlay)], check=True)
    site = "lib/python{}.{}/site-packages".format(*sys.version_info[:2])
    (overlay / site / "team.pth").write_text(str(team_venv / site) + "\n")
    installed = subprocess.run([str(overlay / "bin" / "pip"), "install", "-q", "--no-deps", "--ignore-installed", str(wheel)],
                               capture_output=True, text=True, timeout=300, check=False)
    assert installed.returncode == 0, installed.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env["PATH"] = f"{overlay / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    which = subprocess.run([str(overlay / "bin" / "python"), "-c",
                            "import crawler, crawler.dedup.text as t, crawler.redisconn.resp as r; "
                            "print(crawler.__file__, t.NATIVE, r.NATIVE)"],
                           cwd=team_project, env=env, capture_output=True, text=True, check=True)
    assert which.stdout.split() == [str(overlay / site / "crawler" / "__init__.py"), "False", "False"]
    web = mockweb_factory(SPEC)
    crawl_id = f"nocc{uuid.uuid4().hex[:8]}"
    result = subprocess.run([str(overlay / "bin" / "python"), "-m", "scrapy", "crawl", "team",
                             "-a", f"start={web.url(2)}", "-a", f"domain={host_ip(2)}", "-a", f"crawl_id={crawl_id}"],
                            cwd=team_project, env=env, capture_output=True, text=True, timeout=180, check=False)
    check_crawl(web, result, 2, within_depth(2, 2))
    assert "SimHash in pure Python: crawler.dedup._simhash is not built" in result.stderr
    assert "Redis commands encoded in pure Python: crawler.redisconn._resp is not built" in result.stderr
    stats = subprocess.run([str(overlay / "bin" / "python"), "-m", "scrapy", "frontier", "stats",
                            "--crawl-id", crawl_id], cwd=team_project, env=env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert stats.returncode == 0 and crawl_id in stats.stdout, stats.stderr[-3000:]


def warc_exchanges(data: Path) -> dict[str, list[dict[str, Any]]]:
    """Every response and revisit record of the WARC files under ``data``, by target URI, each with its
    status, Location and whether a request record names it (WARC-Concurrent-To)."""
    from warcio.archiveiterator import ArchiveIterator

    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    requests: set[str] = set()
    for path in sorted(data.rglob("*.warc.gz")):
        with path.open("rb") as handle:
            for record in ArchiveIterator(handle):
                headers = record.rec_headers
                if record.rec_type == "request":
                    requests.add(headers.get_header("WARC-Concurrent-To"))
                elif record.rec_type in ("response", "revisit"):
                    http = record.http_headers
                    records[headers.get_header("WARC-Target-URI")].append({
                        "type": record.rec_type, "id": headers.get_header("WARC-Record-ID"),
                        "status": int(http.get_statuscode()) if http else None,
                        "location": http.get_header("Location") if http else None,
                    })
    for exchanges in records.values():
        for exchange in exchanges:
            exchange["request"] = exchange.pop("id") in requests
    return records


def test_every_answer_is_archived_redirect_hops_dropped_errors_and_robots_txt(
    team_project: Path, team_venv: Path, mockweb_factory: Any, tmp_path: Path
) -> None:
    """A team project with the add-on follows a 301 chain, a 302, a 303, a 307 and a 308 (to a page its
    robots.txt disallows) through Scrapy's redirect middleware, and meets a 404 that Scrapy's HTTP error
    middleware drops: every answer is in the WARC, each with its request record, the hops with their
    Location; robots.txt too. Scrapy's robots.txt stats keys are written. pywb replays a hop as a redirect."""
    from tests.replay import pywb, replayed

    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"robots": {"1": {"body": "User-agent: *\nDisallow: /p/5\n"}}}))
    web = mockweb_factory(WebSpec(hosts=2, sizes="uniform:6", fanout=1, nav=0, cross=0, scenario=str(scenario)))
    base = web.url(1).rstrip("/")
    starts = ["/chain-3", "/found", "/see-other", "/temporary", "/permanent", "/missing"]
    stats_file = tmp_path / "stats.json"
    result = scrapy(team_venv, team_project, "crawl", "redirect", "-a", "start=" + ",".join(base + p for p in starts),
                    "-s", f"FRONTIER_CRAWL_ID=hops{uuid.uuid4().hex[:8]}", "-s", f"STATS_JSON_FILE={stats_file}")
    assert result.returncode == 0, result.stderr[-4000:]
    # The spider got the pages the redirects lead to (the 404 and the disallowed /p/5 never reach it).
    items = [json.loads(line) for line in (team_project / "items-redirect.jsonl").read_text().splitlines()]
    assert sorted(item["url"].rsplit("/", 1)[1] for item in items) == ["2", "3", "4", "chain-0"], result.stderr[-6000:]
    assert [entry.path for entry in web.entries()].count("/p/5") == 0
    archived = warc_exchanges(team_project / "crawl-data")
    expected = {
        "/robots.txt": 200, "/chain-3": 301, "/chain-2": 301, "/chain-1": 301, "/chain-0": 200,
        "/found": 302, "/p/2": 200, "/see-other": 303, "/p/3": 200, "/temporary": 307, "/p/4": 200,
        "/permanent": 308, "/missing": 404,
    }
    for path, status in expected.items():
        [exchange] = archived[base + path]
        assert exchange["status"] == status, path
        assert exchange["request"], f"{path}: no request record beside its response"
    locations = {path: archived[base + path][0]["location"] for path in expected if 300 <= expected[path] < 400}
    assert locations == {"/chain-3": "/chain-2", "/chain-2": "/chain-1", "/chain-1": "/chain-0", "/found": "/p/2",
                         "/see-other": "/p/3", "/temporary": "/p/4", "/permanent": "/p/5"}
    assert base + "/p/5" not in archived
    warc_responses(team_project / "crawl-data", team_venv)  # every file passes `warcio check`
    stats = json.loads(stats_file.read_text())
    assert (stats["robotstxt/request_count"], stats["robotstxt/response_count"]) == (1, 1)
    assert stats["robotstxt/response_status_count/200"] == 1
    assert stats["robotstxt/forbidden"] == 1
    assert stats["archive/redirect"] == 7 and stats["archive/robots"] == 1
    # pywb replays a hop as the redirect it was.
    with pywb(tmp_path, team_project / "crawl-data") as (port, _):
        status, headers, _ = replayed(port, base + "/chain-3")
        assert 300 <= status < 400 and headers["location"].endswith("/chain-2"), (status, headers)
        status, headers, _ = replayed(port, base + "/found")
        assert 300 <= status < 400 and headers["location"].endswith("/p/2"), (status, headers)
        status, _, body = replayed(port, base + "/p/2")
        assert status == 200 and b"Host 1 page 2" in body


def test_a_redisspider_without_redis_url_reads_the_embedded_redis_and_a_rediscrawlspider_runs(
    team_project: Path, team_venv: Path, mockweb_factory: Any, redis_server: Any
) -> None:
    """No REDIS_URL: the frontier starts its embedded Redis, and the RedisSpider reads its start URLs
    there (not from localhost:6379): one server, whose socket the log names; a URL pushed to it is
    crawled. A RedisCrawlSpider (start URLs from Redis, rules for the rest) runs on the frontier too."""
    import redis

    web = mockweb_factory(SPEC)
    key = f"embedded{uuid.uuid4().hex[:8]}:start_urls"
    marker = "from the crawl's embedded Redis"
    with scrapy_running(team_venv, team_project, "crawl", "queue", "-a", f"domain={host_ip(3)}", "-a", f"key={key}",
                        "-s", "REDIS_URL=", "-s", "MAX_IDLE_TIME_BEFORE_CLOSE=20",
                        "-s", f"FRONTIER_CRAWL_ID=embedded{uuid.uuid4().hex[:8]}", until=marker) as (crawl, lines):
        line = next(line for line in lines if marker in line)
        socket_path = line.split("unix://", 1)[1].split(" ", 1)[0]
        redis.Redis(unix_socket_path=socket_path).lpush(key, json.dumps({"url": web.url(3)}))
    assert crawl.returncode == 0, "".join(lines)[-4000:]
    assert "Frontier Redis: unix://" + socket_path in "".join(lines)
    entries = [entry for entry in web.entries() if entry.host == host_ip(3)]
    assert entries[0].path == "/robots.txt"
    assert sorted(parse_page_path(e.path) for e in entries if e.path != "/robots.txt") == sorted(within_depth(3, 2))
    # The URL was read from the embedded server, not from the test's Redis on TCP.
    assert redis_server.client().llen(key) == 0
    # A RedisCrawlSpider, on the team's Redis (REDIS_URL), start URL pushed as scrapy-redis users do.
    key = f"rules{uuid.uuid4().hex[:8]}:start_urls"
    redis_server.client().lpush(key, web.url(4))
    before = len(web.entries())
    result = scrapy(team_venv, team_project, "crawl", "rulesqueue", "-a", f"domain={host_ip(4)}", "-a", f"key={key}",
                    "-s", f"FRONTIER_CRAWL_ID=rulesq{uuid.uuid4().hex[:8]}")
    assert result.returncode == 0, result.stderr[-4000:]
    entries = web.entries()[before:]
    assert {entry.host for entry in entries} == {host_ip(4)}
    assert entries[0].path == "/robots.txt"
    assert sorted(parse_page_path(e.path) for e in entries if e.path != "/robots.txt") == sorted(within_depth(4, 2))


MONITORS = '''
import json
import os

from spidermon import MonitorSuite
from spidermon.contrib.scrapy.monitors import (
    ErrorCountMonitor, FinishReasonMonitor, ItemCountMonitor, RetryCountMonitor,
)
from spidermon.core.actions import Action


class RecordResults(Action):
    """Each monitor's result, to the file MONITOR_RESULTS names."""

    def run_action(self):
        results = {result.monitor.monitor_name: result.status for result in self.result.monitor_results}
        with open(os.environ["MONITOR_RESULTS"], "w") as handle:
            json.dump(results, handle)


class CloseMonitors(MonitorSuite):
    monitors = [FinishReasonMonitor, ItemCountMonitor, ErrorCountMonitor, RetryCountMonitor]
    monitors_finished_actions = [RecordResults]
'''


def test_spidermons_built_in_monitors_judge_the_crawl_as_they_judge_plain_scrapys(
    team_project: Path, team_venv: Path, mockweb_factory: Any, tmp_path: Path
) -> None:
    """Spidermon's finish-reason, item-count, error-count and retries-at-maximum monitors, on the same crawl
    (a 503 the spider allows and a body that breaks off, each out of retries), with the add-on and with
    plain Scrapy (no add-on): the same verdict, monitor by monitor (two pass, two fail), read from the
    stats keys Scrapy writes."""
    (team_project / "teamproj" / "monitors.py").write_text(MONITORS)
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"specials": {"4": ["/unavailable", "/truncated"]}}))
    web = mockweb_factory(WebSpec(hosts=5, sizes="uniform:3", fanout=1, nav=0, cross=0, scenario=str(scenario)))
    monitor = ["-s", "SPIDERMON_ENABLED=True", "-s", 'EXTENSIONS={"spidermon.contrib.scrapy.extensions.Spidermon": 500}',
               "-s", "SPIDERMON_SPIDER_CLOSE_MONITORS=teamproj.monitors.CloseMonitors",
               "-s", "SPIDERMON_MIN_ITEMS=2", "-s", "SPIDERMON_MAX_ERRORS=0", "-s", "SPIDERMON_MAX_RETRIES=1",
               "-s", "SPIDERMON_EXPECTED_FINISH_REASONS=finished"]
    crawl = ["crawl", "retry", "-a", f"answer={web.url(4)}unavailable", "-a", f"broken={web.url(4)}truncated"]
    verdicts = {}
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "SCRAPY_SETTINGS_MODULE")}
    env["PATH"] = f"{team_venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    for name, extra in (("addon", ["-s", f"FRONTIER_CRAWL_ID=monitored{uuid.uuid4().hex[:8]}"]),
                        ("plain", ["-s", "ADDONS={}"])):
        results = tmp_path / f"monitors-{name}.json"
        result = subprocess.run([str(team_venv / "bin" / "scrapy"), *crawl, *monitor, *extra], cwd=team_project,
                                env={**env, "MONITOR_RESULTS": str(results)}, capture_output=True, text=True,
                                timeout=240, check=False)
        assert result.returncode == 0, result.stderr[-4000:]
        if name == "plain":
            assert "crawler.frontier" not in result.stderr, "plain Scrapy: no add-on"
        verdicts[name] = json.loads(results.read_text())
    assert verdicts["addon"] == verdicts["plain"], verdicts
    assert sorted(verdicts["addon"].values()) == ["FAIL", "FAIL", "OK", "OK"], verdicts


def test_download_slots_are_kept_in_the_frontier_and_every_worker_applies_them(
    team_project: Path, team_venv: Path, mockweb_factory: Any
) -> None:
    """DOWNLOAD_SLOTS = {host 0: concurrency 3, delay 0} given to one worker only: a second worker of the
    crawl, started without it, reads it from the frontier and crawls host 0 with up to 3 requests in
    flight; host 1, without an entry, keeps one at a time and the project's DOWNLOAD_DELAY."""
    web = mockweb_factory(WebSpec(hosts=5, sizes="uniform:40", fanout=3, nav=1, cross=1, filler_words=50, seed=3,
                                  latency_ms=(100, 150)))
    crawl_id = f"dslots{uuid.uuid4().hex[:8]}"
    slots = json.dumps({host_ip(0): {"concurrency": 3, "delay": 0}})
    # (The first worker crawls from a far page, so the second finds pages it has not seen.)
    first = scrapy(team_venv, team_project, "crawl", "team", "-a", f"start={web.url(0, 39)}",
                   "-a", f"domain={host_ip(0)}", "-a", f"crawl_id={crawl_id}", "-s", f"DOWNLOAD_SLOTS={slots}",
                   "-s", "DEPTH_LIMIT=1")
    assert first.returncode == 0, first.stderr[-4000:]
    before = len(web.entries())
    second = scrapy(team_venv, team_project, "crawl", "team", "-a", f"start={web.url(0)}",
                    "-a", f"domain={host_ip(0)}", "-a", f"crawl_id={crawl_id}", "-s", "DEPTH_LIMIT=3")
    assert second.returncode == 0, second.stderr[-4000:]
    assert f"politeness keys with settings of their own (DOWNLOAD_SLOTS): {host_ip(0)}" in second.stderr
    entries = web.entries()[before:]
    assert len([entry for entry in entries if entry.path != "/robots.txt"]) >= 6, "deeper pages for the second"
    assert 2 <= most_in_flight(entries) <= 3
    # Host 1, no entry of its own: one at a time, the project's delay between two.
    before = len(web.entries())
    other = scrapy(team_venv, team_project, "crawl", "team", "-a", f"start={web.url(1)}", "-a", f"domain={host_ip(1)}",
                   "-a", f"crawl_id={crawl_id}")
    assert other.returncode == 0, other.stderr[-4000:]
    entries = web.entries()[before:]
    assert {entry.host for entry in entries} == {host_ip(1)}
    assert sorted(parse_page_path(e.path) for e in entries if e.path != "/robots.txt") == sorted(within_depth(1, 2))
    report = politeness(entries, min_gap=MIN_GAP)
    assert report.overlaps == 0 and report.short_gaps == 0, report


def test_scheduler_idle_before_close_keeps_a_drained_worker_for_urls_added_meanwhile(
    team_project: Path, team_venv: Path, mockweb_factory: Any
) -> None:
    """scrapy-redis's SCHEDULER_IDLE_BEFORE_CLOSE: the worker, its frontier drained, stays open that long;
    a URL seeded meanwhile (scrapy frontier seed) is crawled by it before it closes."""
    web = mockweb_factory(SPEC)
    crawl_id = f"idle{uuid.uuid4().hex[:8]}"
    later = max(SPEC.pages(2) - 1, *within_depth(2, 1))
    assert later not in within_depth(2, 1)
    with scrapy_running(team_venv, team_project, "crawl", "team", "-a", f"start={web.url(2)}",
                        "-a", f"domain={host_ip(2)}", "-a", f"crawl_id={crawl_id}", "-s", "DEPTH_LIMIT=1",
                        "-s", "SCHEDULER_IDLE_BEFORE_CLOSE=20",
                        until="drained; waiting up to 20 s for new URLs") as (crawl, lines):
        seeded = scrapy(team_venv, team_project, "frontier", "seed", web.url(2, later), "--crawl-id", crawl_id)
        assert seeded.returncode == 0, seeded.stderr[-3000:]
    assert crawl.returncode == 0, "".join(lines)[-4000:]
    assert "Scrapy setting: SCHEDULER_IDLE_BEFORE_CLOSE = '20' read as FRONTIER_IDLE_BEFORE_CLOSE = 20.0" in "".join(lines)
    fetched = [parse_page_path(entry.path) for entry in web.entries() if entry.path != "/robots.txt"]
    assert later in fetched, "the URL seeded while the worker waited was crawled by it"
