"""The Scrapy scheduler that serves requests from the shared Redis frontier.

Scrapy calls :meth:`FrontierScheduler.enqueue_request` and
:meth:`FrontierScheduler.next_request` synchronously, many times a second, so
neither talks to Redis. A single background task, the *pump*, does all the I/O
in one pipelined round trip per cycle (:meth:`RedisFrontier.step`): it sends
the requests enqueued since the last cycle, acknowledges the leases of
requests the engine has finished with, renews the leases still held, and
claims as many new URLs as there are free download slots. Claimed requests
wait in a small local buffer for the engine to take them.

A request is *finished* when the engine drops it from its in-progress set,
which happens after the download, the spider callback, every request the
callback produced has been enqueued here, and every item has left the item
pipelines. Only then is its lease acked, in the same round trip as (and after)
the requests it produced, so a worker that dies at any moment loses nothing:
its unacked leases expire and their URLs are fetched again by someone else.

The host's next allowed time is computed by :class:`PolitenessPolicy` from the
fetch's duration (Scrapy's ``download_latency``) and the time the engine
finished with the request, which is never earlier than the end of the fetch.

The pump sleeps until the earliest of: a new event (enqueue, finished request),
the next host's ready time, the next lease expiry (another worker may have
died), or ``FRONTIER_IDLE_POLL``; so a host that becomes ready in t ms is
fetched about t ms later, not at the engine's next 5 s heartbeat.

Recrawl: when it has free slots the pump also drains the due set (revisits
whose time has come, :mod:`crawler.frontier.due`) into the queues, in the
same round trip, at the earliest due time it knows of and at least every
``RECRAWL_DRAIN_INTERVAL`` seconds (another worker may have scheduled an
earlier one). In batch mode (the default) the crawl ends when the frontier is
empty and nothing is due now; revisits due later stay for the next run. In
continuous mode (``RECRAWL_MODE = "continuous"`` or ``-a mode=continuous``)
the scheduler always has pending work, so the spider never closes on its own,
and the pump sleeps until the next revisit is due.

Shards (:mod:`crawler.frontier.shards`): with ``FRONTIER_SHARDS`` > 1 (the
default on a Redis Cluster) each shard is a frontier of its own and each
cycle sends one step per shard that has something to say, all at once, each
on its own connection (to the cluster node serving that shard). A shard is
asked for URLs when its next host is due by what this worker last heard from
it, when this worker just sent it new URLs, and at least every
``FRONTIER_IDLE_POLL`` seconds (other workers' URLs); the free slots are
shared among the shards asked, in turn. No shard is ever scanned: the cost
per cycle depends on the shards with work, not on hosts or URLs.

Draining (``scrapy frontier drain``): a flag in the crawl's metadata, looked
at every ``FRONTIER_IDLE_POLL`` seconds. A draining worker claims nothing
new, gives back what it claimed but has not started, finishes the requests in
hand and closes (stat ``frontier/drained``), in batch and continuous mode.

Priority: a request's front queue is its ``Request.priority`` plus the
priority policy's score of the URL (:mod:`crawler.policy.priority`: depth,
sitemap, host importance, host quality), computed once per host per batch of
links.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from redis.exceptions import RedisError
from scrapy import Request, Spider
from scrapy.core.scheduler import BaseScheduler
from scrapy.utils.defer import deferred_from_coro

from crawler.downloader.dns import CachingGuardedResolver, resolver_from_settings
from crawler.exceptions import CodecError, ConfigurationError, FrontierUnavailableError
from crawler.frontier.codec import RequestCodec
from crawler.frontier.completion import LeaseCompleter
from crawler.frontier.config import FrontierConfig
from crawler.frontier.context import FrontierContext
from crawler.frontier.intake import Intake
from crawler.frontier.levels import PriorityLevels
from crawler.frontier.outcome import Handout, LeaseAction
from crawler.frontier.pacing import NEVER_MS, ShardPacer
from crawler.frontier.seen import SeenConfig
from crawler.frontier.shards import ShardRouter, check_crawl_metadata, shard_frontiers
from crawler.frontier.stepstats import count_step
from crawler.frontier.store import (
    Completion,
    RedisFrontier,
    StepResult,
)
from crawler.middlewares.robots import robots_lease_request
from crawler.policy.backoff import BackoffPolicy
from crawler.policy.clock import CrawlClock
from crawler.policy.hostquality import HostQualityCache
from crawler.policy.politeness import PolitenessKey, PolitenessPolicy
from crawler.policy.priority import PriorityPolicy
from crawler.policy.recrawl import RecrawlMode
from crawler.redisconn.outage import REDIS_DOWN
from crawler.redisconn.provider import RedisProvider, crawl_id_for
from crawler.requestmeta import LEASE_META
from crawler.scrapy_internals import engine_slot
from crawler.settings_parsing import get_float
from crawler.urls.filters import FilterConfig, UrlFilter

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


_MAX_BACKOFF = 30.0
#: Seconds a new host's address may take to resolve (``FRONTIER_POLITENESS_KEY = "ip"``).
_RESOLVE_TIMEOUT = 10.0




def _requeue(sent: dict[int, list[_T]], pending: dict[int, list[_T]], shard: int) -> None:
    """Put a shard's unsent batch back in front of what came since."""
    if shard in sent:
        pending[shard] = sent[shard] + pending.get(shard, [])


class FrontierScheduler(BaseScheduler):
    """Scrapy scheduler over the Redis Mercator frontier (``SCHEDULER``)."""

    def __init__(
        self,
        crawler: Crawler,
        config: FrontierConfig,
        provider: RedisProvider,
        stats: StatsCollector,
        backoff: BackoffPolicy,
        url_filter: UrlFilter,
        seen: SeenConfig,
        *,
        router: ShardRouter | None = None,
        priority: PriorityPolicy | None = None,
        host_quality: HostQualityCache | None = None,
        clock: CrawlClock | None = None,
        mode: RecrawlMode = RecrawlMode.BATCH,
        drain_interval: float = 5.0,
        resolver: CachingGuardedResolver | None = None,
    ) -> None:
        self.crawler = crawler
        self.clock = clock or CrawlClock()
        self.mode = mode
        self.drain_interval = drain_interval
        self.config = config
        self.backoff = backoff
        self.seen = seen
        self.provider = provider
        self.stats = stats
        self.router = router or ShardRouter(config.crawl_id)
        self.keys = self.router.crawl_keys
        shards = self.router.count
        self.politeness = PolitenessPolicy(config.min_delay, config.delay_factor, config.max_delay)
        self.levels = PriorityLevels(config.levels)
        self.frontiers: list[RedisFrontier] = []
        self.codec: RequestCodec | None = None
        #: URLs on their way in (per shard), sent by the next step.
        self.intake = Intake(
            self.router, url_filter, self.levels, stats, local_seen_size=config.local_seen_size,
            priority=priority, host_quality=host_quality, clock=self.clock, resolver=resolver, notify=self._poke,
        )
        #: Per shard (only shards with something to send): acks.
        self._completions: dict[int, list[Completion]] = {}
        #: What each shard last told this worker; when to ask which for URLs.
        self.pacer = ShardPacer(shards, config.idle_poll)
        #: The crawl is draining (``scrapy frontier drain``): claim nothing, finish, close.
        self.draining = False
        self._drain_checked = 0.0
        self._buffer: deque[tuple[Request, Handout]] = deque()
        self._handed: dict[Request, Handout] = {}
        self._inprogress: set[Request] = set()
        self._nextcall: Any = None
        self._pump_task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._closing = False
        self._step_running = False
        self._last_renew = 0.0
        self._last_drain = 0.0

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        spider_name = crawl_id_for(crawler)
        config = FrontierConfig.from_settings(crawler.settings, spider_name)
        assert crawler.stats is not None
        settings = crawler.settings
        router = ShardRouter.for_crawler(crawler)
        if config.politeness_key is PolitenessKey.IP and router.count > 1:
            raise ConfigurationError(
                "FRONTIER_POLITENESS_KEY",
                f"'ip' needs one frontier shard (FRONTIER_SHARDS = 1), not {router.count}: the hosts of one "
                "address can belong to several shards, whose clocks are apart",
            )
        return cls(
            crawler, config, RedisProvider.for_crawler(crawler), crawler.stats, BackoffPolicy.from_settings(settings),
            UrlFilter(FilterConfig.from_settings(settings)), SeenConfig.from_settings(settings),
            router=router,
            priority=PriorityPolicy.from_settings(settings),
            host_quality=HostQualityCache.for_crawler(crawler),
            clock=CrawlClock.from_settings(settings),
            mode=RecrawlMode.from_settings(settings),
            drain_interval=get_float(settings, "RECRAWL_DRAIN_INTERVAL", minimum=0.1),
            resolver=resolver_from_settings(settings, crawler.stats)
            if config.politeness_key is PolitenessKey.IP else None,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def open(self, spider: Spider) -> Deferred[None]:
        return deferred_from_coro(self._open(spider))

    async def _open(self, spider: Spider) -> None:
        spider_mode = getattr(spider, "mode", None)
        if spider_mode is not None:
            self.mode = RecrawlMode.parse(spider_mode, "mode (spider argument)")
        client = await self.provider.client()
        await check_crawl_metadata(client, self.router)
        await self._check_politeness_key(client)
        count = self.router.count
        self.frontiers = shard_frontiers(client, self.router, self.config, self.seen, self.backoff)
        self.codec = RequestCodec(spider)
        self.intake.bind(self.codec, self.frontiers)
        self.completer = LeaseCompleter(self.politeness, self.codec, self.stats)
        for frontier in self.frontiers:
            await frontier.prepare()
        # The engine's own record of requests still being processed, and its
        # "look for work now" call: the only two engine internals used here.
        self._inprogress, self._nextcall = engine_slot(self.crawler.engine)
        self._wake = asyncio.Event()
        self._pump_task = asyncio.ensure_future(self._pump())
        FrontierContext.for_crawler(self.crawler).attach(self)
        logger.info(
            "Frontier %r open on %s: %d shard%s, min delay %.3g s, delay factor %.3g, %d priority levels %s, "
            "%d active hosts, lease %.0f s, %s mode",
            self.config.crawl_id, self.provider.url, count, "" if count == 1 else "s", self.config.min_delay,
            self.config.delay_factor, self.config.levels, list(self.config.queue_weights), self.config.active_hosts,
            self.config.lease_timeout, self.mode.value,
        )

    async def _check_politeness_key(self, client: Any) -> None:
        """Every worker of a crawl keeps politeness by the same key (recorded by the first)."""
        key = self.keys.crawl_key("meta")
        mine = self.config.politeness_key.value
        await client.hsetnx(key, "politeness_key", mine)
        stored = await client.hget(key, "politeness_key")
        stored = stored.decode() if isinstance(stored, bytes) else str(stored)
        if stored != mine:
            raise ConfigurationError(
                "FRONTIER_POLITENESS_KEY",
                f"crawl {self.config.crawl_id!r} keeps politeness by {stored!r}, this worker by {mine!r}; "
                "the key is fixed for the life of a crawl",
            )

    def close(self, reason: str) -> Deferred[None]:
        return deferred_from_coro(self._close(reason))

    async def _close(self, reason: str) -> None:
        self._closing = True
        FrontierContext.for_crawler(self.crawler).detach(self)
        if self._pump_task is not None:
            self._poke()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pump_task
        if self._timer is not None:
            self._timer.cancel()
        if not self.frontiers:
            return
        self._collect_completions()
        releases: dict[int, list[bytes]] = {}
        for _, handout in self._buffer:
            releases.setdefault(handout.lease.shard, []).append(handout.lease.member)
        self._buffer.clear()
        unfinished = len(self._handed)
        enqueues, touches = self.intake.take()
        await self.intake.resolve_groups(enqueues)
        for attempt in range(3):
            now_ms = int(time.time() * 1000)
            crawl_now_ms = int(self.clock.now() * 1000)
            shards = set(enqueues) | set(self._completions) | set(touches) | set(releases)
            try:
                for shard in sorted(shards):
                    result = await self.frontiers[shard].step(
                        enqueues=enqueues.get(shard),
                        completions=self._completions.get(shard),
                        releases=releases.get(shard),
                        now_ms=now_ms,
                        touches=touches.get(shard),
                        crawl_now_ms=crawl_now_ms,
                    )
                    count_step(self.stats, result)
                    self.stats.inc_value("frontier/released", result.released)
                    for pending in (enqueues, self._completions, touches, releases):
                        pending.pop(shard, None)
            except REDIS_DOWN as exc:
                logger.warning("Frontier close: Redis unreachable (%s), attempt %d of 3", exc, attempt + 1)
                await asyncio.sleep(1.0 + attempt * 2)
                continue
            break
        else:
            logger.error(
                "Frontier close: could not reach Redis; %d enqueues and %d acks not written. "
                "Their leases expire in %.0f s and the URLs are fetched again, so nothing is lost.",
                sum(map(len, enqueues.values())), sum(map(len, self._completions.values())),
                self.config.lease_timeout,
            )
        for frontier in self.frontiers:
            await frontier.close()
        if unfinished:
            logger.warning("Frontier close: %d requests were still in flight; their leases will expire", unfinished)
        if not self.stats.get_value("frontier/claimed") and not self.stats.get_value("frontier/enqueued"):
            logger.warning(
                "Frontier %r had nothing to crawl: give seeds with -a seeds=FILE or -a urls=URL,URL",
                self.config.crawl_id,
            )
        logger.info("Frontier %r closed (%s)", self.config.crawl_id, reason)

    # -- the Scrapy scheduler interface --------------------------------------------------

    def has_pending_requests(self) -> bool:
        if self.draining:
            return bool(self._handed or self.intake.enqueues or self._completions or self._step_running)
        if self.mode is RecrawlMode.CONTINUOUS and not self._closing:
            return True
        return bool(
            self._buffer
            or self.pacer.due_now > 0
            or self._handed
            or self.intake.enqueues
            or self._completions
            or self._step_running
            or not self.pacer.synced
            or self.pacer.pending > 0
        )

    def enqueue_request(self, request: Request) -> bool:
        """Queue a request for the frontier (:meth:`Intake.request`); ``False`` if it is dropped here.

        Duplicates found by the shared seen set, and URLs over a page budget,
        are counted when Redis answers: the engine is told ``True`` for every
        request that was sent.
        """
        return self.intake.request(request)

    def enqueue_urls(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        callback: str | None = None,
        priority: int = 0,
        meta: dict[str, Any] | None = None,
        exact_seen: bool = False,
    ) -> int:
        """Queue plain GET requests for many URLs at once (:meth:`Intake.urls`); returns how many were sent.

        The links are stored before the lease of the page that found them is acked.
        """
        return self.intake.urls(urls, depth=depth, callback=callback, priority=priority, meta=meta,
                                exact_seen=exact_seen)

    def revisit_scheduled(self, due_ms: int) -> None:
        """A revisit was put in the due set by this process (the recrawl pipeline):
        drain it when it is due, not at the next ``RECRAWL_DRAIN_INTERVAL``."""
        if self.pacer.revisit_scheduled(due_ms):
            self._poke()

    def next_request(self) -> Request | None:
        if self._handed:
            self._collect_completions()
        if not self._buffer:
            # Ask the pump for work only if it could claim some: with every
            # slot taken (requests still in the pipelines) a poke would only
            # spin the engine and the pump against each other.
            if not self._closing and self._capacity() > 0 and self.pacer.next_ready_at <= time.time():
                self._poke()
            return None
        request, handout = self._buffer.popleft()
        handout.handed_at = time.time()
        self._handed[request] = handout
        return request

    # -- bookkeeping ---------------------------------------------------------------------

    def _collect_completions(self) -> None:
        inprogress = self._inprogress
        finished = [request for request in self._handed if request not in inprogress]
        if not finished:
            return
        now = time.time()
        completions = self._completions
        for request in finished:
            completion = self.completer.completion(request, self._handed.pop(request), now)
            completions.setdefault(completion.shard, []).append(completion)
        self._poke()

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _wake_engine(self) -> None:
        if self._nextcall is not None and not self._closing:
            self._nextcall.schedule()

    # -- the pump ------------------------------------------------------------------------

    async def _pump(self) -> None:
        assert self._wake is not None
        backoff = 0.5
        loop = asyncio.get_running_loop()
        while not self._closing:
            self._wake.clear()
            try:
                await self._cycle()
            except REDIS_DOWN as exc:
                self.stats.inc_value("frontier/redis_errors")
                logger.warning("Frontier Redis unreachable (%s); retrying in %.1f s", exc, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            except RedisError:
                self.stats.inc_value("frontier/redis_errors")
                logger.exception("Frontier Redis error; retrying in %.1f s", backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
            backoff = 0.5
            if self._wake.is_set() or self._closing:
                continue
            # Always a timer, 1 ms at least: a host that is ready "now" by the
            # claim's clock but was not claimable yet is looked at again at
            # once, without spinning and without waiting for a poke.
            self._timer = loop.call_later(max(self._sleep_time(), 0.001), self._wake.set)
            await self._wake.wait()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def _sleep_time(self) -> float:
        """Seconds the pump may sleep if nothing happens meanwhile."""
        if self.intake.enqueues or self._completions:
            return 0.0
        now = time.time()
        renew_in = self._last_renew + self.config.lease_timeout / 3 - now
        if self._capacity() <= 0:
            return max(renew_in, 0.0)
        wake = min(self.config.idle_poll, renew_in)
        if self.pacer.next_ready_at > 0:
            wake = min(wake, self.pacer.next_ready_at - now)
        if self.pacer.due_now > 0:
            return 0.0
        if self.pacer.next_due_ms < NEVER_MS:
            # The next revisit, in real seconds (the crawl clock may run faster).
            wake = min(wake, self.clock.to_real_delay(self.pacer.next_due_ms / 1000.0 - self.clock.now()))
        return max(wake, 0.0)

    def _capacity(self) -> int:
        return self.config.concurrency - len(self._handed) - len(self._buffer)

    async def _check_draining(self, now: float) -> None:
        self._drain_checked = now
        client = await self.provider.client()
        if await client.exists(self.keys.crawl_key("draining")):
            self.draining = True
            logger.warning("Frontier %r is draining (scrapy frontier drain): finishing the requests in hand, "
                           "claiming nothing new", self.config.crawl_id)
            self.stats.set_value("frontier/drained", True)
            releases: dict[int, list[bytes]] = {}
            for _, handout in self._buffer:
                releases.setdefault(handout.lease.shard, []).append(handout.lease.member)
            self._buffer.clear()
            for shard, members in releases.items():
                result = await self.frontiers[shard].step(releases=members, now_ms=int(now * 1000))
                self.stats.inc_value("frontier/released", result.released)

    async def _cycle(self) -> None:
        assert self.frontiers and self.codec is not None
        now = time.time()
        if not self.draining and now - self._drain_checked >= self.config.idle_poll:
            await self._check_draining(now)
        self._collect_completions()
        enqueues, touches = self.intake.take()
        await self.intake.resolve_groups(enqueues)
        completions, self._completions = self._completions, {}
        now = time.time()
        renew: dict[int, list[bytes]] = {}
        if now - self._last_renew >= self.config.lease_timeout / 3:
            for handout in [*self._handed.values(), *(h for _, h in self._buffer)]:
                renew.setdefault(handout.lease.shard, []).append(handout.lease.member)
            self._last_renew = now
        capacity = 0 if self.draining else self._capacity()
        crawl_now_ms = int(self.clock.now() * 1000)
        drain_at = None
        if capacity > 0 and (crawl_now_ms >= self.pacer.next_due_ms or now - self._last_drain >= self.drain_interval):
            drain_at = crawl_now_ms
            self._last_drain = now
        claims = self.pacer.claims(capacity, now, enqueues)
        shards = set(enqueues) | set(completions) | set(touches) | set(renew) | set(claims)
        if drain_at is not None:
            shards = set(range(self.router.count))
        now_ms = int(now * 1000)

        async def step(shard: int) -> StepResult:
            return await self.frontiers[shard].step(
                enqueues=enqueues.get(shard),
                completions=completions.get(shard),
                renew=renew.get(shard),
                claim=claims.get(shard),
                now_ms=now_ms,
                drain_at_ms=drain_at,
                touches=touches.get(shard),
                crawl_now_ms=crawl_now_ms,
            )

        self._step_running = True
        try:
            if len(shards) == 1:
                (only,) = shards
                outcomes: list[StepResult | BaseException] = [await self._guard(step(only))]
            else:
                outcomes = list(await asyncio.gather(*(step(shard) for shard in shards), return_exceptions=True))
        finally:
            self._step_running = False
        failure: BaseException | None = None
        for shard, outcome in zip(shards, outcomes):
            if isinstance(outcome, BaseException):
                # Nothing is dropped: the shard's batches go back in front of what came since.
                self.intake.put_back(shard, enqueues, touches)
                _requeue(completions, self._completions, shard)
                failure = failure or outcome
                continue
            self._absorb(shard, outcome, now)
        self.stats.inc_value("frontier/round_trips", len(shards))
        if self._buffer or not self.has_pending_requests():
            # New requests to hand out, or the crawl may be over: the engine looks.
            self._wake_engine()
        if failure is not None:
            raise failure

    @staticmethod
    async def _guard(step: Coroutine[Any, Any, StepResult]) -> StepResult | BaseException:
        try:
            return await step
        except Exception as exc:
            return exc

    def _absorb(self, shard: int, result: StepResult, now: float) -> None:
        """Take in one shard's step result: counts, timings, claimed requests."""
        assert self.codec is not None
        count_step(self.stats, result)
        if result.drain is not None:
            self.pacer.heard_drain(shard, result.drain)
        claim = result.claim
        if claim is None:
            return
        self.pacer.heard_claim(shard, claim, now)
        for lease, blob in claim.claimed:
            try:
                request = self.codec.decode(blob)
                if lease.robots:
                    # The host's robots.txt first; the page stays queued.
                    request = robots_lease_request(request.url)
            except CodecError as exc:
                self.stats.inc_value("frontier/dropped/undecodable")
                logger.error("Frontier dropped stored request %d of %s: %s", lease.request_id, lease.host, exc)
                now_ms = int(time.time() * 1000)
                # A robots.txt lease cannot say which origin: the host's queued requests become dead letters.
                action = LeaseAction.DEAD if lease.robots else LeaseAction.DONE
                self._completions.setdefault(shard, []).append(
                    Completion(lease.member, 0, now_ms, action=action, error="CodecError", message=str(exc),
                               shard=shard))
                continue
            handout = Handout(lease)
            request.meta[LEASE_META] = handout
            self._buffer.append((request, handout))

    # -- introspection -------------------------------------------------------------------

    def __len__(self) -> int:
        return self.pacer.pending


__all__ = ["LEASE_META", "FrontierScheduler", "FrontierUnavailableError", "Handout"]
