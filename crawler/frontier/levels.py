"""Which front queue a Scrapy priority goes to (pure)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PriorityLevels:
    """Maps Scrapy's ``Request.priority`` (higher is more urgent) to a front queue.

    Level 0 is the most urgent. Priority 0 (Scrapy's default) maps to
    ``default_level``; each step of priority moves one level, clamped to the
    available levels. With the default 4 levels and ``default_level=1``:
    priority >= 1 -> level 0, 0 -> 1, -1 -> 2, <= -2 -> 3.
    """

    levels: int
    default_level: int = 1

    def level(self, priority: int) -> int:
        level = self.default_level - priority
        if level < 0:
            return 0
        if level >= self.levels:
            return self.levels - 1
        return level
