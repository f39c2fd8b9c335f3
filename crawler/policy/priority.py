"""Which front queue a URL goes to: a weighted score of documented signals (pure).

Signals of a URL (:class:`PrioritySignals`) and their default weights
(``PRIORITY_WEIGHTS``, a dict; every weight is a setting):

=======================  ==========================================  =======
signal                   value                                       weight
=======================  ==========================================  =======
``inlinks``              log2(1 + in-links seen so far)               0.5
``depth``                links from the seed                          -0.25
``in_sitemap``           1 if a sitemap lists the URL                 1.0
``sitemap_fresh``        1 if its sitemap lastmod is recent (within   1.0
                         ``PRIORITY_SITEMAP_FRESH_DAYS``, 7)
``host_importance``      0..1, from ``PRIORITY_HOST_IMPORTANCE``      2.0
                         (a dict) or ``PRIORITY_HOST_IMPORTANCE_FILE``
                         (``host score`` lines)
``host_error_rate``      0..1, errors / fetches of the host          -2.0
``host_near_dup_rate``   0..1, near duplicates / pages of the host   -2.0
``change_rate``          revisits: log2(1 + changes per day)          0.5
=======================  ==========================================  =======

The score is rounded to a Scrapy priority (higher first), clamped to
``[PRIORITY_MIN, PRIORITY_MAX]`` (-2, 1), which the frontier maps to its front
queues (priority 1 -> the top queue, 0 -> the second, -1, -2 -> the lower
ones). A host with a high error or near-duplicate rate sinks to the bottom
queues: the feedback from the dedup index to the frontier that closes the
trap loop. Rates count only once a host has ``PRIORITY_MIN_HOST_PAGES`` (20)
fetches, so one early failure does not condemn a host.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_dict, get_float, get_int

DEFAULT_WEIGHTS = {
    "inlinks": 0.5,
    "depth": -0.25,
    "in_sitemap": 1.0,
    "sitemap_fresh": 1.0,
    "host_importance": 2.0,
    "host_error_rate": -2.0,
    "host_near_dup_rate": -2.0,
    "change_rate": 0.5,
}


@dataclass(frozen=True)
class HostQuality:
    """A host's record so far: fetches that ended (pages), errors among them
    (HTTP status >= 400, or given up after retries), near duplicates."""

    pages: int = 0
    errors: int = 0
    near_duplicates: int = 0

    def error_rate(self, minimum: int) -> float:
        return self.errors / self.pages if self.pages >= minimum else 0.0

    def near_dup_rate(self, minimum: int) -> float:
        return self.near_duplicates / self.pages if self.pages >= minimum else 0.0


@dataclass(frozen=True)
class PrioritySignals:
    depth: int = 0
    inlinks: int = 0
    in_sitemap: bool = False
    sitemap_fresh: bool = False
    host_importance: float = 0.0
    host: HostQuality = field(default_factory=HostQuality)
    #: Revisits: estimated changes per day, else None.
    changes_per_day: float | None = None


@dataclass(frozen=True)
class PriorityPolicy:
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    minimum: int = -2
    maximum: int = 1
    min_host_pages: int = 20
    host_importance: dict[str, float] = field(default_factory=dict)
    sitemap_fresh_seconds: float = 7 * 86400.0

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> PriorityPolicy:
        weights = dict(DEFAULT_WEIGHTS)
        for name, value in get_dict(settings, "PRIORITY_WEIGHTS").items():
            if name not in DEFAULT_WEIGHTS:
                known = ", ".join(sorted(DEFAULT_WEIGHTS))
                raise ConfigurationError("PRIORITY_WEIGHTS", f"unknown signal {name!r} (known: {known})")
            try:
                weights[name] = float(value)
            except (TypeError, ValueError):
                raise ConfigurationError("PRIORITY_WEIGHTS", f"{name}: expected a number, got {value!r}") from None
        importance = {str(h).lower(): float(v) for h, v in get_dict(settings, "PRIORITY_HOST_IMPORTANCE").items()}
        path = settings.get("PRIORITY_HOST_IMPORTANCE_FILE")
        if path:
            try:
                for line in Path(path).read_text(encoding="utf-8").splitlines():
                    parts = line.split("#", 1)[0].split()
                    if len(parts) == 2:
                        importance[parts[0].lower()] = float(parts[1])
            except (OSError, ValueError) as exc:
                raise ConfigurationError("PRIORITY_HOST_IMPORTANCE_FILE", f"cannot read {path!r}: {exc}") from None
        minimum, maximum = get_int(settings, "PRIORITY_MIN"), get_int(settings, "PRIORITY_MAX")
        if maximum < minimum:
            raise ConfigurationError("PRIORITY_MAX", f"must not be below PRIORITY_MIN ({minimum}), got {maximum}")
        return cls(
            weights=weights,
            minimum=minimum,
            maximum=maximum,
            min_host_pages=get_int(settings, "PRIORITY_MIN_HOST_PAGES", minimum=1),
            host_importance=importance,
            sitemap_fresh_seconds=get_float(settings, "PRIORITY_SITEMAP_FRESH_DAYS", minimum=0.0) * 86400.0,
        )

    def is_fresh(self, lastmod: float | None, now: float) -> bool:
        """Whether a sitemap lastmod (epoch seconds) counts as recent at ``now``."""
        return lastmod is not None and now - lastmod <= self.sitemap_fresh_seconds

    def importance_of(self, host: str) -> float:
        return min(max(self.host_importance.get(host, 0.0), 0.0), 1.0)

    def score(self, signals: PrioritySignals) -> float:
        w = self.weights
        score = (
            w["inlinks"] * math.log2(1 + max(signals.inlinks, 0))
            + w["depth"] * signals.depth
            + w["in_sitemap"] * signals.in_sitemap
            + w["sitemap_fresh"] * signals.sitemap_fresh
            + w["host_importance"] * signals.host_importance
            + w["host_error_rate"] * signals.host.error_rate(self.min_host_pages)
            + w["host_near_dup_rate"] * signals.host.near_dup_rate(self.min_host_pages)
        )
        if signals.changes_per_day is not None:
            score += w["change_rate"] * math.log2(1 + max(signals.changes_per_day, 0.0))
        return score

    def importance(self, signals: PrioritySignals) -> float:
        """0..1: how far above an ordinary page (score 0) the URL stands, 1 at ``maximum``."""
        if self.maximum <= 0:
            return 0.0
        return min(max(self.score(signals) / self.maximum, 0.0), 1.0)

    def priority(self, signals: PrioritySignals) -> int:
        """The Scrapy priority of a URL (higher is more urgent)."""
        return min(self.maximum, max(self.minimum, round(self.score(signals))))
