"""Run-time tuning: a callback's output processed in the callback's own task (``TUNING_SEQUENTIAL_OUTPUT``).

Scrapy's real engine and scraper; the step that processes one output object
(its spider middlewares, item pipelines and scheduler) is recorded in its place,
so what is checked is the order, the task and the errors of the loop around it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.http import Response
from scrapy.utils.test import get_crawler

from crawler.scrapy_internals import sequential_spider_output


class Recorder:
    def __init__(self) -> None:
        self.processed: list[tuple[Any, asyncio.Task[Any] | None]] = []
        self.errors: list[tuple[type[BaseException], Request, Response]] = []
        self.running = 0
        self.most_at_once = 0

    async def process(self, output: Any, response: Response) -> None:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        await asyncio.sleep(0)
        self.processed.append((output, asyncio.current_task()))
        self.running -= 1

    def error(self, failure: Any, request: Request, response: Response) -> None:
        self.errors.append((failure.type, request, response))


def scraper(concurrent_items: int) -> tuple[Any, Recorder, bool]:
    crawler = get_crawler(Spider, {"CONCURRENT_ITEMS": concurrent_items})
    crawler._apply_settings()
    engine = crawler._create_engine()
    recorder = Recorder()
    engine.scraper._process_spidermw_output_async = recorder.process
    engine.scraper.handle_spider_error = recorder.error
    return engine.scraper, recorder, sequential_spider_output(engine)


def outputs(fail_after: int | None = None) -> Iterator[Any]:
    for n in range(5):
        if n == fail_after:
            raise ValueError("the callback failed")
        yield {"n": n}


async def async_outputs(fail_after: int | None = None) -> AsyncIterator[Any]:
    for output in outputs(fail_after):
        await asyncio.sleep(0)
        yield output


REQUEST = Request("http://a.test/")
RESPONSE = Response("http://a.test/", request=REQUEST)


@pytest.mark.parametrize("make", [outputs, async_outputs])
def test_outputs_go_one_after_the_other_in_order_in_the_callbacks_task(make: Any) -> None:
    scrape, recorder, installed = scraper(1)
    assert installed

    async def run() -> asyncio.Task[Any] | None:
        await scrape.handle_spider_output_async(make(), REQUEST, RESPONSE)
        return asyncio.current_task()

    task = asyncio.run(run())
    assert [output for output, _ in recorder.processed] == [{"n": n} for n in range(5)]
    assert {ran_in for _, ran_in in recorder.processed} == {task}
    assert recorder.most_at_once == 1 and not recorder.errors


@pytest.mark.parametrize("make", [outputs, async_outputs])
def test_a_callback_that_fails_midway_goes_to_scrapys_error_handler_after_what_it_gave(make: Any) -> None:
    scrape, recorder, _ = scraper(1)
    asyncio.run(scrape.handle_spider_output_async(make(fail_after=2), REQUEST, RESPONSE))
    assert [output for output, _ in recorder.processed] == [{"n": 0}, {"n": 1}]
    assert recorder.errors == [(ValueError, REQUEST, RESPONSE)]


def test_with_more_concurrent_items_scrapys_own_way_stays() -> None:
    scrape, recorder, installed = scraper(4)
    assert not installed

    async def run() -> asyncio.Task[Any] | None:
        await scrape.handle_spider_output_async(outputs(), REQUEST, RESPONSE)
        return asyncio.current_task()

    task = asyncio.run(run())
    assert sorted(output["n"] for output, _ in recorder.processed) == list(range(5))
    assert task not in {ran_in for _, ran_in in recorder.processed}
