"""The frontier scheduler's one background task: all its Redis I/O.

Each cycle is one pipelined round trip per shard that has something to say
(:meth:`RedisFrontier.step`, all shards at once): the requests enqueued since
the last cycle, the acks of the requests the engine has finished with, the
renewal of the leases still held, the drain of due revisits, and a claim of
as many URLs as there are free download slots (shared among the shards by
:class:`~crawler.frontier.pacing.ShardPacer`). A shard whose step fails gets
its batches back in front of what came since: nothing is dropped.

The pump sleeps until the earliest of: a poke (an enqueue, a finished
request), the next host's ready time, the next lease renewal, the next
revisit due, or ``FRONTIER_IDLE_POLL``; so a host that becomes ready in t ms
is fetched about t ms later. Every ``FRONTIER_IDLE_POLL`` seconds it also
looks whether the crawl is draining (``scrapy frontier drain``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from redis.exceptions import OutOfMemoryError, RedisError

from crawler.exceptions import CodecError
from crawler.frontier.outcome import Handout, LeaseAction
from crawler.frontier.pacing import NEVER_MS
from crawler.frontier.redisfrontier import Completion, EnqueueEntry, Step, StepResult, Touch
from crawler.frontier.steps import count_step
from crawler.redisconn.outage import REDIS_DOWN
from crawler.requestmeta import LEASE_META
from crawler.robots.request import robots_lease_request

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.admission import MemoryWatch
    from crawler.frontier.codec import RequestCodec
    from crawler.frontier.config import FrontierConfig
    from crawler.frontier.inhand import InHand
    from crawler.frontier.intake import Intake
    from crawler.frontier.pacing import ShardPacer
    from crawler.frontier.redisfrontier import RedisFrontier
    from crawler.policy.clock import CrawlClock
    from crawler.redisconn.provider import RedisProvider

logger = logging.getLogger(__name__)

_MAX_BACKOFF = 30.0


class Pump:
    def __init__(
        self,
        config: FrontierConfig,
        provider: RedisProvider,
        stats: StatsCollector,
        intake: Intake,
        inhand: InHand,
        pacer: ShardPacer,
        clock: CrawlClock,
        *,
        shards: int,
        drain_interval: float,
        wake_engine: Callable[[], None],
        has_pending: Callable[[], bool],
    ) -> None:
        self.config = config
        self.provider = provider
        self.stats = stats
        self.intake = intake
        self.inhand = inhand
        self.pacer = pacer
        self.clock = clock
        self.shards = shards
        self.drain_interval = drain_interval
        self._wake_engine = wake_engine
        self._has_pending = has_pending
        self.frontiers: list[RedisFrontier] = []
        self.codec: RequestCodec | None = None
        #: Redis memory and what it admits (set when the scheduler opens).
        self.memory: MemoryWatch | None = None
        #: The crawl is draining (``scrapy frontier drain``): claim nothing, finish, close.
        self.draining = False
        #: A step is on its way (its results may still bring work).
        self.step_running = False
        self.closing = False
        self._drain_key = ""
        self._drain_checked = 0.0
        self._last_renew = 0.0
        self._last_drain = 0.0
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._timer: asyncio.TimerHandle | None = None

    def start(self, frontiers: list[RedisFrontier], codec: RequestCodec, drain_key: str) -> None:
        self.frontiers = frontiers
        self.codec = codec
        self._drain_key = drain_key
        self._wake = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())

    def poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def collect(self) -> None:
        """Take the requests the engine has finished with as completions (acked by the next step)."""
        if self.inhand.collect():
            self.poke()

    async def stop(self) -> None:
        """End the loop (after the cycle on its way, if any)."""
        self.closing = True
        if self._task is not None:
            self.poke()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._timer is not None:
            self._timer.cancel()

    # -- the loop ------------------------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None
        backoff = 0.5
        loop = asyncio.get_running_loop()
        while not self.closing:
            self._wake.clear()
            try:
                await self.cycle()
            except OutOfMemoryError as exc:
                # Refused before it wrote anything (the scripts are flagged): nothing was lost, the
                # step's batches went back and are sent again; meanwhile admission tightens.
                self.stats.inc_value("frontier/redis_full")
                logger.warning("Redis is full (%s): the frontier waits %.1f s and sends its step again; it admits "
                               "fewer new URLs until memory frees (see docs/sizing.md)", exc, backoff)
                if self.memory is not None:
                    self.memory.checked = 0.0
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
                continue
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
            if self._wake.is_set() or self.closing:
                continue
            # Always a timer, 1 ms at least: a host that is ready "now" by the
            # claim's clock but was not claimable yet is looked at again at
            # once, without spinning and without waiting for a poke.
            self._timer = loop.call_later(max(self.sleep_time(), 0.001), self._wake.set)
            await self._wake.wait()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def sleep_time(self) -> float:
        """Seconds the pump may sleep if nothing happens meanwhile."""
        if self.intake.enqueues or self.inhand.completions:
            return 0.0
        now = time.time()
        renew_in = self._last_renew + self.config.lease_timeout / 3 - now
        if self.inhand.capacity() <= 0:
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

    async def _check_draining(self, now: float) -> None:
        self._drain_checked = now
        client = await self.provider.client()
        if await client.exists(self._drain_key):
            self.draining = True
            logger.warning(
                "Frontier %r is draining (scrapy frontier drain): finishing the requests in hand, claiming nothing new",
                self.config.crawl_id,
            )
            self.stats.set_value("frontier/drained", True)
            for shard, members in self.inhand.release_buffered().items():
                result = await self.frontiers[shard].step(Step(releases=members, now_ms=int(now * 1000)))
                self.stats.inc_value("frontier/released", result.released)

    async def cycle(self) -> None:
        assert self.frontiers and self.codec is not None
        now = time.time()
        if not self.draining and now - self._drain_checked >= self.config.idle_poll:
            await self._check_draining(now)
        self.collect()
        # From the take to the step's answer the URLs taken are in no queue a look at the scheduler
        # sees (resolving addresses, sending): the step counts as running all along.
        self.step_running = True
        try:
            sent = await self._send(now)
        finally:
            self.step_running = False
        outcomes, shards, enqueues, touches, completions, releases, renew, sent_at = sent
        answered_at = time.time()
        failure: BaseException | None = None
        for shard, outcome in zip(shards, outcomes):
            if isinstance(outcome, BaseException):
                # Nothing is dropped: the shard's batches go back in front of what came since.
                self.intake.put_back(shard, enqueues, touches)
                self.inhand.put_back(completions, shard)
                self.inhand.put_back_lapsed(releases, shard)
                failure = failure or outcome
                continue
            if shard in renew:
                self.inhand.renewed(renew[shard], sent_at, answered_at)
            if shard in releases:
                self.stats.inc_value("frontier/released", outcome.released)
            self._absorb(shard, outcome, now)
        self.stats.inc_value("frontier/round_trips", len(shards))
        if self.inhand.buffer or not self._has_pending():
            # New requests to hand out, or the crawl may be over: the engine looks.
            self._wake_engine()
        if failure is not None:
            raise failure

    async def _send(self, now: float) -> tuple[list[StepResult | BaseException], set[int],
                                               dict[int, list[EnqueueEntry]], dict[int, list[Touch]],
                                               dict[int, list[Completion]], dict[int, list[bytes]],
                                               dict[int, list[Handout]], float]:
        """One step on every shard that has something to do: what was taken, each shard's outcome, the
        leases renewed and when the step was sent."""
        enqueues, touches = self.intake.take()
        completions = self.inhand.take_completions()
        releases = self.inhand.take_lapsed()
        if self.inhand.newly_lapsed:
            lapsed, self.inhand.newly_lapsed = self.inhand.newly_lapsed, 0
            self.stats.inc_value("frontier/lease_lapsed", lapsed)
            logger.warning(
                "Frontier gives back %d claimed requests not handed out in time: their leases were not renewed "
                "for %.0f s (2/3 of FRONTIER_LEASE_TIMEOUT; Redis unreachable or the worker stalled), so another "
                "worker may hold their hosts", lapsed, self.inhand.lapse_after,
            )
        try:
            await self.intake.resolve_groups(enqueues)
            if self.memory is not None and self.memory.due(now):
                await self.memory.refresh(self.frontiers, now)
        except BaseException:
            # Nothing taken is lost: it goes back in front of what came since, for the next step.
            for shard in set(enqueues) | set(touches):
                self.intake.put_back(shard, enqueues, touches)
            for shard in set(completions):
                self.inhand.put_back(completions, shard)
            for shard in set(releases):
                self.inhand.put_back_lapsed(releases, shard)
            raise
        now = time.time()
        renew: dict[int, list[Handout]] = {}
        if now - self._last_renew >= self.config.lease_timeout / 3:
            renew = self.inhand.held()
            self._last_renew = now
        capacity = 0 if self.draining else self.inhand.capacity()
        crawl_now_ms = int(self.clock.now() * 1000)
        drain_at = None
        if capacity > 0 and (crawl_now_ms >= self.pacer.next_due_ms or now - self._last_drain >= self.drain_interval):
            drain_at = crawl_now_ms
            self._last_drain = now
        # A shard sent URLs or acks is asked too: a new host, or one acked at delay 0, is ready at once
        # (else a sharded crawl's host would wait FRONTIER_IDLE_POLL between its pages).
        sent = set(enqueues) | set(completions)
        claims = self.pacer.claims(capacity, now, sent)
        for shard in claims:
            if not self.frontiers[shard].admission.fetch:
                claims[shard] = 0  # Redis nearly full: expire and refill, hand out nothing new
        shards = sent | set(touches) | set(renew) | set(claims) | set(releases)
        if drain_at is not None:
            shards = set(range(self.shards))
        now_ms = int(now * 1000)

        async def step(shard: int) -> StepResult:
            return await self.frontiers[shard].step(Step(
                enqueues=enqueues.get(shard),
                completions=completions.get(shard),
                releases=releases.get(shard),
                renew=[handout.lease.member for handout in renew[shard]] if shard in renew else None,
                claim=claims.get(shard),
                now_ms=now_ms,
                drain_at_ms=drain_at,
                touches=touches.get(shard),
                crawl_now_ms=crawl_now_ms,
            ))

        if len(shards) == 1:
            (only,) = shards
            outcomes: list[StepResult | BaseException] = [await _guard(step(only))]
        else:
            outcomes = list(await asyncio.gather(*(step(shard) for shard in shards), return_exceptions=True))
        return outcomes, shards, enqueues, touches, completions, releases, renew, now

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
                request = self.codec.decode(blob, lease.host)
                if lease.robots:
                    # The host's robots.txt first; the page stays queued.
                    request = robots_lease_request(request.url)
            except CodecError as exc:
                self.stats.inc_value("frontier/dropped/undecodable")
                logger.error("Frontier dropped stored request %d of %s: %s", lease.request_id, lease.host, exc)
                now_ms = int(time.time() * 1000)
                # A robots.txt lease cannot say which origin: the host's queued requests become dead letters.
                action = LeaseAction.DEAD if lease.robots else LeaseAction.DONE
                self.inhand.complete(
                    Completion(
                        lease.member, 0, now_ms, action=action, error="CodecError", message=str(exc), shard=shard
                    )
                )
                continue
            handout = Handout(lease, now)
            request.meta[LEASE_META] = handout
            self.inhand.add(request, handout)

    # -- closing -------------------------------------------------------------------------

    async def flush(self) -> None:
        """The last writes of a closing worker: enqueues, acks and touches; buffered leases given back."""
        self.collect()
        releases = self.inhand.release_buffered()
        enqueues, touches = self.intake.take()
        await self.intake.resolve_groups(enqueues)
        completions = self.inhand.completions
        for attempt in range(3):
            now_ms = int(time.time() * 1000)
            crawl_now_ms = int(self.clock.now() * 1000)
            shards = set(enqueues) | set(completions) | set(touches) | set(releases)
            try:
                for shard in sorted(shards):
                    result = await self.frontiers[shard].step(Step(
                        enqueues=enqueues.get(shard),
                        completions=completions.get(shard),
                        releases=releases.get(shard),
                        now_ms=now_ms,
                        touches=touches.get(shard),
                        crawl_now_ms=crawl_now_ms,
                    ))
                    count_step(self.stats, result)
                    self.stats.inc_value("frontier/released", result.released)
                    for pending in (enqueues, completions, touches, releases):
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
                sum(map(len, enqueues.values())),
                sum(map(len, completions.values())),
                self.config.lease_timeout,
            )


async def _guard(step: Coroutine[Any, Any, StepResult]) -> StepResult | BaseException:
    try:
        return await step
    except Exception as exc:
        return exc
