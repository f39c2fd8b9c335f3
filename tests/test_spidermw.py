"""The lean spider-middleware manager (crawler/spidermw.py) against Scrapy's: the same scenarios on both,
the same answers (the objects, their order, the middleware calls, the errors raised)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import pytest
from scrapy import Request, Spider
from scrapy.core.spidermw import SpiderMiddlewareManager
from scrapy.http import HtmlResponse, Response
from scrapy.utils.test import get_crawler
from twisted.python.failure import Failure

from crawler.spidermw import LeanSpiderMiddlewareManager, use_lean_spidermw

Events = list[tuple[Any, ...]]


class Boom(Exception):
    pass


class Mw:
    """A middleware that logs what it sees; `raise_after` makes its output raise after that many objects;
    `recover` is what its process_spider_exception gives back (None: it declines)."""

    def __init__(self, name: str, events: Events, *, raise_after: int | None = None,
                 recover: Callable[[], Iterable[Any] | AsyncIterator[Any]] | None = None,
                 input_error: bool = False) -> None:
        self.name, self.events, self.raise_after, self.recover, self.input_error = (
            name, events, raise_after, recover, input_error)

    def process_spider_input(self, response: Response) -> None:
        self.events.append(("input", self.name))
        if self.input_error:
            raise Boom(f"input of {self.name}")

    async def process_spider_output(self, response: Response, result: AsyncIterator[Any]) -> AsyncIterator[Any]:
        n = 0
        async for output in result:
            if self.raise_after is not None and n == self.raise_after:
                raise Boom(f"output of {self.name}")
            n += 1
            yield (self.name, output)
        if self.raise_after is not None and n == self.raise_after:
            raise Boom(f"output of {self.name} at its end")

    def process_spider_exception(self, response: Response, exception: Exception) -> Any:
        self.events.append(("exception", self.name, str(exception)))
        return None if self.recover is None else self.recover()


def items(*values: Any) -> Callable[[], Iterable[Any]]:
    return lambda: list(values)


def async_items(*values: Any) -> Callable[[], AsyncIterator[Any]]:
    async def produce() -> AsyncIterator[Any]:
        for value in values:
            yield value
    return produce


def raising_after(n: int, *values: Any) -> Callable[[], Iterable[Any]]:
    def produce() -> Iterable[Any]:
        yield from values[:n]
        raise Boom("in recovered output")
    return produce


def callback_yielding(*values: Any, fail_after: int | None = None, asynchronous: bool = False) -> Callable[..., Any]:
    def sync(response: Response) -> Iterable[Any]:
        for n, value in enumerate(values):
            if fail_after == n:
                raise Boom("callback")
            yield value
        if fail_after == len(values):
            raise Boom("callback at its end")

    async def agen(response: Response) -> AsyncIterator[Any]:
        for value in sync(response):
            yield value

    return agen if asynchronous else sync


SCENARIOS: dict[str, tuple[Callable[[Events], list[Mw]], Callable[..., Any]]] = {
    "plain": (lambda e: [Mw("a", e), Mw("b", e)], callback_yielding(1, 2, 3)),
    "async callback": (lambda e: [Mw("a", e), Mw("b", e)], callback_yielding(1, 2, asynchronous=True)),
    "no output": (lambda e: [Mw("a", e)], callback_yielding()),
    "callback error, recovered by the outer": (
        lambda e: [Mw("a", e, recover=items("r1", "r2")), Mw("b", e)], callback_yielding(1, 2, fail_after=1)),
    "callback error, recovered by the inner": (
        lambda e: [Mw("a", e), Mw("b", e, recover=async_items("r1"))], callback_yielding(1, 2, fail_after=1)),
    "callback error, nobody recovers": (
        lambda e: [Mw("a", e), Mw("b", e)], callback_yielding(1, 2, fail_after=2)),
    "a middleware's output error, recovered after it": (
        lambda e: [Mw("a", e, recover=items("ra")), Mw("b", e, raise_after=1)], callback_yielding(1, 2, 3)),
    "a middleware's output error, nobody after it recovers": (
        lambda e: [Mw("a", e, raise_after=1), Mw("b", e, recover=items("rb"))], callback_yielding(1, 2, 3)),
    "errors at two levels, both recovered": (
        lambda e: [Mw("a", e, recover=items("ra")), Mw("b", e, raise_after=1, recover=items("rb")),
                   Mw("c", e, recover=items("rc"))],
        callback_yielding(1, 2, fail_after=1)),
    "recovered output raises": (
        lambda e: [Mw("a", e), Mw("b", e, recover=raising_after(1, "r1", "r2"))], callback_yielding(1, fail_after=1)),
    "input error, recovered": (
        lambda e: [Mw("a", e, recover=items("ra")), Mw("b", e, input_error=True)], callback_yielding(1)),
    "input error, nobody recovers": (lambda e: [Mw("a", e), Mw("b", e, input_error=True)], callback_yielding(1)),
}


class TeamSpider(Spider):
    name = "team"


def run(lean: bool, scenario: str) -> Events:
    build, callback = SCENARIOS[scenario]
    events: Events = []
    crawler = get_crawler(TeamSpider)
    crawler.spider = TeamSpider()
    manager = SpiderMiddlewareManager(*build(events), crawler=crawler)
    if lean:
        assert use_lean_spidermw(manager)
    request = Request("http://a.example/")
    response = HtmlResponse("http://a.example/", body=b"<html></html>", request=request)

    async def scrape(result: Response | Failure, request: Request) -> Any:
        if isinstance(result, Failure):
            result.raiseException()
        return callback(result)

    async def main() -> None:
        try:
            output = await manager.scrape_response_async(scrape, response, request)
            async for value in output:
                events.append(("out", value))
        except Exception as exc:  # the scraper's handle_spider_error would have it
            events.append(("raised", type(exc).__name__, str(exc)))

    asyncio.run(main())
    return events


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_lean_manager_answers_as_scrapys(scenario: str) -> None:
    scrapys, ours = run(False, scenario), run(True, scenario)
    assert ours == scrapys
    assert any(event[0] == "out" for event in scrapys) or scenario in (
        "no output", "input error, nobody recovers")


def test_the_scenarios_reach_what_they_name() -> None:
    """The cases above are what they say: recovered output after the level's own, inner before outer."""
    # The output goes c -> b -> a (a is nearest the engine). The callback's error is recovered by c (level
    # 0: its output then goes through b and a), b's error at its end by a (level 1): level 1's output
    # comes first. (b raises again at the end of the recovered output it passes on.)
    outputs = [event[1] for event in run(True, "errors at two levels, both recovered") if event[0] == "out"]
    assert outputs == [("a", ("b", ("c", 1))), "ra", ("a", ("b", "rc")), "ra"]
    assert ("raised", "Boom", "in recovered output") in run(True, "recovered output raises")
    assert run(True, "input error, nobody recovers")[-1] == ("raised", "Boom", "input of b")


def test_only_scrapys_own_manager_is_made_lean() -> None:
    class Own(SpiderMiddlewareManager):
        pass

    crawler = get_crawler(TeamSpider)
    crawler.spider = TeamSpider()
    own = Own(crawler=crawler)
    assert not use_lean_spidermw(own) and type(own) is Own
    scrapys = SpiderMiddlewareManager(crawler=crawler)
    assert use_lean_spidermw(scrapys) and type(scrapys) is LeanSpiderMiddlewareManager
