"""The recrawl schedule: fetched URLs waiting in Redis for their next visit.

Each shard has a due set (``due``: a sorted set of URLs by next-visit time in
the crawl clock, :mod:`crawler.policy.clock`) and, beside it, the request to
send when the URL is due (``due:req``: level, host and the encoded request,
conditional validators in its meta). A URL is in the due set at most once.

* :class:`DueSchedule` (item pipelines) puts URLs in (``lua/schedule.lua``),
  and records the next visit in the URL's metadata record.
* The scheduler's step drains what is due (``lua/drain.lua``): a range of the
  sorted set, moved into the front or back queues like an enqueue, by
  whichever worker has free slots; no scan of all URLs.
* A sitemap ``lastmod`` newer than a URL's last fetch makes it due at once
  (``lua/touch.lua``, from the scheduler's step).

A URL's member in the due set is the hex form of its URL metadata field (the
first 8 bytes of its fingerprint).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NamedTuple

from crawler.frontier.store import load_script_source
from crawler.redisconn.batch import BatchedScripts
from crawler.urls import url_fingerprint

if TYPE_CHECKING:
    from crawler.frontier.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis



def due_member(url: str) -> str:
    """A normalized URL's member in the due set."""
    return url_fingerprint(url)[:8].hex()


class Revisit(NamedTuple):
    """One URL to schedule (``lua/schedule.lua``)."""

    member: str
    due_ms: int
    level: int
    host: str
    blob: bytes
    #: The URL's field in the URL metadata store (its next_visit is set); b"" = none.
    metadata_field: bytes


class DueSchedule:
    def __init__(self, client: AnyRedis, router: ShardRouter) -> None:
        self.router = router
        self.scripts = BatchedScripts(client, {"schedule": load_script_source("schedule")})

    async def open(self) -> None:
        await self.scripts.load()

    async def schedule(self, revisits: list[Revisit]) -> int:
        """Put revisits in their shards' due sets; returns how many were new there."""
        by_shard: dict[int, list[object]] = {}
        for revisit in revisits:
            shard = self.router.shard_of(revisit.host)
            args = by_shard.get(shard)
            if args is None:
                args = by_shard[shard] = [self.router.keys[shard].prefix]
            args += revisit
        calls = [self.scripts.call("schedule", [self.router.keys[shard].due], args) for shard, args in by_shard.items()]
        return sum(int(reply) for reply in await asyncio.gather(*calls))

    async def close(self) -> None:
        await self.scripts.close()


__all__ = ["DueSchedule", "Revisit", "due_member"]
