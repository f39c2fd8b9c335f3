"""One task per request (``TUNING_ONE_TASK_PER_REQUEST``, :mod:`crawler.engine`), lean signals
(``TUNING_LEAN_SIGNALS``, :mod:`crawler.extensions.signalmanager`) and the start-request middleware
(:mod:`crawler.middlewares.start`): the same crawl as Scrapy's engine, signal manager and
``StartSpiderMiddleware``.

A real Scrapy crawl (``scrapy runspider``, in its own process: the reactor is
per process) of a spider whose requests meet every path a request can take
from the engine: a response with items and new requests, a download error
and its errback, a downloader middleware's new request, a callback that
fails, an asynchronous callback that fails after its first item, an HTTP
error; run with all three on and off (``CONCURRENT_ITEMS = 1``, as the
add-on sets: the output taken in the request's task), it must give the same
items, stats and end, keep the downloader's concurrency, and leave nothing
in progress.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

SPIDER = '''
import asyncio, json, os
from scrapy import Request, Spider, signals
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.http import HtmlResponse

RUNNING = [0, 0]  # now, most at once


class Answer(BaseDownloadHandler):
    async def download_request(self, request):
        RUNNING[0] += 1
        RUNNING[1] = max(RUNNING[1], RUNNING[0])
        try:
            await asyncio.sleep(0.002)
            if "/fail" in request.url:
                raise ConnectionRefusedError("refused")
            status = 500 if "/error" in request.url else 200
            return HtmlResponse(request.url, status=status, body=b"<html>page</html>", request=request)
        finally:
            RUNNING[0] -= 1


class Moved:
    """A downloader middleware answering /moved with a new request (as a redirect does)."""

    def process_response(self, request, response):
        if request.url.endswith("/moved"):
            return request.replace(url=request.url.replace("/moved", "/target"))
        return response


class Pages(Spider):
    name = "pages"

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.closed_with, signal=signals.spider_closed)
        return spider

    async def start(self):
        for n in range(48):
            kind = ("fail", "moved", "boom", "error", "page", "late")[n % 6]
            callback = self.parse_late if kind == "late" else None
            yield Request(f"http://a.test/{n}/{kind}", callback=callback, errback=self.failed)

    def parse(self, response):
        if response.url.endswith("/boom"):
            raise ValueError("the callback failed")
        yield {"url": response.url, "start": response.meta.get("is_start_request", False)}
        if "/child" not in response.url:
            yield Request(response.url + "/child", errback=self.failed)

    async def parse_late(self, response):
        yield {"url": response.url}
        await asyncio.sleep(0)
        raise ValueError("the callback failed after an item")

    def failed(self, failure):
        yield {"failed": failure.request.url}

    def closed_with(self, spider, reason):
        engine = self.crawler.engine
        with open(os.environ["ENGINE_OUT"], "w") as out:
            json.dump({"engine": type(engine).__name__, "scraper": type(engine.scraper).__name__, "reason": reason,
                       "signals": type(self.crawler.signals).__name__,
                       "spidermw": type(engine.scraper.spidermw).__name__,
                       "inprogress": len(engine._slot.inprogress), "downloader_active": len(engine.downloader.active),
                       "scraper_active": len(engine.scraper.slot.active),
                       "scraper_active_size": engine.scraper.slot.active_size,
                       "most_at_once": RUNNING[1],
                       "stats": {key: str(value) for key, value in self.crawler.stats.get_stats().items()}}, out)
'''


def crawl(tmp_path: Path, one_task: bool) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    work = tmp_path / ("on" if one_task else "off")
    work.mkdir()
    (work / "enginespider.py").write_text(SPIDER)
    settings = {
        "DOWNLOADER": "crawler.downloader.direct.DirectDownloader",
        "DOWNLOAD_HANDLERS": {"http": "enginespider.Answer", "https": None},
        "DOWNLOADER_MIDDLEWARES": {"enginespider.Moved": 500},
        # Start requests marked by the crawler's middleware (only process_start) or by Scrapy's.
        "SPIDER_MIDDLEWARES": {"scrapy.spidermiddlewares.start.StartSpiderMiddleware": None,
                               "crawler.middlewares.start.StartRequestsMiddleware": 25} if one_task else {},
        "EXTENSIONS": {"crawler.extensions.tuning.RuntimeTuning": 0},
        "TUNING_ONE_TASK_PER_REQUEST": one_task, "TUNING_LEAN_SIGNALS": one_task,
        "CONCURRENT_REQUESTS": 4, "CONCURRENT_REQUESTS_PER_DOMAIN": 4, "DOWNLOAD_DELAY": 0,
        "RETRY_ENABLED": False, "TELNETCONSOLE_ENABLED": False, "LOG_LEVEL": "INFO", "CONCURRENT_ITEMS": 1,
    }
    args = [sys.executable, "-m", "scrapy", "runspider", "enginespider.py", "-o", "items.jsonl"]
    for name, value in settings.items():
        args += ["-s", f"{name}={json.dumps(value) if isinstance(value, dict) else value}"]
    env = dict(os.environ, PYTHONPATH=f"{work}{os.pathsep}{ROOT}", ENGINE_OUT=str(work / "engine.json"))
    # Plain Scrapy with the settings above, whatever an earlier test left (Scrapy's init_env sets this).
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env.pop("SCRAPY_PROJECT", None)
    run = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    engine = json.loads((work / "engine.json").read_text())
    every = engine.pop("stats")
    stats = {key: every.get(key) for key in (
        "item_scraped_count", "response_received_count", "downloader/request_count",
        "spider_exceptions/ValueError", "httperror/response_ignored_count")}
    items = sorted(sorted(json.loads(line).items()) for line in (work / "items.jsonl").read_text().splitlines())
    return stats, items, {**engine, "log": run.stderr[-4000:]}


@pytest.mark.e2e
def test_a_crawl_with_one_task_per_request_is_scrapys_crawl(tmp_path: Path) -> None:
    on_stats, on_items, on_engine = crawl(tmp_path, one_task=True)
    off_stats, off_items, off_engine = crawl(tmp_path, one_task=False)
    assert (on_engine["engine"], off_engine["engine"]) == ("DirectEngine", "ExecutionEngine")
    assert (on_engine["scraper"], off_engine["scraper"]) == ("SequentialScraper", "Scraper")
    assert (on_engine["signals"], off_engine["signals"]) == ("LeanSignalManager", "SignalManager")
    assert (on_engine["spidermw"], off_engine["spidermw"]) == ("LeanSpiderMiddlewareManager", "SpiderMiddlewareManager")
    assert on_stats == off_stats and on_items == off_items
    # Every path was taken: 8 of each kind; /moved became /target; /boom failed in its callback,
    # /late after its item (which is kept).
    assert on_stats["spider_exceptions/ValueError"] == "16", on_engine["log"]
    assert sum(1 for item in on_items if dict(item).get("url", "").endswith("/late")) == 8
    # The errback: 8 download errors and 8 HTTP 500s (Scrapy's HTTP error middleware).
    assert sum(1 for item in on_items if item[0][0] == "failed") == 16
    assert any("/target" in dict(item).get("url", "") for item in on_items)
    # Start requests are marked, their children are not (the same with either start middleware).
    starts = {dict(item)["url"]: dict(item)["start"] for item in on_items if "start" in dict(item)}
    assert starts["http://a.test/4/page"] is True and starts["http://a.test/4/page/child"] is False
    for engine in (on_engine, off_engine):
        assert engine["reason"] == "finished"
        assert engine["inprogress"] == engine["downloader_active"] == engine["scraper_active"] == 0
        assert engine["scraper_active_size"] == 0
        # The downloader's concurrency holds: a request counts as active from the moment it leaves the scheduler.
        assert 1 < engine["most_at_once"] <= 4
