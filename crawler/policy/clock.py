"""The crawl clock: the time recrawl decisions are made in.

Real time, unless ``RECRAWL_TIME_SCALE`` is set above 1 (tests and
simulations): then crawl time runs that many times faster than real time
from ``RECRAWL_TIME_EPOCH`` (a Unix time; default: when the process started),
so an hour of recrawl behaviour takes seconds; ``RECRAWL_TIME_OFFSET``
seconds are added on top (a batch run that should see the crawl as it will be
a day later). Fetch times in the URL metadata, revisit due times and the
drain of due revisits use this clock; politeness delays, leases and WARC
dates always use real time. Workers sharing a frontier with a scale above 1
need the same ``RECRAWL_TIME_EPOCH``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from crawler.settings_parsing import get_float, is_set


@dataclass(frozen=True)
class CrawlClock:
    scale: float = 1.0
    epoch: float = 0.0
    offset: float = 0.0

    def now(self) -> float:
        return self.at(time.time())

    def at(self, real: float) -> float:
        """The crawl-clock time of a real (Unix) time."""
        if self.scale == 1.0:
            return real + self.offset
        return self.epoch + (real - self.epoch) * self.scale + self.offset

    def to_real_delay(self, crawl_seconds: float) -> float:
        """Real seconds until ``crawl_seconds`` of crawl time have passed."""
        return crawl_seconds / self.scale

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> CrawlClock:
        scale = get_float(settings, "RECRAWL_TIME_SCALE", minimum=1.0)
        epoch = get_float(settings, "RECRAWL_TIME_EPOCH", minimum=0.0) if is_set(settings, "RECRAWL_TIME_EPOCH") \
            else _STARTED
        return cls(scale, epoch, get_float(settings, "RECRAWL_TIME_OFFSET"))


_STARTED = time.time()
