"""The item pipeline manager's lean loop: the same items, errors and warnings as Scrapy's manager for every kind
of pipeline answer (at once, a coroutine, a Deferred, another awaitable, a dropped item, a spider argument)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from scrapy import Spider
from scrapy.exceptions import DropItem
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.test import get_crawler

from crawler.addon import SETTINGS
from crawler.pipelines.manager import DirectItemPipelineManager


class Stage:
    """A pipeline whose answer the test sets; each notes its name in the item."""

    answer: Any = None

    def process_item(self, item: dict[str, Any]) -> Any:
        item.setdefault("seen", []).append(type(self).__name__)
        answer = type(self).answer
        return answer(item) if callable(answer) else item


class First(Stage):
    pass


class Second(Stage):
    pass


class WithSpider:
    def process_item(self, item: dict[str, Any], spider: Spider) -> Any:
        item["spider"] = spider.name
        return item


class Last:
    async def process_item(self, item: dict[str, Any]) -> Any:
        await asyncio.sleep(0)
        item.setdefault("seen", []).append("Last")
        return item


async def later(value: Any) -> Any:
    await asyncio.sleep(0)
    return value


def deferred(value: Any) -> Any:
    from twisted.internet.defer import succeed

    return succeed(value)


def future(value: Any) -> asyncio.Future[Any]:
    done = asyncio.get_running_loop().create_future()
    done.set_result(value)
    return done


def drop(item: Any) -> Any:
    raise DropItem("not wanted")


ANSWERS: dict[str, Any] = {
    "the item at once": None,
    "another object at once": lambda item: {"other": True},
    "a coroutine": later,
    "a coroutine's other object": lambda item: later({"replaced": 1}),
    "a Deferred": deferred,
    "another awaitable": future,
    "a dropped item": drop,
    "None": lambda item: None,
}


def run_chain(cls: type[ItemPipelineManager], answer: Any) -> tuple[str, list[str]]:
    First.answer = answer
    crawler = get_crawler(
        Spider,
        {
            "ITEM_PIPELINES": {
                f"{__name__}.First": 1,
                f"{__name__}.WithSpider": 2,
                f"{__name__}.Second": 3,
                f"{__name__}.Last": 4,
            }
        },
    )
    crawler.spider = Spider("t")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        manager = cls.from_crawler(crawler)
        manager._set_compat_spider(crawler.spider)
        item: dict[str, Any] = {}
        try:
            outcome = repr(asyncio.run(manager.process_item_async(item)))
        except Exception as exc:  # the error itself is what is compared
            outcome = f"{type(exc).__name__}: {exc} ({item})"
    return outcome, [
        str(warning.message)
        for warning in caught
        if "process_item" in str(warning.message) or "Deferred" in str(warning.message)
    ]


@pytest.mark.parametrize("case", list(ANSWERS))
def test_the_lean_loop_answers_as_scrapys(case: str) -> None:
    scrapys = run_chain(ItemPipelineManager, ANSWERS[case])
    ours = run_chain(DirectItemPipelineManager, ANSWERS[case])
    assert ours == scrapys
    if case == "a Deferred":  # Scrapy's deprecation warning, naming the pipeline
        assert any(f"{__name__}.Stage.process_item returned a Deferred" in message for message in ours[1])


def test_the_add_on_names_the_lean_manager() -> None:
    assert SETTINGS["ITEM_PROCESSOR"] == "crawler.pipelines.manager.DirectItemPipelineManager"
