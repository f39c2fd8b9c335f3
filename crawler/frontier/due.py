"""The recrawl schedule: fetched URLs waiting in Redis for their next visit.

Each shard keeps its URLs by due time (crawl-clock seconds,
:mod:`crawler.policy.clock`) in small sorted sets split at time boundaries,
with an index of their lowest times (``crawlstate/lua/due.lua``): a URL key and a
time, about 15 bytes per URL; the request to send is built from the URL's
record when it is due (the record holds the URL, its depth and callback, the
revisit's level and the capture its validators come from). A URL is in the
schedule at most once: its record's ``next_visit`` says where.

* :class:`DueSchedule` (item pipelines) puts URLs in (``lua/schedule.lua``),
  setting the record's next visit, level and capture time.
* The scheduler's step drains what is due (``lua/drain.lua``): the start of
  the first bucket, moved into the front or back queues as ``@<URL key>``
  entries, by whichever worker has free slots; no scan of all URLs.
* A sitemap ``lastmod`` newer than a URL's last fetch makes it due at once
  (``lua/touch.lua``, from the scheduler's step).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NamedTuple

from crawler.crawlstate.compact import BucketSizes
from crawler.redisconn.batch import BatchedScripts

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis


class Revisit(NamedTuple):
    """One URL to schedule (``lua/schedule.lua``)."""

    #: The URL key (:func:`crawler.urls.url_key`).
    key: int
    #: Due time, crawl-clock seconds.
    due: int
    level: int
    host: str
    #: Epoch microseconds of the capture holding the payload (the revisit's validators' date).
    captured: int


class DueSchedule:
    def __init__(self, client: AnyRedis, router: ShardRouter, sizes: BucketSizes | None = None) -> None:
        self.router = router
        self.sizes = sizes or BucketSizes()
        self.scripts = BatchedScripts(client)

    async def open(self) -> None:
        await self.scripts.load()

    async def schedule(self, revisits: list[Revisit]) -> int:
        """Put revisits in their shards' schedules; returns how many were scheduled (URLs with a record)."""
        by_shard: dict[int, list[object]] = {}
        for revisit in revisits:
            shard = self.router.shard_of(revisit.host)
            args = by_shard.get(shard)
            if args is None:
                args = by_shard[shard] = [self.router.keys[shard].prefix, self.sizes.due, self.sizes.records]
            args += (revisit.key, revisit.due, revisit.level, revisit.captured)
        calls = [self.scripts.call("schedule", [self.router.keys[shard].due], args) for shard, args in by_shard.items()]
        return sum(int(reply) for reply in await asyncio.gather(*calls))

    async def close(self) -> None:
        await self.scripts.close()


__all__ = ["DueSchedule", "Revisit"]
