"""The downloader that starts a request in place when its slot would start it at once, and its middleware
manager's lean loops (the same answers as Scrapy's, for every kind of middleware answer).

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
    crawler = get_crawler(Spider, {"DOWNLOAD_HANDLERS": {"http": f"{__name__}.Answer", "https": None},
                                   "DOWNLOAD_DELAY": 0,
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


# -- The middleware manager's lean loops answer as Scrapy's own ------------------------------------------------


class Mark:
    """A downloader middleware whose answers the test sets: what process_request and process_response return."""

    on_request: Any = None
    on_response: Any = None

    def process_request(self, request: Request) -> Any:
        request.meta.setdefault("seen", []).append(type(self).__name__)
        return type(self).on_request(request) if callable(type(self).on_request) else type(self).on_request

    def process_response(self, request: Request, response: Response) -> Any:
        request.meta.setdefault("seen", []).append(type(self).__name__ + ".response")
        answer = type(self).on_response
        return answer(request, response) if callable(answer) else (response if answer is None else answer)


class First(Mark):
    pass


class Second(Mark):
    pass


class WithSpider:
    def process_request(self, request: Request, spider: Spider) -> None:
        request.meta["spider"] = spider.name


async def later(value: Any) -> Any:
    await asyncio.sleep(0)
    return value


def deferred(value: Any) -> Any:
    from twisted.internet.defer import succeed

    return succeed(value)


ANSWERS: dict[str, tuple[Any, Any]] = {
    "nothing": (None, None),
    "a response at once": (lambda r: Response(r.url, status=203, request=r), None),
    "a request at once": (lambda r: Request("http://b.test/"), None),
    "a coroutine": (lambda r: later(None), lambda r, resp: later(resp)),
    "a coroutine's response": (lambda r: later(Response(r.url, status=204, request=r)), None),
    "a response replaced": (None, lambda r, resp: Response(r.url, status=410, request=r)),
    "a request from the response": (None, lambda r, resp: Request("http://c.test/")),
    "a wrong type from process_request": ("text", None),
    "a wrong type from process_response": (None, lambda r, resp: 42),
    "a coroutine's wrong type": (lambda r: later(3.5), None),
}


def run_chain(cls: type[Downloader], on_request: Any, on_response: Any) -> tuple[str, Any]:
    First.on_request, First.on_response = on_request, on_response
    Second.on_request, Second.on_response = None, None
    loader, _ = downloader(cls, DOWNLOADER_MIDDLEWARES={f"{__name__}.First": 1, f"{__name__}.Second": 2,
                                                        f"{__name__}.WithSpider": 3})
    request = Request("http://a.test/")

    async def run() -> Any:
        return await loader.middleware.download_async(loader._enqueue_request, request)

    try:
        result = asyncio.run(run())
    except Exception as exc:  # the error itself is what is compared
        return f"{type(exc).__name__}: {exc}", request.meta.get("seen")
    described = (type(result).__name__, result.url, getattr(result, "status", None))
    return repr(described), (request.meta.get("seen"), request.meta.get("spider"), len(Answer.calls))


@pytest.mark.parametrize("case", list(ANSWERS))
def test_the_lean_middleware_loops_answer_as_scrapys(case: str) -> None:
    on_request, on_response = ANSWERS[case]
    scrapys = run_chain(Downloader, on_request, on_response)
    Answer.calls = []
    ours = run_chain(DirectDownloader, on_request, on_response)
    assert ours == scrapys


def test_a_deferred_from_a_middleware_still_works_with_scrapys_warning() -> None:
    from scrapy.exceptions import ScrapyDeprecationWarning

    with pytest.warns(ScrapyDeprecationWarning, match="returned a Deferred"):
        outcome = run_chain(DirectDownloader, lambda r: deferred(None), None)
    assert outcome[0] == repr(("Response", "http://a.test/", 200))
