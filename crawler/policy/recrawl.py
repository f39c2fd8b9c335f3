"""When to fetch a page again: change-rate estimation and the revisit interval (pure).

**What counts as a change** (the URL metadata store decides, per fetch): the
payload digest differs from the previous fetch *and* the SimHash distance is
above ``METADATA_CHANGE_DISTANCE`` (3), so a rotating timestamp or banner
alone is not a change. A ``304 Not Modified`` and a ``200`` with the same
digest are "unchanged". Failed fetches are not observations.

**Estimator** (Cho & Garcia-Molina, "Estimating frequency of change", 2003):
for ``n`` observations at intervals ``I`` of which ``X`` saw a change, the
naive rate ``X / (n I)`` underestimates (several changes between two visits
look like one; a change every visit saturates). The bias-reduced estimator
for a Poisson process is

    r = -ln((n - X + 0.5) / (n + 0.5)) / I

with ``I`` the mean interval between observations (the observed span divided
by ``n - 1``). With ``X = 0`` it is 0.

**Interval**: the page is revisited after ``RECRAWL_CHANGE_FRACTION`` (0.5) of
its expected time between changes (``1 / r``), so a change is seen, on
average, soon after it happens; divided by ``1 + RECRAWL_IMPORTANCE_BOOST x
importance`` (importance in [0, 1]) so important pages come back sooner;
clamped to ``[RECRAWL_MIN_INTERVAL, RECRAWL_MAX_INTERVAL]``. A page never
seen to change (``X = 0``) drifts towards the maximum: its interval doubles
at every unchanged visit, from ``RECRAWL_INITIAL_INTERVAL``. A sitemap
``lastmod`` later than the last fetch makes the URL due at once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import Enum

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.policy.priority import PriorityPolicy, PrioritySignals
from crawler.settings_parsing import get_choice, get_float, parse_choice


class RecrawlMode(Enum):
    """``batch``: the crawl ends when nothing is queued or due now; ``continuous``: it never ends by itself."""

    BATCH = "batch"
    CONTINUOUS = "continuous"

    @classmethod
    def parse(cls, value: object, name: str) -> RecrawlMode:
        return parse_choice(cls, value, name)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RecrawlMode:
        return get_choice(settings, "RECRAWL_MODE", cls)


@dataclass(frozen=True)
class ChangeHistory:
    """What the metadata store knows of a URL."""

    observations: int  # fetches with content
    changes: int  # of which saw a change
    first_fetch: float  # crawl-clock seconds
    last_fetch: float

    @property
    def mean_interval(self) -> float | None:
        if self.observations < 2 or self.last_fetch <= self.first_fetch:
            return None
        return (self.last_fetch - self.first_fetch) / (self.observations - 1)


def estimate_change_rate(history: ChangeHistory) -> float | None:
    """Changes per second (Cho & Garcia-Molina), or None without two observations."""
    interval = history.mean_interval
    if interval is None:
        return None
    # Each observation after the first compares two fetches: n - 1 intervals.
    n = history.observations - 1
    x = min(history.changes, n)
    return -math.log((n - x + 0.5) / (n + 0.5)) / interval


@dataclass(frozen=True)
class RecrawlPolicy:
    min_interval: float = 3600.0
    max_interval: float = 30 * 86400.0
    initial_interval: float = 86400.0
    change_fraction: float = 0.5
    importance_boost: float = 1.0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RecrawlPolicy:
        policy = cls(
            min_interval=get_float(settings, "RECRAWL_MIN_INTERVAL", minimum=0.0),
            max_interval=get_float(settings, "RECRAWL_MAX_INTERVAL", minimum=0.0),
            initial_interval=get_float(settings, "RECRAWL_INITIAL_INTERVAL", minimum=0.0),
            change_fraction=get_float(settings, "RECRAWL_CHANGE_FRACTION", minimum=0.01),
            importance_boost=get_float(settings, "RECRAWL_IMPORTANCE_BOOST", minimum=0.0),
        )
        if policy.max_interval < policy.min_interval:
            raise ConfigurationError("RECRAWL_MAX_INTERVAL", "must not be below RECRAWL_MIN_INTERVAL")
        return policy

    def clamp(self, seconds: float) -> float:
        return min(self.max_interval, max(self.min_interval, seconds))

    def next_interval(self, history: ChangeHistory, previous_interval: float | None, importance: float = 0.0) -> float:
        """Seconds from this fetch to the next one."""
        boost = 1.0 + self.importance_boost * min(max(importance, 0.0), 1.0)
        rate = estimate_change_rate(history)
        if rate is None or history.changes == 0:
            base = previous_interval * 2 if previous_interval else self.initial_interval
            return self.clamp(base / boost)
        return self.clamp(self.change_fraction / rate / boost)


@dataclass(frozen=True, slots=True)
class RevisitPlan:
    """The next visit of a fetched URL: when (crawl clock) and at which Scrapy priority."""

    due: float
    priority: int


def plan_revisit(
    recrawl: RecrawlPolicy,
    priority: PriorityPolicy,
    history: ChangeHistory,
    previous_fetch: float | None,
    signals: PrioritySignals,
) -> RevisitPlan:
    """The next visit of a URL fetched at ``history.last_fetch`` (the recrawl pipeline's decision).

    The change rate estimated from ``history`` becomes the ``changes_per_day``
    signal (faster-changing pages rank higher and, through their importance,
    come back sooner); ``previous_fetch`` (crawl clock; None for a first fetch)
    gives the last interval, which an unchanged page doubles.
    """
    now = history.last_fetch
    rate = estimate_change_rate(history)
    signals = replace(signals, changes_per_day=None if rate is None else rate * 86400.0)
    previous = now - previous_fetch if previous_fetch else None
    interval = recrawl.next_interval(history, previous, priority.importance(signals))
    return RevisitPlan(now + interval, priority.priority(signals))


def revisit_terms(recrawl: RecrawlPolicy, priority: PriorityPolicy, levels: int, default_level: int) -> str:
    """The numbers :func:`plan_revisit` decides with, as the text ``lua/revisit.lua`` reads: the URL
    metadata store plans a URL's next visit in the call that records its fetch, from the history that
    call computes (one write of the record). ``levels`` and ``default_level`` map the priority to a front
    queue (:class:`crawler.frontier.levels.PriorityLevels`). Each float is written exactly (``repr``)."""
    w = priority.weights
    numbers: tuple[float | int, ...] = (
        recrawl.min_interval, recrawl.max_interval, recrawl.initial_interval, recrawl.change_fraction,
        recrawl.importance_boost, w["inlinks"], w["depth"], w["host_importance"], w["host_error_rate"],
        w["host_near_dup_rate"], w["change_rate"], priority.minimum, priority.maximum, priority.min_host_pages,
        default_level, levels,
    )
    return " ".join(repr(float(n)) if isinstance(n, float) else str(n) for n in numbers)


def lastmod_epoch(lastmod: str | None) -> float | None:
    """A sitemap ``lastmod`` (W3C datetime: a date, or a date and time) as epoch seconds; None if unreadable."""
    if not lastmod:
        return None
    text = lastmod.strip().replace("Z", "+00:00")
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def sitemap_says_changed(lastmod: str | None, last_fetch: float | None) -> bool:
    """True if a sitemap ``lastmod`` is later than the last fetch."""
    when = lastmod_epoch(lastmod)
    return when is not None and last_fetch is not None and when > last_fetch
