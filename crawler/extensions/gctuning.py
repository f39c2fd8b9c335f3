"""Garbage-collector tuning for a long crawl (``GC_TUNING_ENABLED``).

A crawler allocates many short-lived objects per page; CPython's default
generation-0 threshold (700) triggers collections that walk every long-lived
object (modules, settings, the Twisted/asyncio machinery) over and over.
At ``spider_opened`` this extension moves everything allocated during start-up
to the permanent generation (``gc.freeze()``), so later collections skip it,
and raises the generation-0 threshold (``GC_GEN0_THRESHOLD``). Reference
cycles are still collected, only less often.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.settings_parsing import get_bool, get_int

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class GcTuning:
    def __init__(self, gen0_threshold: int) -> None:
        self.gen0_threshold = gen0_threshold
        self._previous: tuple[int, int, int] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not get_bool(crawler.settings, "GC_TUNING_ENABLED", True):
            raise NotConfigured
        extension = cls(get_int(crawler.settings, "GC_GEN0_THRESHOLD", 50_000, minimum=1))
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        gc.collect()
        gc.freeze()
        self._previous = gc.get_threshold()
        _, gen1, gen2 = self._previous
        gc.set_threshold(self.gen0_threshold, gen1, gen2)
        logger.debug("GC: froze %d objects, gen0 threshold %d", gc.get_freeze_count(), self.gen0_threshold)

    def spider_closed(self) -> None:
        if self._previous is not None:
            gc.set_threshold(*self._previous)
        gc.unfreeze()
