"""A stats collector without per-call overhead (``STATS_CLASS``), that can write its stats as JSON.

Scrapy 2.19's ``StatsCollector`` routes every attribute access through a
Python ``__getattribute__`` that wraps the stats methods in a deprecation
check for the old ``spider`` argument. A crawler calls ``inc_value`` a dozen
times per page, so that costs more than the counting. This collector keeps
``MemoryStatsCollector``'s behaviour with plain attribute access.

With ``STATS_JSON_FILE`` set, the final stats are also written there as one
JSON object when the spider closes (times as ISO 8601 strings): data a
program (a test, a scheduler of crawls) reads, instead of the log's dump.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import Any

from scrapy.statscollectors import MemoryStatsCollector

logger = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


class LeanStatsCollector(MemoryStatsCollector):
    __getattribute__ = object.__getattribute__

    def _persist_stats(self, stats: dict[str, Any]) -> None:
        super()._persist_stats(stats)
        path = self._crawler.settings.get("STATS_JSON_FILE")
        if not path:
            return
        try:
            Path(path).write_text(json.dumps(stats, default=_plain, sort_keys=True), encoding="utf-8")
        except OSError as exc:
            logger.error("STATS_JSON_FILE: cannot write %s: %s", path, exc)
