"""The downloader that starts a request in place when its slot would start it at once.

The download handler here stands for the network (the downloader's queueing is
under test, not the client: ``test_http11.py`` and the crawl tests have that).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from scrapy import Request, Spider, signals
from scrapy.core.downloader import Downloader
from scrapy.core.downloader.handlers.base import BaseDownloadHandler
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawler.downloader.direct import DirectDownloader


class Answer(BaseDownloadHandler):
    """Answers every request with a 200 after a yield to the loop, noting the task and time it ran in."""

    calls: list[tuple[str, asyncio.Task[Any] | None, float]] = []

    async def download_request(self, request: Request) -> Response:
        Answer.calls.append((request.url, asyncio.current_task(), time.monotonic()))
        await asyncio.sleep(0)
        if request.url.endswith("/fails"):
            raise ConnectionRefusedError("refused")
        return Response(request.url, status=200, body=b"ok", request=request)


def downloader(cls: type[Downloader], **settings: Any) -> tuple[Downloader, list[str]]:
    crawler = get_crawler(Spider, {"DOWNLOAD_HANDLERS": {"http": f"{__name__}.Answer"}, "DOWNLOAD_DELAY": 0,
                                   **settings})
    crawler.spider = Spider("t")
    seen: list[str] = []
    for name in ("request_reached_downloader", "response_downloaded", "request_left_downloader"):
        crawler.signals.connect(lambda *_a, _n=name, **_k: seen.append(_n), signal=getattr(signals, name), weak=False)
    return cls(crawler), seen


@pytest.fixture(autouse=True)
def _fresh_calls() -> None:
    Answer.calls = []


@pytest.mark.parametrize("cls", [DirectDownloader, Downloader])
def test_a_request_of_a_free_slot_gets_its_answer_and_scrapys_signals(cls: type[Downloader]) -> None:
    async def run() -> tuple[Response, asyncio.Task[Any] | None]:
        loader, seen = downloader(cls)
        response = await loader._enqueue_request(Request("http://a.test/page"))
        assert seen == ["request_reached_downloader", "response_downloaded", "request_left_downloader"]
        assert not any(slot.active or slot.transferring or slot.queue for slot in loader.slots.values())
        loader.close()
        return response, asyncio.current_task()

    response, task = asyncio.run(run())
    assert (response.status, response.body) == (200, b"ok")
    assert response.request is not None and response.request.meta["download_slot"] == "a.test"
    # The direct path runs the download in the caller's own task; Scrapy's starts a task for it.
    assert (Answer.calls[0][1] is task) == (cls is DirectDownloader)


def test_an_error_reaches_the_caller_and_the_slot_is_left_empty() -> None:
    async def run() -> None:
        loader, seen = downloader(DirectDownloader)
        with pytest.raises(ConnectionRefusedError):
            await loader._enqueue_request(Request("http://a.test/fails"))
        assert seen == ["request_reached_downloader", "request_left_downloader"]
        assert not any(slot.active or slot.transferring for slot in loader.slots.values())
        loader.close()

    asyncio.run(run())


def test_a_slot_with_a_delay_still_spaces_its_requests_through_scrapys_queue() -> None:
    async def run() -> asyncio.Task[Any] | None:
        loader, _ = downloader(DirectDownloader, DOWNLOAD_SLOTS={"slow.test": {"delay": 0.3, "jitter": 0}})
        responses = await asyncio.gather(*(loader._enqueue_request(Request(f"http://slow.test/{n}"))
                                           for n in range(2)))
        assert [r.status for r in responses] == [200, 200]
        loader.close()
        return asyncio.current_task()

    task = asyncio.run(run())
    (_, first_task, first), (_, _, second) = Answer.calls
    assert first_task is not task
    assert second - first >= 0.3 - 0.01
