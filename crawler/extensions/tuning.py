"""Run-time tuning for a long crawl in one process (``TUNING_*`` settings).

* Garbage collector (``TUNING_GC_FREEZE``, ``TUNING_GC_GEN0_THRESHOLD``): a
  crawler allocates many short-lived objects per page, and CPython's default
  generation-0 threshold (700) triggers collections that walk every long-lived
  object (modules, settings, the event-loop machinery) again and again. At
  ``spider_opened`` everything allocated during start-up moves to the
  permanent generation (``gc.freeze()``) and the generation-0 threshold rises.
  Reference cycles are still collected, only less often.
* Log gate (``TUNING_LOG_GATE``): Scrapy sets its loggers to DEBUG (and the
  root logger to ``NOTSET``) and filters by ``LOG_LEVEL`` in its handler, so
  every DEBUG message of every request builds a ``LogRecord`` that is then
  thrown away. Raising those loggers to ``LOG_LEVEL`` drops them before they
  are built. Turn it off if you
  attach your own handler at a lower level than ``LOG_LEVEL``.
* One task per request (``TUNING_ONE_TASK_PER_REQUEST``): with the crawler's
  downloader, each request's download, callback and release run in one
  coroutine (:mod:`crawler.engine`) instead of Scrapy's chain of Deferreds
  and two tasks.
* Lean signals (``TUNING_LEAN_SIGNALS``): the crawler's signal manager becomes a
  :class:`~crawler.extensions.signalmanager.LeanSignalManager`, which sends as
  Scrapy's does but works out each receiver and the arguments it takes once,
  not on every send (a few sends with receivers per page), and runs a
  receiver of an awaited send in a task only when it returns an awaitable.
  A signal manager that is not Scrapy's own is left as it is.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.engine import use_direct_engine
from crawler.extensions.signalmanager import use_lean_signals
from crawler.settings_parsing import get_bool, get_int, setting

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# The root logger, and the loggers Scrapy sets to DEBUG explicitly.
_GATED_LOGGERS = ("", "scrapy")


class RuntimeTuning:
    def __init__(self, crawler: Crawler, gc_freeze: bool, gen0_threshold: int, log_level: int | None,
                 one_task_per_request: bool) -> None:
        self.gc_freeze = gc_freeze
        self.one_task_per_request = one_task_per_request
        self.crawler = crawler
        self.gen0_threshold = gen0_threshold
        self.log_level = log_level
        self._previous_threshold: tuple[int, int, int] | None = None
        self._previous_levels: dict[str, int] = {}

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        gc_freeze = get_bool(settings, "TUNING_GC_FREEZE")
        threshold = get_int(settings, "TUNING_GC_GEN0_THRESHOLD", minimum=0)
        log_level = None
        if get_bool(settings, "TUNING_LOG_GATE"):
            level = logging.getLevelName(str(setting(settings, "LOG_LEVEL")).upper())
            log_level = level if isinstance(level, int) else None
        one_task = get_bool(settings, "TUNING_ONE_TASK_PER_REQUEST")
        if get_bool(settings, "TUNING_LEAN_SIGNALS"):
            use_lean_signals(crawler)
        if not gc_freeze and not threshold and log_level is None and not one_task:
            raise NotConfigured
        extension = cls(crawler, gc_freeze, threshold, log_level, one_task)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        if self.one_task_per_request and use_direct_engine(self.crawler.engine):
            logger.debug("Tuning: each request's download, callback and release run in one task")
        if self.log_level is not None and self.log_level > logging.DEBUG:
            for name in _GATED_LOGGERS:
                gated = logging.getLogger(name)
                if gated.getEffectiveLevel() < self.log_level:
                    self._previous_levels[name] = gated.level
                    gated.setLevel(self.log_level)
        if self.gc_freeze:
            gc.collect()
            gc.freeze()
        if self.gen0_threshold:
            self._previous_threshold = gc.get_threshold()
            _, gen1, gen2 = self._previous_threshold
            gc.set_threshold(self.gen0_threshold, gen1, gen2)
        logger.debug("Tuning: froze %d objects, gen0 threshold %d", gc.get_freeze_count(), self.gen0_threshold)

    def spider_closed(self) -> None:
        if self._previous_threshold is not None:
            gc.set_threshold(*self._previous_threshold)
        if self.gc_freeze:
            gc.unfreeze()
        for name, level in self._previous_levels.items():
            logging.getLogger(name).setLevel(level)
        self._previous_levels.clear()
