"""A crawl's shared totals and timeline in Redis, written by every worker, read by the report.

Keys (one hash slot: the crawl's own tag ``{<crawl id>}``):

* ``frontier:{<crawl>}:totals`` HASH: counters summed over every worker and
  run (see :func:`crawler.ops.figures.totals_from_stats`); each worker adds
  what changed since its last report (``HINCRBYFLOAT``).
* ``frontier:{<crawl>}:timeline`` LIST: one sample per worker per progress
  interval, msgpack ``[1, time, worker, pages, errors, duplicates, queued,
  in flight, active hosts, ready hosts]`` (pages, errors and duplicates: what
  the worker did in the interval; the rest: the shared frontier then), the
  newest ``TIMELINE_MAX`` kept.
* ``frontier:{<crawl>}:workers`` ZSET: worker -> last report time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack

from crawler.crawlstate.keys import ShardKeys
from crawler.redisconn.resp import text

if TYPE_CHECKING:
    from crawler.redisconn.link import AnyRedis

TIMELINE_MAX = 100_000
SAMPLE_VERSION = 1


@dataclass(frozen=True)
class Sample:
    time: float
    worker: str
    pages: int
    errors: int
    duplicates: int
    queued: int
    leased: int
    active_hosts: int
    ready_hosts: int

    def encode(self) -> bytes:
        packed: bytes = msgpack.packb(
            [SAMPLE_VERSION, round(self.time, 3), self.worker, self.pages, self.errors, self.duplicates,
             self.queued, self.leased, self.active_hosts, self.ready_hosts]
        )
        return packed

    @classmethod
    def decode(cls, blob: bytes) -> Sample | None:
        """A sample, or None for one this version cannot read."""
        try:
            fields = msgpack.unpackb(blob)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
            return None
        if not isinstance(fields, list) or len(fields) < 10 or fields[0] != SAMPLE_VERSION:
            return None
        try:
            return cls(float(fields[1]), str(fields[2]), *(int(x) for x in fields[3:10]))
        except (TypeError, ValueError):
            return None


class Timeline:
    def __init__(self, client: AnyRedis, crawl_id: str, max_samples: int = TIMELINE_MAX) -> None:
        self.client = client
        keys = ShardKeys(crawl_id)
        self.totals_key = keys.crawl_key("totals")
        self.timeline_key = keys.crawl_key("timeline")
        self.workers_key = keys.crawl_key("workers")
        self.max_samples = max_samples

    async def report(self, changed: Mapping[str, float], sample: Sample | None) -> None:
        """Add a worker's counter changes and its sample, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        for name, value in changed.items():
            if isinstance(value, int) or float(value).is_integer():
                pipe.hincrby(self.totals_key, name, int(value))
            else:
                pipe.hincrbyfloat(self.totals_key, name, float(value))
        if sample is not None:
            pipe.rpush(self.timeline_key, sample.encode())
            pipe.ltrim(self.timeline_key, -self.max_samples, -1)
            pipe.zadd(self.workers_key, {sample.worker: sample.time})
        await pipe.execute()

    async def totals(self) -> dict[str, float]:
        raw: dict[Any, Any] = await self.client.hgetall(self.totals_key)
        return {text(key): float(value) for key, value in raw.items()}

    async def samples(self) -> list[Sample]:
        blobs: list[Any] = await self.client.lrange(self.timeline_key, 0, -1)
        return [sample for blob in blobs if (sample := Sample.decode(bytes(blob))) is not None]

    async def workers(self, since: float) -> list[tuple[str, float]]:
        """Workers that reported at or after ``since`` (epoch s), with their last report time."""
        rows: list[Any] = await self.client.zrangebyscore(self.workers_key, since, "+inf", withscores=True)
        return [(text(worker), float(at)) for worker, at in rows]
