"""A stats collector without per-call overhead (``STATS_CLASS``).

Scrapy 2.19's ``StatsCollector`` routes every attribute access through a
Python ``__getattribute__`` that wraps the stats methods in a deprecation
check for the old ``spider`` argument. A crawler calls ``inc_value`` a dozen
times per page, so that costs more than the counting. This collector keeps
``MemoryStatsCollector``'s behaviour with plain attribute access.
"""

from __future__ import annotations

from scrapy.statscollectors import MemoryStatsCollector


class LeanStatsCollector(MemoryStatsCollector):
    __getattribute__ = object.__getattribute__
