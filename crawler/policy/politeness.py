"""Politeness: how long a host rests after a fetch, and what a clock is kept for (pure, no I/O).

The frontier's mechanism (its Lua scripts) applies what these decide; floors
that other components set per host (robots.txt Crawl-delay, Retry-After) are
applied by the mechanism on top, because they live in the shared frontier.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from scrapy.settings import BaseSettings

from crawler.settings_parsing import get_choice


class PolitenessKey(Enum):
    """``FRONTIER_POLITENESS_KEY``: what one request at a time, and one clock, is kept for.

    ``host`` (the default): each host name. ``domain``: all hosts of a
    registered domain share one clock (a site with thousands of subdomains
    gets one request at a time). ``ip``: all hosts that resolve to one address
    share one clock (shared hosting, a wildcard-DNS farm). Each host keeps its
    own queue, robots.txt and backoff; the group adds its clock and its one
    request in flight on top (see ``lua/common.lua``).
    """

    HOST = "host"
    DOMAIN = "domain"
    IP = "ip"

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> PolitenessKey:
        return get_choice(settings, "FRONTIER_POLITENESS_KEY", cls)

    @property
    def grouping(self) -> int:
        """The enqueue script's grouping code: 0 none, 1 by domain, 2 given per request."""
        return {PolitenessKey.HOST: 0, PolitenessKey.DOMAIN: 1, PolitenessKey.IP: 2}[self]


@dataclass(frozen=True)
class PolitenessPolicy:
    """How long a host rests after a fetch (Mercator, Heydon & Najork 1999).

    ``delay = max(min_delay, min(factor * duration, max_delay))``: a slow server
    gets proportionally more breathing room, never less than ``min_delay``.
    """

    min_delay: float
    factor: float
    max_delay: float

    def delay(self, fetch_duration: float) -> float:
        """Seconds the host must rest after a fetch that took ``fetch_duration``."""
        scaled = min(self.factor * max(fetch_duration, 0.0), self.max_delay)
        return max(self.min_delay, scaled)

    def next_allowed_ms(self, completed_at: float, fetch_duration: float) -> int:
        """The host's next allowed contact time, in integer milliseconds (rounded up)."""
        return -int(-(completed_at + self.delay(fetch_duration)) * 1000 // 1)
