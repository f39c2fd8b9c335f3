"""What Redis memory still admits: new URLs by priority, new hosts, new work (pure, no I/O).

A crawl's Redis holds the URLs it admitted (queued) and a record of every page
fetched; each queued URL will take about ``page_bytes`` more once fetched (its
URL record, duplicate index and schedule entries). So the policy looks at the
*committed* share of the limit, ``(used + queued x page_bytes) / limit``, and
admits less as it grows, lowest priority first, so that what was admitted
can always be fetched and recorded:

===================  ====================================================
committed share      admitted
===================  ====================================================
below 80%            every new URL
80% to 90%           the priority levels shrink from all to the highest one
90% to 95%           the highest level only, of hosts already known
95% and above        no new URL (fetching and recrawling go on)
===================  ====================================================

And if memory itself reaches 97% of the limit (an estimate was wrong), no
new fetch is handed out until it is below again: Redis refusing a script
would be worse. Every refused URL is counted (``frontier/refused/memory``);
the crawl says once in its log, and in its progress line, why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from crawler import defaults

ADMIT_ALL_BELOW = 0.80
KNOWN_HOSTS_ABOVE = 0.90
ADMIT_NONE_ABOVE = 0.95
PAUSE_ABOVE = 0.97


@dataclass(frozen=True)
class Admission:
    #: The lowest-priority level admitted (levels are 0 = highest); -1 admits no new URL.
    level: int
    #: URLs of hosts never enqueued before are admitted.
    new_hosts: bool
    #: New fetches are handed out (the claim runs).
    fetch: bool = True
    #: Why it admits less than everything ("" when it admits everything).
    reason: str = ""


#: Everything admitted (no limit, or far from it).
ADMIT_ALL = Admission(level=255, new_hosts=True)


@dataclass(frozen=True)
class MemoryPolicy:
    #: The memory limit (bytes); 0: none.
    limit: int
    #: Priority levels of the frontier.
    levels: int
    #: Bytes a queued URL will take once fetched (docs/sizing.md).
    page_bytes: int = defaults.FRONTIER_PAGE_BYTES

    def admission(self, used: int, queued: int) -> Admission:
        """What to admit with ``used`` bytes in Redis and ``queued`` URLs waiting."""
        if self.limit <= 0:
            return ADMIT_ALL
        fill = used / self.limit
        committed = (used + queued * self.page_bytes) / self.limit
        if fill >= PAUSE_ABOVE:
            return Admission(-1, False, fetch=False, reason=f"Redis memory at {fill:.0%} of the limit: "
                             "no new fetch until it is below 97%")
        if committed >= ADMIT_NONE_ABOVE:
            return Admission(-1, False, reason=f"Redis memory committed at {committed:.0%} of the limit: "
                             "no new URL admitted")
        if committed >= KNOWN_HOSTS_ABOVE:
            return Admission(0, False, reason=f"Redis memory committed at {committed:.0%} of the limit: only "
                             "the highest priority, of known hosts")
        if committed >= ADMIT_ALL_BELOW:
            share = (committed - ADMIT_ALL_BELOW) / (KNOWN_HOSTS_ABOVE - ADMIT_ALL_BELOW)
            level = max(0, self.levels - 1 - math.floor(share * self.levels))
            return Admission(level, True, reason=f"Redis memory committed at {committed:.0%} of the limit: "
                             f"priority levels 0-{level} of {self.levels} admitted")
        return ADMIT_ALL



def parse_size(value: object, setting: str) -> int:
    """Bytes from an int or a string with a unit (``"512mb"``, ``"24 GiB"``, ``"1.5g"``)."""
    from crawler.exceptions import ConfigurationError

    if isinstance(value, bool):
        raise ConfigurationError(setting, f"a size in bytes (or with a unit: 512mb, 8gb), got {value!r}")
    if isinstance(value, (int, float)):
        size = int(value)
    else:
        text = str(value).strip().lower().replace(" ", "").removesuffix("b").removesuffix("i")
        units = {"k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}
        factor = 1
        if text and text[-1] in units:
            factor = units[text[-1]]
            text = text[:-1]
        try:
            size = int(float(text) * factor)
        except ValueError:
            raise ConfigurationError(setting, f"a size in bytes (or with a unit: 512mb, 8gb), got {value!r}") from None
    if size < 0:
        raise ConfigurationError(setting, f"must not be negative, got {value!r}")
    return size
