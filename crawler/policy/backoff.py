"""Backoff, retries and Retry-After: pure policy, no I/O.

Three separate mechanisms, each exponential and capped:

* **Throttling** (429 and 503): the *host* backs off. Each consecutive
  throttled answer raises the host's level by one; the host rests
  ``min(BACKOFF_MAX_DELAY, BACKOFF_BASE_DELAY x 2^(level-1))`` and at least
  what ``Retry-After`` asks (also capped by ``BACKOFF_MAX_DELAY``). Each
  successful fetch lowers the level by one, so the delay decays back.
* **Parking** (connection refused/reset, DNS failure, timeouts...): after
  ``HOST_PARK_AFTER`` consecutive failures the *host* rests
  ``min(HOST_PARK_MAX_DELAY, HOST_PARK_BASE_DELAY x 2^(failures - HOST_PARK_AFTER))``
  instead of failing URL by URL; one success resets it.
* **Retries** (any transient failure, 5xx): the *URL* goes back to the
  frontier and is tried again after ``min(RETRY_MAX_DELAY, RETRY_BASE_DELAY x
  2^(attempt-1))``, at most ``RETRY_TIMES`` times (throttled answers at
  most ``RETRY_MAX_THROTTLED`` times); then it goes to the dead-letter queue.

The host-level state lives in the shared frontier (every worker sees it); the
frontier's ack script applies the host formulas with these parameters, and
the contract tests check that it agrees with :meth:`BackoffPolicy.throttle_delay`
and :meth:`BackoffPolicy.park_delay`.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.utils import parsedate_to_datetime

from scrapy.settings import BaseSettings

from crawler.settings_parsing import get_float, get_int


@dataclass(frozen=True)
class BackoffPolicy:
    throttle_base: float = 5.0
    throttle_max: float = 3600.0
    park_after: int = 5
    park_base: float = 60.0
    park_max: float = 6 * 3600.0
    retry_base: float = 30.0
    retry_max: float = 3600.0
    max_retries: int = 3
    max_throttled: int = 10

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> BackoffPolicy:
        return cls(
            throttle_base=get_float(settings, "BACKOFF_BASE_DELAY", minimum=0.0),
            throttle_max=get_float(settings, "BACKOFF_MAX_DELAY", minimum=0.0),
            park_after=get_int(settings, "HOST_PARK_AFTER", minimum=1),
            park_base=get_float(settings, "HOST_PARK_BASE_DELAY", minimum=0.0),
            park_max=get_float(settings, "HOST_PARK_MAX_DELAY", minimum=0.0),
            retry_base=get_float(settings, "RETRY_BASE_DELAY", minimum=0.0),
            retry_max=get_float(settings, "RETRY_MAX_DELAY", minimum=0.0),
            max_retries=get_int(settings, "RETRY_TIMES", minimum=0),
            max_throttled=get_int(settings, "RETRY_MAX_THROTTLED", minimum=0),
        )

    def throttle_delay(self, level: int) -> float:
        """Seconds a host rests at throttle ``level`` (>= 1)."""
        return capped_exponential(self.throttle_base, self.throttle_max, level - 1)

    def park_delay(self, consecutive_failures: int) -> float:
        """Seconds a host rests after ``consecutive_failures``; 0 below the threshold."""
        if consecutive_failures < self.park_after:
            return 0.0
        return capped_exponential(self.park_base, self.park_max, consecutive_failures - self.park_after)

    def retry_delay(self, attempt: int) -> float:
        """Seconds before retry number ``attempt`` (>= 1) of one URL."""
        return capped_exponential(self.retry_base, self.retry_max, attempt - 1)

    def capped_retry_after(self, seconds: float) -> float:
        return min(max(seconds, 0.0), self.throttle_max)


def capped_exponential(base: float, cap: float, step: int) -> float:
    """``base`` doubled ``step`` times (``step`` < 0 counts as 0), at most ``cap``: every backoff's delay."""
    step = max(step, 0)
    if step >= 64 and base > 0:  # 2 ** 64 x any base is past any cap
        return float(cap)
    return float(min(cap, base * 2 ** step))


def parse_retry_after(value: str | bytes | None, now: float) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (delta-seconds or HTTP-date).

    ``None`` for a missing or unparseable value; never negative (a date in the
    past means "now").
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if not text:
        return None
    if text.isdigit():
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - now, 0.0)
