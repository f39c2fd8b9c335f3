"""The shared duplicate index in Redis (``lua/dedup.lua``): exact digests and SimHash blocks.

Keys live under ``dedup:{<crawl id>}:``, outside the host-sharded frontier
(a duplicate can come from any host): ``digest`` (payload digest -> first
capture), ``sh2:<block>:<value>`` (SimHash block sets, per SimHash version), ``shurl2`` (SimHash ->
URL), and per-host counters ``pages``, ``exact``, ``near``. Memory is about
150 bytes per distinct payload and 350 per indexed SimHash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from crawler.redisconn.batch import BatchedScripts
from crawler.schema import DEDUP_KEYS, script_source

if TYPE_CHECKING:
    from crawler.redisconn.link import AnyRedis


@dataclass(frozen=True)
class DedupVerdict:
    #: The first capture of this exact payload: (URL, WARC date), or None.
    duplicate_of: tuple[str, str] | None
    #: The URL of an indexed page within the SimHash distance, or None.
    near_duplicate_of: str | None
    distance: int | None


def dedup_prefix(crawl_id: str) -> str:
    return f"dedup:{{{crawl_id}}}:"


class DedupIndex:
    def __init__(self, client: AnyRedis, crawl_id: str, max_distance: int) -> None:
        source = script_source("crawler.dedup", "dedup", common=False)
        self.scripts = BatchedScripts(client, {"dedup": source})
        self.prefix = dedup_prefix(crawl_id)
        self.max_distance = max_distance

    async def open(self) -> None:
        await self.scripts.load()

    async def check(self, host: str, digest: str, url: str, date: str, simhash: int | None) -> DedupVerdict:
        reply = await self.scripts.call(
            "dedup",
            [self.prefix + DEDUP_KEYS["digest"].suffix],
            [self.prefix, host, digest, f"{url}\t{date}", "" if simhash is None else f"{simhash:016x}",
             self.max_distance],
        )
        first, near, distance = reply
        duplicate_of = None
        if first:
            first_url, _, first_date = first.decode("utf-8", "surrogateescape").partition("\t")
            duplicate_of = (first_url, first_date)
        near_url = near.decode("utf-8", "surrogateescape") if near else None
        return DedupVerdict(duplicate_of, near_url, int(distance) if int(distance) >= 0 else None)

    async def close(self) -> None:
        await self.scripts.close()
