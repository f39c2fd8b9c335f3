"""The robots.txt cache shared by every worker, with a bounded local cache in front.

One Redis key per origin (``robots:<scheme://host:port>`` in the host's frontier
shard) holds the encoded :class:`RobotsRecord`, with a TTL that outlives the
record's own expiry (so consecutive failures are still counted). Storing a
record also sets the host's politeness floor from ``Crawl-delay`` in the
frontier (``hostdelay``), records ``Sitemap:`` lines (``sitemaps:<host>``)
and tells the frontier until when the host's decision stands (``robots``,
see :attr:`~crawler.crawlstate.keys.ShardKeys.host_robots`): until then
the frontier hands out the host's pages, after it the host's robots.txt.

Its commands go through the crawler's shared batcher
(:meth:`~crawler.redisconn.provider.RedisProvider.batched`): the records of
the hosts opened together are read and written together.

The local cache keeps at most ``ROBOTS_LOCAL_CACHE_SIZE`` parsed records
(least recently used evicted first); an entry is valid until its record
expires (``ROBOTS_CACHE_TTL`` after the fetch, or the retry time of an
unreachable robots.txt).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from crawler.robots.policy import RobotsConfig, RobotsRecord, RobotsRules
from crawler.urls import UrlError, host_of

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.batch import BatchedScripts


def origin_host(origin: str) -> str:
    """The host of ``scheme://host[:port]``, as the frontier names it (its shard, its robots.txt decision)."""
    try:
        return host_of(origin + "/")
    except UrlError:
        return origin


class RobotsStore:
    def __init__(self, batch: BatchedScripts, router: ShardRouter, config: RobotsConfig) -> None:
        self.batch = batch
        self.router = router
        self.config = config
        self._local: OrderedDict[str, RobotsRules] = OrderedDict()

    def record_key(self, origin: str) -> str:
        return str(self.router.keys_for(origin_host(origin)).robots_record(origin))

    def sitemaps_key(self, host: str) -> str:
        return str(self.router.keys_for(host).sitemaps(host))

    def local(self, origin: str, now: float) -> RobotsRules | None:
        rules = self._local.get(origin)
        if rules is None:
            return None
        if rules.record.expired(now):
            del self._local[origin]
            return None
        self._local.move_to_end(origin)
        return rules

    def _remember(self, origin: str, record: RobotsRecord) -> RobotsRules:
        rules = RobotsRules(record, self.config.user_agent_token)
        self._local[origin] = rules
        self._local.move_to_end(origin)
        while len(self._local) > self.config.local_cache_size:
            self._local.popitem(last=False)
        return rules

    async def get(self, origin: str) -> RobotsRecord | None:
        """The shared record of an origin, expired or not (None if absent or unreadable)."""
        blob = await self.batch.command(b"GET", self.record_key(origin))
        if not isinstance(blob, bytes):
            return None
        return RobotsRecord.decode(blob)

    def use(self, origin: str, record: RobotsRecord) -> RobotsRules:
        """Parse a record from Redis into the local cache."""
        return self._remember(origin, record)

    async def put(self, origin: str, host: str, record: RobotsRecord, now: float) -> tuple[RobotsRules, bool]:
        """Share a new record, apply its Crawl-delay and Sitemaps; returns (rules, delay was capped)."""
        rules = self._remember(origin, record)
        keep_for = max(record.expires_at - now, 0.0) + self.config.cache_ttl
        keys = self.router.keys_for(host)
        batch = self.batch
        # (Queued in one go: one write, with whatever else is queued meanwhile.)
        sent = [
            batch.command(b"SET", self.record_key(origin), record.encode(), b"PX", int(keep_for * 1000)),
            batch.command(b"HSET", keys.host_robots, host, int(record.expires_at * 1000)),
        ]
        delay, capped = rules.crawl_delay(self.config.max_crawl_delay)
        if delay is not None:
            sent.append(batch.command(b"HSET", keys.host_delay, host, int(delay * 1000)))
        elif record.state is not record.state.UNREACHABLE:
            sent.append(batch.command(b"HDEL", keys.host_delay, host))
        sitemaps = rules.sitemaps(self.config.max_sitemaps)
        if sitemaps:
            sent.append(batch.command(b"SADD", self.sitemaps_key(host), *sitemaps))
        await _all(sent)
        return rules, capped

    async def decided(self, host: str, until: float) -> None:
        """Tell the frontier the host's pages may be handed out until ``until`` (a decision
        found in the shared cache, or a host the address guard refuses anyway)."""
        await self.batch.command(b"HSET", self.router.keys_for(host).host_robots, host, int(until * 1000))


async def _all(sent: list[asyncio.Future[Any]]) -> None:
    """Wait for every command; then raise the first error, if any (none is left unretrieved)."""
    for outcome in await asyncio.gather(*sent, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome
