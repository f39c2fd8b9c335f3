"""Politeness: how long a host rests after a fetch, and what a clock is kept for (pure, no I/O).

The frontier's mechanism (its Lua scripts) applies what these decide; floors
that other components set per host (robots.txt Crawl-delay, Retry-After) are
applied by the mechanism on top, because they live in the shared frontier.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import dict_value, get_choice


class PolitenessKey(Enum):
    """``FRONTIER_POLITENESS_KEY``: what one request at a time, and one clock, is kept for.

    ``host`` (the default): each host name. ``domain``: all hosts of a
    registered domain share one clock (a site with thousands of subdomains
    gets one request at a time). ``ip``: all hosts that resolve to one address
    share one clock (shared hosting, a wildcard-DNS farm). Each host keeps its
    own queue, robots.txt and backoff; the group adds its clock and its one
    request in flight on top (see ``frontier/lua/hosts.lua``).
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
class SlotOverride:
    """One entry of ``DOWNLOAD_SLOTS`` (Scrapy's per-slot settings), for one politeness key."""

    #: The key's minimum delay (seconds), in place of ``FRONTIER_MIN_DELAY``.
    delay: float | None = None
    #: Its requests in flight at most, in place of ``FRONTIER_CONCURRENCY_PER_KEY``.
    concurrency: int | None = None
    #: Its minimum delay drawn from 0.5x to 1.5x, in place of ``FRONTIER_RANDOMIZE_DELAY``.
    randomize: bool | None = None

    def as_scrapy(self) -> dict[str, Any]:
        """The entry as ``DOWNLOAD_SLOTS`` writes it (what the shared frontier keeps)."""
        out: dict[str, Any] = {}
        if self.delay is not None:
            out["delay"] = self.delay
        if self.concurrency is not None:
            out["concurrency"] = self.concurrency
        if self.randomize is not None:
            out["randomize_delay"] = self.randomize
        return out


_SLOT_FIELDS = {"delay", "concurrency", "randomize_delay"}


def parse_slot_overrides(value: object, name: str = "DOWNLOAD_SLOTS") -> dict[str, SlotOverride]:
    """``DOWNLOAD_SLOTS`` (``{"example.com": {"delay": 2, "concurrency": 1, "randomize_delay": False}}``)
    -> key -> :class:`SlotOverride`; a clear error naming ``name`` for any malformed entry."""
    slots = dict_value(value, name)
    if slots is None:
        return {}
    out: dict[str, SlotOverride] = {}
    for key, entry in slots.items():
        if not isinstance(key, str) or not key.strip() or any(c.isspace() for c in key):
            raise ConfigurationError(name, f"slot key {key!r} is not a host name (or domain, or address)")
        if not isinstance(entry, Mapping):
            raise ConfigurationError(name, f"{key!r}: expected a dict with delay, concurrency, randomize_delay; "
                                           f"got {entry!r}")
        unknown = set(entry) - _SLOT_FIELDS
        if unknown:
            raise ConfigurationError(name, f"{key!r}: unknown field(s) {sorted(map(str, unknown))} (known: delay, "
                                           "concurrency, randomize_delay)")
        delay = entry.get("delay")
        concurrency = entry.get("concurrency")
        randomize = entry.get("randomize_delay")
        if delay is not None and (isinstance(delay, bool) or not isinstance(delay, (int, float)) or delay < 0
                                  or delay != delay):
            raise ConfigurationError(name, f"{key!r}: delay must be a number of seconds >= 0, got {delay!r}")
        if concurrency is not None and (isinstance(concurrency, bool) or not isinstance(concurrency, int)
                                        or concurrency < 1):
            raise ConfigurationError(name, f"{key!r}: concurrency must be an integer >= 1, got {concurrency!r}")
        if randomize is not None and not isinstance(randomize, bool):
            raise ConfigurationError(name, f"{key!r}: randomize_delay must be True or False, got {randomize!r}")
        out[key.lower().rstrip(".")] = SlotOverride(None if delay is None else float(delay), concurrency, randomize)
    return out


@dataclass(frozen=True)
class PolitenessPolicy:
    """How long a host rests after a fetch (Mercator, Heydon & Najork 1999).

    ``delay = max(min_delay, min(factor * duration, max_delay))``: a slow server
    gets proportionally more breathing room, never less than ``min_delay``.
    With ``randomize`` (Scrapy's ``RANDOMIZE_DOWNLOAD_DELAY``) the minimum is
    drawn from 0.5x to 1.5x of ``min_delay`` each time, as Scrapy draws its
    download delay. ``overrides`` (``DOWNLOAD_SLOTS``) give a politeness key
    its own minimum delay and randomization.
    """

    min_delay: float
    factor: float
    max_delay: float
    randomize: bool = False
    overrides: Mapping[str, SlotOverride] = field(default_factory=dict)
    #: A number in [0, 1) for each randomized delay (a seeded one in tests).
    draw: Callable[[], float] = random.random

    def delay(self, fetch_duration: float, key: str | None = None) -> float:
        """Seconds the host (politeness key ``key``) must rest after a fetch that took ``fetch_duration``."""
        floor, randomize = self.min_delay, self.randomize
        if key is not None and self.overrides:
            override = self.overrides.get(key)
            if override is not None:
                floor = floor if override.delay is None else override.delay
                randomize = randomize if override.randomize is None else override.randomize
        if randomize:
            floor *= 0.5 + self.draw()
        scaled = min(self.factor * max(fetch_duration, 0.0), self.max_delay)
        return max(floor, scaled)

    def next_allowed_ms(self, completed_at: float, fetch_duration: float, key: str | None = None) -> int:
        """The host's next allowed contact time, in integer milliseconds (rounded up)."""
        return -int(-(completed_at + self.delay(fetch_duration, key)) * 1000 // 1)
