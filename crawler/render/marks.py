"""Which hosts are rendered: marks shared by every worker in Redis, with a bounded local cache.

One hash per crawl (the crawl key ``render``), field = a host or a domain:

* ``on`` / ``off``: an operator's decision (``scrapy frontier render``, or the
  ``RENDER_HOSTS`` / ``RENDER_NEVER_HOSTS`` settings, which a worker writes
  when it opens), for that host or, given a domain, for every host under it;
  it never expires;
* ``js:<until ms>`` / ``static:<until ms>``: what sampled pages of the host
  showed (:mod:`crawler.render.detect`), until then; an expired mark is
  sampled again.

A lookup reads the host and its parent domains in one ``HMGET``: the most
specific operator's mark wins, then the host's detected mark. Lookups and
detected marks go through the crawler's shared batcher (one write for the
hosts met together).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.redisconn.batch import BatchedScripts
    from crawler.redisconn.link import AnyRedis


class Mark(Enum):
    ON = "on"  # an operator's: always render
    OFF = "off"  # an operator's: never render
    JS = "js"  # detected: its pages need JavaScript
    STATIC = "static"  # detected: its pages do not

    @property
    def forced(self) -> bool:
        return self in (Mark.ON, Mark.OFF)

    @property
    def renders(self) -> bool:
        return self in (Mark.ON, Mark.JS)


@dataclass(frozen=True, slots=True)
class HostMark:
    mark: Mark
    #: Epoch seconds a detected mark stands until (0 for an operator's).
    until: float = 0.0

    def encode(self) -> str:
        return self.mark.value if self.mark.forced else f"{self.mark.value}:{int(self.until * 1000)}"

    @classmethod
    def decode(cls, raw: bytes | str | None) -> HostMark | None:
        """A stored mark, or None for an absent or unreadable one."""
        if raw is None:
            return None
        text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
        name, _, until = text.partition(":")
        try:
            mark = Mark(name)
        except ValueError:
            return None
        if mark.forced:
            return cls(mark)
        try:
            return cls(mark, int(until) / 1000)
        except ValueError:
            return None

    def stands(self, now: float) -> bool:
        return self.mark.forced or self.until > now


def lookup_names(host: str) -> list[str]:
    """The host, then each parent domain with at least two labels (``a.b.example.org`` -> 3 names)."""
    host = host.lower().rstrip(".")
    if not host or host[0] == "[" or host.replace(".", "").isdigit():
        return [host]  # an address has no parent domains
    labels = host.split(".")
    return [".".join(labels[i:]) for i in range(max(1, len(labels) - 1))]


def decide(host: str, stored: list[HostMark | None], now: float) -> HostMark | None:
    """The mark in force for ``host`` from the marks stored under :func:`lookup_names`' names, in order."""
    for mark in stored:
        if mark is not None and mark.mark.forced:
            return mark
    own = stored[0] if stored else None
    return own if own is not None and own.stands(now) else None


#: The library function (crawler/render/lua/place.lua) that places a mark unless an operator's holds the host.
_PLACE_SCRIPT = "place"

#: The stored values of an operator's marks (the script leaves them alone).
_FORCED_VALUES = tuple(mark.value for mark in Mark if mark.forced)


class RenderMarks:
    """The crawl's render marks, read through a bounded cache of ``cache_seconds``."""

    def __init__(self, batch: BatchedScripts, key: str, cache_size: int = 100_000, cache_seconds: float = 60.0) -> None:
        self.batch = batch
        self.key = key
        self.cache_size = cache_size
        self.cache_seconds = cache_seconds
        self._cache: OrderedDict[str, tuple[float, HostMark | None]] = OrderedDict()

    def cached(self, host: str, now: float) -> tuple[bool, HostMark | None]:
        """(whether the cache answers for ``host``, the mark in force if it does): no I/O."""
        entry = self._cache.get(host)
        if entry is None or entry[0] <= now:
            return False, None
        mark = entry[1]
        return True, (mark if mark is None or mark.stands(now) else None)

    async def get(self, host: str) -> HostMark | None:
        now = time.time()
        known, mark = self.cached(host, now)
        if known:
            return mark
        names = lookup_names(host)
        raw = await self.batch.command(b"HMGET", self.key, *names)
        mark = decide(host, [HostMark.decode(value) for value in raw], now)
        self._remember(host, mark, now)
        return mark

    def _remember(self, host: str, mark: HostMark | None, now: float) -> None:
        self._cache[host] = (now + self.cache_seconds, mark)
        self._cache.move_to_end(host)
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    async def detected(self, host: str, mark: Mark, seconds: float) -> HostMark:
        """Record what sampling found for ``host``, for ``seconds``; an operator's mark is left alone
        (checked and written in one script: one round trip, and no operator's mark set meanwhile lost)."""
        now = time.time()
        value = HostMark(mark, now + seconds)
        stored = await self.batch.call(_PLACE_SCRIPT, [self.key], [host, value.encode(), *_FORCED_VALUES])
        placed = HostMark.decode(stored) or value
        self._remember(host, placed, now)
        return placed


async def force(client: AnyRedis, key: str, name: str, mark: Mark | None) -> None:
    """An operator's mark for a host or a domain: ``Mark.ON``, ``Mark.OFF``, or None to return it to detection."""
    name = name.lower().rstrip(".")
    if mark is None:
        await client.hdel(key, name)
    else:
        if not mark.forced:
            raise ValueError(f"{mark} is not an operator's mark")
        await client.hset(key, name, HostMark(mark).encode())


async def listing(client: AnyRedis, key: str) -> dict[str, HostMark]:
    """Every mark of the crawl (``scrapy frontier render --list``)."""
    raw = await client.hgetall(key)
    out = {}
    for field, value in raw.items():
        mark = HostMark.decode(value)
        if mark is not None:
            out[field.decode() if isinstance(field, bytes) else str(field)] = mark
    return dict(sorted(out.items()))
