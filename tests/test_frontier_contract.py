"""The frontier's contract, against a real redis-server.

Every test runs twice: once on one connection, and once ("restart") with the
Redis server stopped and started again (AOF persistence) at the points marked
``await frontier.reopen()``, which proves that the state survives a restart.
Time is passed explicitly (``now_ms``), so the tests are deterministic.
"""

from __future__ import annotations

import asyncio
import struct
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from redis.asyncio import Redis

from crawler.crawlstate.keys import ShardKeys
from crawler.crawlstate.schema import ZSET_ANCHOR
from crawler.crawlstate.shards import ShardRouter
from crawler.frontier.config import FrontierConfig
from crawler.frontier.outcome import HostSignal, LeaseAction
from crawler.frontier.redisfrontier import DONT_FILTER, EXACT_ONLY, Completion, EnqueueEntry, Lease, RedisFrontier, Step
from crawler.frontier.seen import SeenConfig
from crawler.policy.backoff import BackoffPolicy
from crawler.policy.politeness import PolitenessKey
from crawler.urls import bloom_offsets, bloom_positions, normalize_url, url_fingerprint, url_key
from crawler.urls.domains import RegisteredDomains
from crawler.urls.fingerprint import POSITIONS, sketch_offsets
from tests.conftest import RedisServer

T0 = 1_700_000_000_000  # a fixed "now", in ms


def make_config(crawl_id: str, **overrides: object) -> FrontierConfig:
    config = FrontierConfig(
        crawl_id=crawl_id,
        min_delay=0.0,
        delay_factor=0.0,
        max_delay=300.0,
        queue_weights=(8, 4, 2, 1),
        active_hosts=100,
        lease_timeout=10.0,
        idle_poll=1.0,
        refill_batch=1000,
        enqueue_batch=500,
        local_seen_size=0,
        concurrency=16,
    )
    return replace(config, **overrides)  # type: ignore[arg-type]


SEEN = SeenConfig.sized(100_000, 0.01)
DOMAINS = RegisteredDomains()


def entry(url: str, level: int = 1, dont_filter: bool = False, exact_only: bool = False) -> EnqueueEntry:
    normalized, host = normalize_url(url)
    fingerprint = url_fingerprint(normalized)
    flags = (DONT_FILTER if dont_filter else 0) | (EXACT_ONLY if exact_only else 0)
    positions = bloom_positions(fingerprint, SEEN.bloom_bits, SEEN.bloom_hashes)
    return EnqueueEntry(url_key(fingerprint), positions, host, DOMAINS(host), level, flags, url.encode())


class Harness:
    def __init__(self, server: RedisServer, config: FrontierConfig, restart: bool) -> None:
        self.server = server
        self.config = config
        self.restart = restart
        self.client: Redis | None = None
        self.frontier: RedisFrontier | None = None

    async def open(self) -> RedisFrontier:
        self.client = Redis.from_url(self.server.url)
        self.frontier = RedisFrontier(self.client, ShardKeys(self.config.crawl_id), self.config, seen=SEEN)
        await self.frontier.load_scripts()
        return self.frontier

    async def reopen(self) -> RedisFrontier:
        """A new connection; in the restart variant, a restarted server too."""
        assert self.client is not None
        await self.client.aclose()
        if self.restart:
            self.server.restart()
        return await self.open()

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()


@pytest.fixture(scope="module")
def contract_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(Path(tmp_path_factory.mktemp("contract-redis")))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["same-connection", "restart"])
def run(request: pytest.FixtureRequest, contract_redis: RedisServer, crawl_id: str) -> Callable[..., None]:
    restart = request.param == "restart"

    def runner(test: Callable[[Harness], Awaitable[None]], **overrides: object) -> None:
        async def main() -> None:
            harness = Harness(contract_redis, make_config(crawl_id, **overrides), restart)
            await harness.open()
            try:
                await test(harness)
            finally:
                await harness.close()

        asyncio.run(main())

    return runner


async def drain(frontier: RedisFrontier, now: int, per_claim: int = 100) -> list[tuple[Lease, bytes]]:
    """Claim and ack until nothing is ready at ``now``; returns claims in order."""
    out: list[tuple[Lease, bytes]] = []
    while True:
        claim = await frontier.claim(now, per_claim)
        if not claim.claimed:
            return out
        out += claim.claimed
        await frontier.ack([Completion(lease.member, now, now) for lease, _ in claim.claimed])


def test_enqueue_claim_ack_and_seen_set(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        assert await f.enqueue([entry("http://a.test/1"), entry("http://a.test/1"), entry("http://b.test/1")]) == (2, 1)
        f = await h.reopen()
        assert await f.enqueue([entry("http://a.test/1")]) == (0, 1)  # seen survives
        claimed = await drain(f, T0)
        assert sorted(blob for _, blob in claimed) == [b"http://a.test/1", b"http://b.test/1"]
        f = await h.reopen()
        counts = await f.counts()
        assert (counts.queued, counts.leased) == (0, 0)
        assert await f.enqueue([entry("http://a.test/1")]) == (0, 1)  # fetched is never re-enqueued
        assert await f.enqueue([entry("http://a.test/1", dont_filter=True)]) == (1, 0)

    run(body)


def test_one_url_per_host_in_flight_and_next_allowed_time(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(5)] + [entry("http://b.test/0")])
        claim = await f.claim(T0, 10)
        hosts = Counter(lease.host for lease, _ in claim.claimed)
        assert hosts == {"a.test": 1, "b.test": 1}
        # a.test is in flight: nothing more from it, by anyone, until the ack.
        assert (await f.claim(T0 + 5, 10)).claimed == []
        f = await h.reopen()
        lease_a = next(lease for lease, _ in claim.claimed if lease.host == "a.test")
        assert await f.ack([Completion(lease_a.member, T0 + 2000, T0 + 100)]) == (1, 0)
        assert (await f.claim(T0 + 1999, 10)).claimed == []
        late = await f.claim(T0 + 2000, 10)
        assert [lease.host for lease, _ in late.claimed] == ["a.test"]
        assert late.next_ready_ms is None  # nothing else ready; b.test in flight

    run(body)


def test_several_requests_per_host_share_its_politeness_budget_each_slot_on_its_own_clock(
    run: Callable[..., None]
) -> None:
    """FRONTIER_CONCURRENCY_PER_KEY = 3: up to 3 leases of one host at once, across every claimer; before
    its first answer, starts spaced by the minimum delay / k; then each slot is free again the delay of its
    own answer after that answer (the host gets at most k times the load of one slot); an expired lease
    frees its slot; a sibling's backoff holds the whole host whatever its other answers say."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(9)])
        starts = []
        for at in (T0, T0 + 33, T0 + 66):
            claimed = (await f.claim(at, 10)).claimed
            assert len(claimed) == 1  # one start per spacing (100 ms / 3), however many are asked for
            starts.append(claimed[0][0])
            assert (await f.claim(at + 32, 10)).claimed == []
        f = await h.reopen()
        assert (await f.claim(T0 + 400, 10)).claimed == []  # three in flight: the host is full
        assert (await f.counts()).leased == 3
        # An answer with a 500 ms delay: its slot is free 500 ms after it (the others are in flight).
        assert await f.ack([Completion(starts[0].member, T0 + 800, T0 + 300)]) == (1, 0)
        assert (await f.claim(T0 + 799, 10)).claimed == []
        fourth = (await f.claim(T0 + 800, 10)).claimed
        assert len(fourth) == 1
        # Throttled (429) on one, an ordinary answer on another: the host waits for the backoff.
        await f.ack([Completion(starts[1].member, T0 + 900, T0 + 800, host_signal=HostSignal.THROTTLED)])
        f = await h.reopen()
        await f.ack([Completion(starts[2].member, T0 + 900, T0 + 850)])
        assert (await f.counts()).leased == 1
        assert (await f.claim(T0 + 1300, 10)).claimed == []  # without the backoff: ready at T0 + 900
        # The last lease expires (T0 + 10,800): its slot is free the minimum delay after the expiry is
        # seen (its worker may still be fetching), and its URL first in line again.
        late = await f.claim(T0 + 120_000, 10)
        assert (late.expired, late.claimed) == (1, [])
        assert (await f.claim(T0 + 120_099, 10)).claimed == []
        assert [blob for _, blob in (await f.claim(T0 + 120_100, 10)).claimed] == [fourth[0][1]]

    run(body, per_key=3, min_delay=0.1)


def test_with_no_minimum_delay_k_requests_go_at_once_and_each_slot_rests_after_its_answer(
    run: Callable[..., None]
) -> None:
    """k = 4 and DOWNLOAD_DELAY = 0 (a team's project): 4 requests in flight at once, as Scrapy gives; a
    slot whose answer asks a 300 ms delay is free 300 ms after it, while the host's other slots go on."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(12)])
        leases = []
        for _ in range(5):
            leases += [lease for lease, _ in (await f.claim(T0, 10)).claimed]
        assert len(leases) == 4, "k at once, never more"
        f = await h.reopen()
        # Two answers: 30 ms fetches with a 300 ms delay each; the host is ready only when a slot is.
        await f.ack([Completion(leases[0].member, T0 + 330, T0 + 30), Completion(leases[1].member, T0 + 340, T0 + 40)])
        assert (await f.claim(T0 + 329, 10)).claimed == []
        assert len((await f.claim(T0 + 330, 10)).claimed) == 1
        assert (await f.claim(T0 + 339, 10)).claimed == []
        assert len((await f.claim(T0 + 340, 10)).claimed) == 1
        # The two others answer late, at once, with no delay (never contacted): both slots free now.
        await f.ack([Completion(leases[2].member, 0, T0 + 400), Completion(leases[3].member, 0, T0 + 400)])
        assert len((await f.claim(T0 + 400, 10)).claimed) == 1
        assert len((await f.claim(T0 + 400, 10)).claimed) == 1
        assert (await f.claim(T0 + 400, 10)).claimed == []
        assert (await f.counts()).leased == 4

    run(body, per_key=4, min_delay=0.0)


def test_a_key_with_a_concurrency_of_its_own_gets_it_the_others_one(run: Callable[..., None]) -> None:
    """DOWNLOAD_SLOTS = {"a.test": {"concurrency": 2}} with FRONTIER_CONCURRENCY_PER_KEY = 1: a.test has
    2 requests in flight, b.test one."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        assert h.client is not None
        await h.client.hset(f.keys.slot_limit, mapping={"a.test": 2})
        await f.enqueue([entry(f"http://{host}/{i}") for host in ("a.test", "b.test") for i in range(4)])
        hosts: Counter[str] = Counter()
        for _ in range(4):
            hosts.update(lease.host for lease, _ in (await f.claim(T0, 10)).claimed)
        assert hosts == {"a.test": 2, "b.test": 1}
        f = await h.reopen()
        assert (await f.claim(T0 + 1, 10)).claimed == []

    run(body, per_key=1, slot_limited=True)


def test_host_delay_floor_raises_next_allowed_time(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.set_host_delay("a.test", 5000)
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2")])
        lease = (await f.claim(T0, 1)).claimed[0][0]
        await f.ack([Completion(lease.member, T0 + 100, T0 + 50)])
        f = await h.reopen()
        assert (await f.claim(T0 + 5049, 1)).claimed == []
        assert len((await f.claim(T0 + 5050, 1)).claimed) == 1

    run(body)


def test_resting_host_keeps_its_time_after_its_back_queue_is_gone(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1")])
        lease = (await f.claim(T0, 1)).claimed[0][0]
        await f.ack([Completion(lease.member, T0 + 3000, T0)])  # queue empty: host leaves
        counts = await f.counts()
        assert counts.active_hosts == 0
        await f.enqueue([entry("http://a.test/2")])  # comes back through a front queue
        f = await h.reopen()
        assert (await f.claim(T0 + 2999, 1)).claimed == []
        assert [b for _, b in (await f.claim(T0 + 3000, 1)).claimed] == [b"http://a.test/2"]

    run(body)


def test_the_ready_heap_and_the_leases_are_skip_lists_whose_anchor_is_never_counted(run: Callable[..., None]) -> None:
    """A sorted set written on every page stays a skip list with a few entries (its anchor, scored +inf):
    no claim, count or next time ever names the anchor."""
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        keys = ShardKeys(h.config.crawl_id)
        await f.enqueue([entry("http://a.test/1"), entry("http://b.test/1"), entry("http://c.test/1")])
        claim = await f.claim(T0, 2)
        assert (len(claim.claimed), claim.leased, claim.next_expiry_ms) == (2, 2, T0 + 10_000)
        for key in (keys.ready, keys.leases):
            assert await h.client.object("encoding", key) == b"skiplist"
            assert await h.client.zscore(key, ZSET_ANCHOR) == float("inf")
        f = await h.reopen()
        counts = await f.counts()
        assert (counts.leased, counts.ready_hosts) == (2, 0)  # both hosts in flight, c.test not yet opened
        last = await f.claim(T0, 5)
        assert [lease.host for lease, _ in last.claimed] == ["c.test"] and last.leased == 3
        assert last.next_ready_ms is None  # nothing left but the anchor
        await f.ack([Completion(lease.member, T0 + 1, T0 + 1) for lease, _ in claim.claimed + last.claimed])
        done = await f.claim(T0 + 1, 5)
        assert (done.claimed, done.leased, done.next_expiry_ms, done.expired) == ([], 0, None, 0)
        counts = await f.counts()
        assert (counts.leased, counts.queued) == (0, 0)

    run(body)


def test_expired_lease_returns_url_and_host(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2")])
        first = (await f.claim(T0, 1)).claimed[0]
        # The worker dies: no ack. Before expiry the host stays in flight.
        f = await h.reopen()
        assert (await f.claim(T0 + 9_999, 5)).claimed == []
        again = await f.claim(T0 + 10_000, 5)
        assert again.expired == 1
        assert [blob for _, blob in again.claimed] == [first[1]]  # the same URL, first in line
        # The dead worker's late ack is stale and does not release the host
        # that the new lease holds.
        assert await f.ack([Completion(first[0].member, T0 + 10_000, T0 + 10_000)]) == (0, 1)
        assert (await f.claim(T0 + 10_001, 5)).claimed == []
        assert await f.ack([Completion(again.claimed[0][0].member, T0 + 10_001, T0 + 10_001)]) == (1, 0)
        assert [b for _, b in (await f.claim(T0 + 10_001, 5)).claimed] == [b"http://a.test/2"]

    run(body)


def test_expired_lease_readies_its_host_a_politeness_delay_later(run: Callable[..., None]) -> None:
    """The worker whose lease expired may still have the host's fetch under way (it lost Redis): the
    host is claimable again the minimum delay after the expiry is seen, or its Crawl-delay floor."""
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1"), entry("http://b.test/1")])
        await f.set_host_delay("b.test", 5_000)
        assert len((await f.claim(T0, 5)).claimed) == 2
        f = await h.reopen()
        seen = await f.claim(T0 + 10_000, 5)
        assert (seen.expired, seen.claimed) == (2, [])
        assert (await f.claim(T0 + 11_999, 5)).claimed == []
        assert [b for _, b in (await f.claim(T0 + 12_000, 5)).claimed] == [b"http://a.test/1"]
        assert (await f.claim(T0 + 14_999, 5)).claimed == []
        assert [b for _, b in (await f.claim(T0 + 15_000, 5)).claimed] == [b"http://b.test/1"]

    run(body, min_delay=2.0)


def test_ack_is_idempotent(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2")])
        lease = (await f.claim(T0, 1)).claimed[0][0]
        done = Completion(lease.member, T0 + 1000, T0)
        # The same lease twice in one call counts once: the second is stale.
        assert await f.ack([done, Completion(lease.member, T0 + 5000, T0)]) == (1, 1)
        f = await h.reopen()
        assert await f.ack([done]) == (0, 1)
        assert await f.ack([done, done]) == (0, 2)
        counts = await f.counts()
        assert (counts.queued, counts.leased) == (1, 0)
        assert (await f.claim(T0 + 999, 1)).claimed == []  # the second ack did not move the time
        assert len((await f.claim(T0 + 1000, 1)).claimed) == 1

    run(body)


def test_release_gives_back_unfetched_leases(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2")])
        lease, blob = (await f.claim(T0, 1)).claimed[0]
        assert await f.release([lease.member], T0 + 1) == 1
        assert await f.release([lease.member], T0 + 1) == 0
        f = await h.reopen()
        assert [b for _, b in (await f.claim(T0 + 1, 1)).claimed] == [blob]

    run(body)


def test_priority_order_within_a_host(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/seed", level=1)])
        seed = (await f.claim(T0, 1)).claimed[0][0]  # a.test now owns a back queue
        await f.enqueue(
            [entry("http://a.test/low", 3), entry("http://a.test/normal", 1), entry("http://a.test/high", 0),
             entry("http://a.test/normal2", 1)]
        )
        await f.ack([Completion(seed.member, T0, T0)])
        f = await h.reopen()
        order = [blob for _, blob in await drain(f, T0)]
        assert order == [b"http://a.test/high", b"http://a.test/normal", b"http://a.test/normal2", b"http://a.test/low"]

    run(body)


def test_biased_selector_favours_high_priority_without_starving_low(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        # 60 hosts per level, one URL each; one back queue at a time, so the
        # selector alone decides the order.
        await f.enqueue([entry(f"http://l{level}-h{i}.test/", level) for level in range(4) for i in range(60)])
        levels: list[int] = []
        for _ in range(150):
            claim = await f.claim(T0, 1)
            if not claim.claimed:
                break
            lease = claim.claimed[0][0]
            levels.append(int(lease.host[1]))
            await f.ack([Completion(lease.member, T0, T0)])
            if len(levels) == 75:
                f = await h.reopen()
        first = Counter(levels[:75])
        # 8:4:2:1 of 75 picks = 40:20:10:5.
        assert first == {0: 40, 1: 20, 2: 10, 3: 5}
        # Level 3 keeps draining while higher levels still have URLs.
        assert levels[:15].count(3) == 1
        rest = await drain(f, T0)
        assert len(levels) + len(rest) == 240

    run(body, active_hosts=1)


def test_active_back_queues_are_bounded_and_refilled(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://h{i}.test/{j}") for i in range(20) for j in range(3)])
        claim = await f.claim(T0, 100)
        assert len(claim.claimed) == 5
        assert len({lease.host for lease, _ in claim.claimed}) == 5
        assert (await f.counts()).active_hosts == 5
        f = await h.reopen()
        await f.ack([Completion(lease.member, T0, T0) for lease, _ in claim.claimed])
        fetched = [blob for _, blob in claim.claimed] + [blob for _, blob in await drain(f, T0)]
        assert len(fetched) == 60 and len(set(fetched)) == 60
        counts = await f.counts()
        assert (counts.queued, counts.leased, counts.active_hosts) == (0, 0, 0)

    run(body, active_hosts=5)


def test_queued_counter_matches_queues(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://h{i}.test/{j}", level=j % 4) for i in range(10) for j in range(7)])
        claim = await f.claim(T0, 4)
        f = await h.reopen()
        counts = await f.counts()
        assert counts.leased == 4
        assert h.client is not None
        keys = f.keys
        back = 0
        for i in range(10):
            for level in range(f.config.levels):
                back += await h.client.llen(keys.queue(f"h{i}.test", level))
        assert counts.queued == back + sum(counts.front) == 70 - 4
        await f.release([lease.member for lease, _ in claim.claimed], T0)
        assert (await f.counts()).queued == 70

    run(body, active_hosts=4)


# -- outcomes: requeue, dead letters, host backoff ---------------------------------------

BACKOFF = BackoffPolicy(throttle_base=2.0, throttle_max=10.0, park_after=2, park_base=4.0, park_max=20.0)


async def _one(f: RedisFrontier, now: int) -> Lease:
    claim = await f.claim(now, 1)
    assert len(claim.claimed) == 1, claim
    return claim.claimed[0][0]


def test_requeue_returns_the_url_with_its_new_request_not_before_the_given_time(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1")])
        lease = await _one(f, T0)
        done = Completion(lease.member, T0 + 10, T0, action=LeaseAction.REQUEUE, not_before_ms=T0 + 5000,
                          blob=b"retry-1", host_signal=HostSignal.NEUTRAL)
        result = await f.step(Step(completions=[done], now_ms=T0))
        assert (result.acked, result.requeued) == (1, 1)
        f = await h.reopen()
        assert (await f.counts()).queued == 1
        assert (await f.claim(T0 + 4999, 1)).claimed == []
        assert [b for _, b in (await f.claim(T0 + 5000, 1)).claimed] == [b"retry-1"]

    run(body)


def test_dead_letters_are_kept_listed_and_revived(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1", level=2), entry("http://a.test/2")])
        lease = await _one(f, T0)
        done = Completion(lease.member, T0, T0, action=LeaseAction.DEAD, error="DownloadTimeoutError",
                          message="took\tlonger\nthan 30 s")
        assert (await f.step(Step(completions=[done], now_ms=T0))).dead == 1
        f = await h.reopen()
        letters = await f.dead_letters()
        assert len(letters) == 1
        letter = letters[0]
        assert (letter.host, letter.error, letter.message) == ("a.test", "DownloadTimeoutError", "took longer than 30 s")
        assert letter.blob in (b"http://a.test/1", b"http://a.test/2")
        assert (await f.counts()).queued == 1
        assert await f.revive([(letter.request_id, b"")]) == 1
        assert await f.revive([(letter.request_id, b"")]) == 0
        assert await f.dead_letters() == []
        fetched = [b for _, b in await drain(f, T0 + 1)]
        assert sorted(fetched) == [b"http://a.test/1", b"http://a.test/2"]

    run(body)


def test_throttled_host_backs_off_exponentially_and_decays(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = RedisFrontier(h.frontier.client, h.frontier.keys, h.config, BACKOFF, SEEN)  # type: ignore[union-attr]
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(8)])
        now = T0
        waits = []
        signals = [HostSignal.THROTTLED] * 4 + [HostSignal.OK] * 2 + [HostSignal.THROTTLED]
        for signal in signals:
            lease = await _one(f, now)
            await f.ack([Completion(lease.member, now, now, host_signal=signal)])
            ready = (await f.claim(now, 0)).next_ready_ms
            assert ready is not None
            waits.append(ready - now)
            now = ready
        # Levels 1, 2, 3, 4 (capped at 10 s); two successes (no extra rest)
        # bring the level down to 2, so the next throttle is level 3 again.
        assert waits == [int(BACKOFF.throttle_delay(n) * 1000) for n in (1, 2, 3, 4)] + [0, 0] + [
            int(BACKOFF.throttle_delay(3) * 1000)
        ]
        assert waits == [2000, 4000, 8000, 10000, 0, 0, 8000]

    run(body)


def test_failing_host_is_parked_after_consecutive_failures_and_reset_by_success(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = RedisFrontier(h.frontier.client, h.frontier.keys, h.config, BACKOFF, SEEN)  # type: ignore[union-attr]
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(6)])
        now = T0
        rests = []
        for signal in (HostSignal.FAILED, HostSignal.FAILED, HostSignal.FAILED, HostSignal.OK, HostSignal.FAILED):
            lease = await _one(f, now)
            result = await f.step(Step(completions=[Completion(lease.member, now, now, host_signal=signal)], now_ms=now))
            ready = (await f.claim(now, 0)).next_ready_ms
            assert ready is not None
            rests.append((ready - now, result.parked))
            now = ready
        assert rests == [
            (0, 0),
            (int(BACKOFF.park_delay(2) * 1000), 1),
            (int(BACKOFF.park_delay(3) * 1000), 1),
            (0, 0),
            (0, 0),  # the success reset the count
        ] == [(0, 0), (4000, 1), (8000, 1), (0, 0), (0, 0)]

    run(body)


# -- the seen set and budgets ----------------------------------------------------------


def test_bloom_false_positive_never_loses_a_url(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        victim = entry("http://a.test/never-seen")
        # Set the victim's Bloom bits as if another URL had set them.
        for position in struct.unpack(f"<{SEEN.bloom_hashes}I", victim.bloom_positions):
            await h.client.setbit(f.keys.bloom, position, 1)
        result = await f.step(Step(enqueues=[victim], now_ms=T0))
        assert (result.added, result.duplicates, result.bloom_false_positives) == (1, 0, 1)
        f = await h.reopen()
        assert (await f.step(Step(enqueues=[entry("http://a.test/never-seen")], now_ms=T0))).duplicates == 1
        # An exact-only check skips the filter and still finds it.
        assert (await f.step(Step(enqueues=[entry("http://a.test/never-seen", exact_only=True)], now_ms=T0))).duplicates == 1
        assert (await f.step(Step(enqueues=[entry("http://a.test/other", exact_only=True)], now_ms=T0))).added == 1

    run(body)


def test_bloom_bits_not_yet_written_never_enqueue_a_url_twice(run: Callable[..., None]) -> None:
    """The worker writes a URL's Bloom bits after the enqueue script, in the same round trip: another
    worker's enqueue may run in between and find the bits at 0. The exact store's answer (SADD) decides."""
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        url = "http://a.test/raced"
        assert (await f.step(Step(enqueues=[entry(url)], now_ms=T0))).added == 1
        positions = struct.unpack(f"<{SEEN.bloom_hashes}I", entry(url).bloom_positions)
        assert all([await h.client.getbit(f.keys.bloom, p) for p in positions])  # written by the step
        queued = (await f.counts()).queued
        for position in positions:  # as if the first worker had not written them yet
            await h.client.setbit(f.keys.bloom, position, 0)
        result = await f.step(Step(enqueues=[entry(url)], now_ms=T0))
        assert (result.added, result.duplicates, result.bloom_false_positives) == (0, 1, 0)
        assert (await f.counts()).queued == queued
        assert all([await h.client.getbit(f.keys.bloom, p) for p in positions])  # written again

    run(body)


def test_a_crawls_bloom_hash_count_is_its_own(contract_redis: RedisServer, crawl_id: str) -> None:
    """The first worker records the filter's size and hash count; a worker with other settings keeps
    them, and a crawl recorded before counts were keeps the count its size gave (positions it set)."""
    from scrapy.settings import Settings

    from crawler.frontier.seen import bits_for
    from crawler.frontier.sizing import crawl_sizes

    def settings(hashes: int, expected: int) -> Settings:
        return Settings({"SEEN_BLOOM_HASHES": hashes, "SEEN_EXPECTED_URLS": expected, "SEEN_FALSE_POSITIVE_RATE": 0.01,
                         "PRIORITY_INLINK_CELLS": 4096})

    async def main() -> None:
        client = Redis.from_url(contract_redis.url)
        try:
            router = ShardRouter(crawl_id)
            first = await crawl_sizes(client, router, settings(4, 100_000), 0)
            assert (first.seen.bloom_bits, first.seen.bloom_hashes) == (bits_for(100_000, 0.01, 4), 4)
            other = await crawl_sizes(client, router, settings(7, 300_000), 0)
            assert (other.seen.bloom_bits, other.seen.bloom_hashes) == (first.seen.bloom_bits, 4)
            # A crawl recorded before: its size only (sized for 7 hashes then).
            old = ShardRouter(crawl_id + "old")
            await client.hset(old.crawl_keys.crawl_key("meta"), "bloom_bits", bits_for(100_000, 0.01, 7))
            kept = await crawl_sizes(client, old, settings(4, 100_000), 0)
            assert (kept.seen.bloom_bits, kept.seen.bloom_hashes) == (bits_for(100_000, 0.01, 7), 7)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_a_revisit_whose_record_is_gone_is_skipped(run: Callable[..., None]) -> None:
    """A queued revisit ("@<URL key>") whose URL record is gone (a damaged store) is counted and
    skipped, per host."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        hosts = ["w.test", "x.test", "y.test", "z.test"]
        await f.enqueue([entry(f"http://{host}/") for host in hosts])
        first = (await f.claim(T0, 10)).claimed
        assert len(first) == 4  # every host owns a back queue now
        await f.enqueue([entry(f"http://{host}/{i}") for host in hosts for i in (1, 2)])
        await f.ack([Completion(lease.member, T0, T0) for lease, _ in first])
        # y.test has a revisit of a URL without a record at the head of its queue; z.test has
        # only two such revisits.
        await h.client.rpush(f.keys.queue("y.test", 1), b"@1001")
        await h.client.delete(f.keys.queue("z.test", 1))
        await h.client.rpush(f.keys.queue("z.test", 1), b"@1003", b"@1002")
        await h.client.incrby(f.keys.queued, 1)
        f = await h.reopen()
        claim = await f.claim(T0, 10)
        assert sorted(blob.decode() for _, blob in claim.claimed) == [
            "http://w.test/1", "http://x.test/1", "http://y.test/1"]
        assert claim.missing == 3
        assert not await h.client.sismember(f.keys.active, "z.test")
        assert {lease.host for lease, _ in claim.claimed} == {"w.test", "x.test", "y.test"}

    run(body)


def test_a_large_call_stores_every_url_once_in_order(run: Callable[..., None]) -> None:
    """One enqueue call large enough that each of its gathered writes goes out in several chunks."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/")])
        (lease, _), = (await f.claim(T0, 1)).claimed  # a.test owns a back queue from now on
        own = [entry(f"http://a.test/{i}") for i in range(2100)]
        other = [entry(f"http://h{i % 100}.test/{i}") for i in range(4500)]
        # Each URL twice in the same call: the second is a duplicate.
        added, duplicates = await f.enqueue(own + other + own[:50] + other[:50])
        assert (added, duplicates) == (6600, 100)
        # Every URL's Bloom bits and in-link cells are written, across the step's BITFIELD commands of
        # BITFIELD_CHUNK operations each: a discovery counts once, a URL sent twice twice.
        assert h.client is not None
        keys, pipe = ShardKeys(h.config.crawl_id), h.client.pipeline(transaction=False)
        for e in own + other:
            offsets = list(POSITIONS[SEEN.bloom_hashes].unpack(e.bloom_positions))
            for offset in offsets:
                pipe.getbit(keys.bloom, offset)
            first, *cells = sketch_offsets(offsets, 4096)
            pipe.bitfield_ro(keys.inlinks, "u8", first, [("u8", cell) for cell in cells])
        replies = iter(await pipe.execute())
        for n in range(len(own) + len(other)):
            assert [next(replies) for _ in range(SEEN.bloom_hashes)] == [1] * SEEN.bloom_hashes
            sent = 2 if n < 50 or len(own) <= n < len(own) + 50 else 1
            assert min(next(replies)) >= sent
        f = await h.reopen()
        assert await f.enqueue(own[::7] + other[::7]) == (0, len(own[::7]) + len(other[::7]))
        await f.ack([Completion(lease.member, T0, T0)])
        claimed = await drain(f, T0, per_claim=200)
        urls = [blob.decode() for _, blob in claimed]
        assert sorted(urls) == sorted(e.blob.decode() for e in own + other)
        assert [url for url in urls if url.startswith("http://a.test/")] == [e.blob.decode() for e in own]

    run(body, enqueue_batch=10_000, inlink_cells=4096)


def test_exact_store_stays_compact(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        await f.enqueue([entry(f"http://h{i % 50}.test/{i}") for i in range(2000)])
        buckets = [key async for key in h.client.scan_iter(match=f.keys.seen_exact(0)[:-1] + "*")]
        # Linear hashing split the store as it grew: several buckets, each an intset.
        assert len(buckets) >= 2000 // f.sizes.seen
        assert {await h.client.object("encoding", key) for key in buckets} == {b"intset"}
        # Every URL is still found in its bucket after the splits.
        assert await f.enqueue([entry(f"http://h{i % 50}.test/{i}") for i in range(2000)]) == (0, 2000)

    run(body)


def test_host_and_domain_page_budgets_hold(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        result = await f.step(Step(enqueues=[entry(f"http://a.farm.test/{i}") for i in range(5)], now_ms=T0))
        assert (result.added, result.over_host_budget) == (3, 2)
        f = await h.reopen()
        result = await f.step(Step(enqueues=[entry(f"http://{n}.farm.test/") for n in "bcdef"], now_ms=T0))
        # farm.test already holds 3 of its 5: two more hosts fit.
        assert (result.added, result.over_domain_budget) == (2, 3)
        # A URL over budget is not recorded as seen: it is dropped again, not a duplicate.
        result = await f.step(Step(enqueues=[entry("http://a.farm.test/4")], now_ms=T0))
        assert (result.over_host_budget, result.duplicates) == (1, 0)

    run(body, host_page_budget=3, domain_page_budget=5)


# -- the recrawl schedule: due set, drain, sitemap touches; the in-link sketch ----------------


async def fetched_record(h: Harness, url: str, fetched_s: int) -> None:
    """Record a fetch of ``url`` the way the metadata pipeline does (a revisit needs its URL record)."""
    from crawler.metadata.recordstore import UrlMetadataStore, UrlRecord, UrlState

    normalized, host = normalize_url(url)
    assert h.client is not None
    store = UrlMetadataStore(h.client, ShardRouter(h.config.crawl_id))
    await store.open()
    await store.record(normalized, host, UrlRecord(UrlState.FETCHED, fetched_s, 200, url=normalized, host=host))
    await store.close()


def revisit_url(blob: bytes) -> str:
    """The URL of a claimed revisit: "#" and the URL's record."""
    from crawler.metadata.recordstore import UrlRecord

    assert blob.startswith(b"#"), blob
    return UrlRecord.unpack(blob[1:]).url


def test_due_set_schedule_drain_and_touch(run: Callable[..., None]) -> None:
    from crawler.frontier.due import DueSchedule, Revisit
    from crawler.frontier.redisfrontier import Touch
    from crawler.metadata.recordstore import UrlMetadataStore

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        router = ShardRouter(h.config.crawl_id)
        schedule = DueSchedule(h.client, router)
        await schedule.open()
        t0 = T0 // 1000
        urls = [f"http://a.test/{i}" for i in range(5)]
        for u in urls:
            await fetched_record(h, u, t0 - 100)
        # A URL without a record is not scheduled.
        none = "http://a.test/none"
        revisits = [Revisit(url_key(url_fingerprint(u)), t0 + i * 60, 1, "a.test", T0 * 1000 + i)
                    for i, u in enumerate(urls)]
        missing = Revisit(url_key(url_fingerprint(none)), t0, 1, "a.test", 0)
        assert await schedule.schedule([*revisits, missing]) == 5
        assert await schedule.schedule(revisits[:1]) == 1  # again: moved, not doubled
        store = UrlMetadataStore(h.client, router)
        await store.open()
        record = await store.get(urls[0], "a.test")
        assert record is not None
        assert (record.next_visit, record.level, record.captured) == (t0, 1, T0 * 1000)
        f = await h.reopen()
        # Nothing due before T0.
        result = await f.step(Step(drain_at_ms=T0 - 1000))
        assert result.drain is not None
        assert (result.drain.moved, result.drain.due_now, result.drain.next_due_ms, result.drain.scheduled) == (
            0, 0, T0, 5)
        # Two due at T0 + 1 min, drained in batches of one (FRONTIER's due_batch is set to 1).
        result = await f.step(Step(drain_at_ms=T0 + 60_000))
        assert result.drain is not None and (result.drain.moved, result.drain.due_now) == (1, 1)
        result = await f.step(Step(drain_at_ms=T0 + 60_000))
        assert result.drain is not None and (result.drain.moved, result.drain.due_now) == (1, 0)
        assert result.drain.next_due_ms == T0 + 120_000
        # A revisit is queued as a reference to its record, and handed out as the record.
        claimed = await drain(f, T0)
        assert sorted(revisit_url(blob) for _, blob in claimed) == urls[:2]
        # A sitemap says /4 changed after its last fetch: due now. A URL that is not in the
        # schedule is never touched.
        result = await f.step(Step(touches=[Touch(url_key(url_fingerprint(urls[4])), t0),
                                       Touch(url_key(url_fingerprint(none)), t0)],
                              crawl_now_ms=T0 + 1000))
        assert result.touched == 1
        result = await f.step(Step(drain_at_ms=T0 + 1000))
        assert result.drain is not None and result.drain.moved == 1
        assert [revisit_url(blob) for _, blob in await drain(f, T0 + 1000)] == [urls[4]]
        assert (await f.step(Step(drain_at_ms=T0 + 1000))).drain.scheduled == 2  # type: ignore[union-attr]
        await schedule.close()
        await store.close()

    run(body, due_batch=1)


def test_the_schedule_splits_into_buckets_and_drains_in_time_order(run: Callable[..., None]) -> None:
    """Many revisits, half at scattered times and half at one time: the schedule's buckets stay small
    sorted sets (listpacks), and drain hands them out in due order, every one once."""
    import random

    from crawler.frontier.due import DueSchedule, Revisit

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        t0 = T0 // 1000
        urls = [f"http://d{i % 7}.test/{i}" for i in range(600)]
        for u in urls:
            await fetched_record(h, u, t0 - 100)
        rng = random.Random(7)
        # Half at scattered times, half in one second (pages fetched together, one interval).
        due = {u: t0 + (rng.randrange(0, 10_000) if i % 2 else 5_000) for i, u in enumerate(urls)}
        schedule = DueSchedule(h.client, ShardRouter(h.config.crawl_id))
        await schedule.open()
        assert await schedule.schedule(
            [Revisit(url_key(url_fingerprint(u)), due[u], 1, normalize_url(u)[1], 0) for u in urls]) == 600
        buckets = await h.client.zrange(f.keys.due, 0, -1)
        assert len(buckets) >= 600 // f.sizes.due
        for bucket in buckets:
            assert await h.client.object("encoding", f.keys.due_bucket(int(bucket))) == b"listpack"
            # The sizes a run keeps for itself (due.lua DUE_RUN) split each bucket in time.
            assert 0 < await h.client.zcard(f.keys.due_bucket(int(bucket))) <= f.sizes.due + 1
        # Counted once at the end of the run, as many as were scheduled.
        assert int(await h.client.get(f.keys.due_count)) == 600
        f = await h.reopen()
        order = []
        for step_s in range(0, 10_001, 500):
            result = await f.step(Step(drain_at_ms=(t0 + step_s) * 1000))
            assert result.drain is not None
            for _, blob in await drain(f, T0):
                order.append(revisit_url(blob))
        assert sorted(order) == sorted(urls)
        # Drained in windows of 500 s (a drain at s takes what is due in (s - 500, s]): no URL came
        # out before one due a window earlier.
        windows = [-(-(due[u] - t0) // 500) for u in order]
        assert windows == sorted(windows)
        await schedule.close()

    run(body, due_batch=10_000)


def test_a_run_of_schedule_calls_files_no_entry_in_a_bucket_it_removed(run: Callable[..., None]) -> None:
    """Calls batched into one run (``crawler_schedule_many``), in order: x due at t + 3000 (a bucket), a
    and b due at t (a bucket below it, which the run remembers for t: due.lua due_find), both moved to
    t + 4000 (into x's bucket: theirs empties and leaves the index), then c due at t: c must go to a
    bucket the index holds (what the run remembered of the index is forgotten when a bucket goes), and
    drain must hand all four out."""
    from crawler.crawlstate.schema import due_entry_time
    from crawler.frontier.due import DueSchedule, Revisit

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        t0 = T0 // 1000
        urls = ["http://m.test/x", "http://m.test/a", "http://m.test/b", "http://m.test/c"]
        for u in urls:
            await fetched_record(h, u, t0 - 100)
        x, a, b, c = (url_key(url_fingerprint(u)) for u in urls)
        schedule = DueSchedule(h.client, ShardRouter(h.config.crawl_id))
        await schedule.open()
        moves = [(x, t0 + 4000), (a, t0 + 1000), (b, t0 + 1000), (a, t0 + 5000), (b, t0 + 5000), (c, t0 + 1000)]
        # One event-loop turn: one run of six calls, in this order.
        scheduled = await asyncio.gather(*(schedule.schedule([Revisit(key, at, 1, "m.test", 0)])
                                           for key, at in moves))
        assert scheduled == [1] * 6
        indexed = {}
        for bucket, bound in await h.client.zrange(f.keys.due, 0, -1, withscores=True):
            for member, score in await h.client.zrange(f.keys.due_bucket(int(bucket)), 0, -1, withscores=True):
                indexed[int(member)] = due_entry_time(bound, score)
        assert indexed == {x: t0 + 4000, a: t0 + 5000, b: t0 + 5000, c: t0 + 1000}
        assert int(await h.client.get(f.keys.due_count)) == 4
        f = await h.reopen()
        await f.step(Step(drain_at_ms=(t0 + 6000) * 1000))
        assert sorted(revisit_url(blob) for _, blob in await drain(f, T0)) == sorted(urls)
        await schedule.close()

    run(body)


def test_touch_respects_the_last_fetch(run: Callable[..., None]) -> None:
    from crawler.frontier.due import DueSchedule, Revisit
    from crawler.frontier.redisfrontier import Touch

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        url = "http://b.test/page"
        key = url_key(url_fingerprint(url))
        fetched = T0 // 1000
        await fetched_record(h, url, fetched)
        schedule = DueSchedule(h.client, ShardRouter(h.config.crawl_id))
        await schedule.open()
        await schedule.schedule([Revisit(key, fetched + 86_400, 1, "b.test", 0)])
        older = await f.step(Step(touches=[Touch(key, fetched - 10)], crawl_now_ms=T0 + 5000))
        assert older.touched == 0
        newer = await f.step(Step(touches=[Touch(key, fetched + 10)], crawl_now_ms=T0 + 5000))
        assert newer.touched == 1
        # Due now: the next drain at that time moves it.
        drained = await f.step(Step(drain_at_ms=T0 + 5000))
        assert drained.drain is not None and drained.drain.moved == 1
        await schedule.close()

    run(body)


def test_inlink_sketch_counts_every_discovery(run: Callable[..., None]) -> None:
    from crawler.metadata.recordstore import UrlMetadataStore, UrlRecord, UrlState

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        popular, rare = "http://c.test/popular", "http://c.test/rare"
        # Found 7 times (new once, then duplicates), and once.
        await f.enqueue([entry(popular) for _ in range(7)] + [entry(rare)])
        keys = ShardKeys(h.config.crawl_id)
        store = UrlMetadataStore(h.client, ShardRouter(h.config.crawl_id), inlink_cells=h.config.inlink_cells)
        await store.open()
        counts = {}
        for url in (popular, rare):
            positions = bloom_offsets(url_fingerprint(url), SEEN.bloom_bits, SEEN.bloom_hashes)
            observation = await store.record(url, "c.test", UrlRecord(UrlState.FETCHED, T0 // 1000, 200),
                                             flags=2 if url == rare else 0, inlink_positions=positions)
            counts[url] = observation
        assert counts[popular].inlinks == 7 and counts[rare].inlinks == 1
        # The host's counters: two pages, one near duplicate.
        assert (counts[rare].host_pages, counts[rare].host_errors, counts[rare].host_near_duplicates) == (2, 0, 1)
        # Bounded: one string of the configured number of cells, at most.
        assert await h.client.strlen(keys.inlinks) <= h.config.inlink_cells
        await store.close()

    run(body, inlink_cells=4096)


def test_storing_a_page_twice_is_storing_it_once(run: Callable[..., None]) -> None:
    from crawler.metadata.recordstore import UrlMetadataStore, UrlRecord, UrlState

    async def body(h: Harness) -> None:
        assert h.client is not None
        store = UrlMetadataStore(h.client, ShardRouter(h.config.crawl_id), repeat_window=600)
        await store.open()
        url, host = "http://r.test/page", "r.test"
        t = T0 // 1000

        def fetch(at: int, digest: bytes = b"D" * 8) -> UrlRecord:
            return UrlRecord(UrlState.FETCHED, at, 200, digest=digest[:4], simhash8=b"S" * 8, url=url, host=host)

        first = await store.record(url, host, fetch(t))
        stored = await store.get(url, host)
        # The same page again (a lease expired and the URL was fetched again): nothing changes.
        again = await store.record(url, host, fetch(t + 45))
        assert again.repeat and not first.repeat
        # The first worker's record arriving after the second's (it waited out a Redis outage).
        late = await store.record(url, host, fetch(t - 5))
        assert late.repeat and late.observations == first.observations
        assert (again.observations, again.changes, again.host_pages) == (first.observations, first.changes, 1)
        assert await store.get(url, host) == stored
        # A revisit after the window is an observation; new content inside the window is one too.
        later = await store.record(url, host, fetch(t + 700))
        assert (later.repeat, later.observations, later.changes, later.host_pages) == (False, 2, 0, 2)
        changed = await store.record(url, host, fetch(t + 710, b"E" * 8))
        assert (changed.repeat, changed.observations, changed.host_pages) == (False, 3, 3)
        await store.close()

    run(body)


# -- the active set sized by need, sleeping hosts, robots.txt first ----------------------------


def test_hosts_are_opened_by_need_and_the_set_shrinks_when_hosts_are_plentiful(run: Callable[..., None]) -> None:
    """A claim opens as many new hosts as it lacks ready ones; with enough ready, none."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://h{i}.test/{j}") for i in range(10) for j in range(2)])
        first = await f.claim(T0, 3)
        assert (first.opened, len(first.claimed), (await f.counts()).active_hosts) == (3, 3, 3)
        # Each host's URLs moved into its back queue (its entries reached the head).
        assert first.moved == 6
        f = await h.reopen()
        await f.ack([Completion(lease.member, T0 + 1000, T0) for lease, _ in first.claimed])
        # Scarce: nothing ready before T0 + 1000, so a claim of 2 opens 2 more hosts.
        scarce = await f.claim(T0 + 10, 2)
        assert (scarce.opened, len(scarce.claimed), (await f.counts()).active_hosts) == (2, 2, 5)
        await f.ack([Completion(lease.member, T0 + 1000, T0 + 10) for lease, _ in scarce.claimed])
        # Plentiful: 5 hosts ready at T0 + 1000, a claim of 4 opens none.
        plenty = await f.claim(T0 + 1000, 4)
        assert (plenty.opened, len(plenty.claimed)) == (0, 4)
        # Those 4 ran dry: they leave, and no host was opened in their place.
        await f.ack([Completion(lease.member, T0 + 2000, T0 + 1000) for lease, _ in plenty.claimed])
        counts = await f.counts()
        assert (counts.active_hosts, counts.front[1]) == (1, 10)  # 5 hosts still in the front queue

    run(body)


def test_awake_hosts_are_bounded(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://h{i}.test/") for i in range(10)])
        claim = await f.claim(T0, 10)
        assert len(claim.claimed) == 4 and (await f.counts()).active_hosts == 4

    run(body, active_hosts=4)


def test_a_host_that_must_wait_long_sleeps_and_wakes_with_its_queue(run: Callable[..., None]) -> None:
    """Beyond the horizon (30 s here) a host leaves the awake set, keeps its queue in order, wakes when due."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(4)] + [entry(f"http://b.test/{i}") for i in range(2)])
        claim = await f.claim(T0, 2)
        lease_a = next(lease for lease, _ in claim.claimed if lease.host == "a.test")
        lease_b = next(lease for lease, _ in claim.claimed if lease.host == "b.test")
        # a.test: Retry-After of 10 minutes (a requeue not before then); b.test: a short delay.
        await f.step(Step(completions=[
            Completion(lease_a.member, T0 + 1000, T0, action=LeaseAction.REQUEUE, not_before_ms=T0 + 600_000,
                       host_signal=HostSignal.THROTTLED),
            Completion(lease_b.member, T0 + 29_000, T0),
        ], now_ms=T0))
        counts = await f.counts()
        assert (counts.active_hosts, counts.sleeping, counts.awake_hosts, counts.ready_hosts) == (2, 1, 1, 1)
        assert counts.queued == 5
        f = await h.reopen()
        # The sleeping host is never claimed before its wake time.
        assert [b for _, b in (await f.claim(T0 + 599_999, 10)).claimed] == [b"http://b.test/1"]
        woken = await f.claim(T0 + 600_000, 10)
        assert woken.woken == 1
        assert [b for _, b in woken.claimed] == [b"http://a.test/0"]  # its queue, in order
        counts = await f.counts()
        assert (counts.sleeping, counts.queued) == (0, 3)

    run(body)


def test_a_silent_host_is_parked_at_once_and_a_success_unparks_it(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = RedisFrontier(h.frontier.client, h.frontier.keys, h.config, BACKOFF, SEEN)  # type: ignore[union-attr]
        await f.enqueue([entry(f"http://a.test/{i}") for i in range(3)])
        lease = await _one(f, T0)
        result = await f.step(Step(completions=[Completion(lease.member, T0 + 100, T0, host_signal=HostSignal.SILENT)],
                              now_ms=T0))
        assert result.parked == 1
        counts = await f.counts()
        assert counts.parked == 1
        assert (await f.claim(T0 + int(BACKOFF.park_delay(BACKOFF.park_after) * 1000) - 1, 1)).claimed == []
        lease = await _one(f, T0 + int(BACKOFF.park_delay(BACKOFF.park_after) * 1000))
        await f.ack([Completion(lease.member, T0 + 5000, T0 + 4000)])
        assert (await f.counts()).parked == 0

    run(body)


def test_a_request_that_never_reached_the_host_costs_no_delay(run: Callable[..., None]) -> None:
    """next_allowed 0 (a middleware ended the request before the network): ready at once, floor or not."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.set_host_delay("a.test", 5000)
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2")])
        lease = await _one(f, T0)
        await f.ack([Completion(lease.member, 0, T0 + 10)])
        assert len((await f.claim(T0 + 10, 1)).claimed) == 1

    run(body)


def test_robots_txt_is_a_hosts_first_request(run: Callable[..., None]) -> None:
    """A host without a robots.txt decision is handed out as a robots.txt lease, its page kept queued."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None and h.client is not None
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2")])
        claim = await f.claim(T0, 5)
        [(lease, blob)] = claim.claimed
        assert lease.robots and blob == b"http://a.test/1"
        assert (claim.queued, (await f.counts()).queued) == (2, 2)  # the page stays queued
        # Its worker dies: the lease expires and the host comes back, the page not duplicated.
        f = await h.reopen()
        again = await f.claim(T0 + 10_000, 5)
        assert again.expired == 1 and [lease.robots for lease, _ in again.claimed] == [True]
        # The decision is shared (the robots store writes the host's until-time), the lease done.
        await h.client.hset(f.keys.host_robots, "a.test", T0 + 86_400_000)
        await f.ack([Completion(again.claimed[0][0].member, T0 + 11_000, T0 + 10_000)])
        [(page, blob)] = (await f.claim(T0 + 11_000, 5)).claimed
        assert (page.robots, blob) == (False, b"http://a.test/1")
        await f.ack([Completion(page.member, T0 + 12_000, T0 + 11_000)])
        # Once the decision expires, robots.txt comes first again.
        [(lease, _)] = (await f.claim(T0 + 86_400_000, 5)).claimed
        assert lease.robots
        # A page whose origin has no decision sends the host back to robots.txt first.
        await h.client.hset(f.keys.host_robots, "a.test", T0 + 2 * 86_400_000)
        await f.ack([Completion(lease.member, T0 + 86_401_000, T0 + 86_400_000)])
        [(page, _)] = (await f.claim(T0 + 86_401_000, 5)).claimed
        assert not page.robots
        await f.ack([Completion(page.member, 0, T0 + 86_401_000, action=LeaseAction.REQUEUE,
                                host_signal=HostSignal.ROBOTS_MISSING)])
        [(lease, blob)] = (await f.claim(T0 + 86_401_000, 5)).claimed
        assert lease.robots and blob == b"http://a.test/2"

    run(body, robots_first=True)


def test_a_robots_lease_given_up_on_dead_letters_the_hosts_queue(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry("http://a.test/1"), entry("http://a.test/2"), entry("http://b.test/1")])
        claim = await f.claim(T0, 5)
        lease = next(lease for lease, _ in claim.claimed if lease.host == "a.test")
        assert lease.robots
        result = await f.step(Step(completions=[Completion(lease.member, T0 + 100, T0, action=LeaseAction.DEAD,
                                                      error="robots_unreachable", message="5 times")], now_ms=T0))
        assert result.dead == 2
        dead = await f.dead_letters()
        assert sorted((d.host, d.error, d.blob) for d in dead) == [
            ("a.test", "robots_unreachable", b"http://a.test/1"), ("a.test", "robots_unreachable", b"http://a.test/2")]
        counts = await f.counts()
        assert (counts.queued, counts.active_hosts) == (1, 1)  # b.test's page; a.test left
        f = await h.reopen()
        assert await f.revive([(d.request_id, b"") for d in dead]) == 2

    run(body, robots_first=True)


# -- politeness groups: by registered domain, by address ------------------------------------


def test_several_requests_per_domain_when_asked(run: Callable[..., None]) -> None:
    """FRONTIER_CONCURRENCY_PER_KEY = 2 by registered domain: at most 2 of the domain's requests in flight,
    whichever of its hosts they go to, one start per spacing (the minimum delay / k); an ack lets a waiting
    host go."""

    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://{name}.farm.example/{i}") for name in ("a", "b", "c") for i in range(3)])
        first = (await f.claim(T0, 10)).claimed
        assert len(first) == 1  # one start per group per spacing (100 ms / 2)
        assert (await f.claim(T0 + 49, 10)).claimed == []
        second = (await f.claim(T0 + 50, 10)).claimed
        assert len(second) == 1
        f = await h.reopen()
        # Two in flight: the group is full, long after the gap.
        assert (await f.claim(T0 + 5000, 10)).claimed == []
        assert (await f.counts()).leased == 2
        await f.ack([Completion(first[0][0].member, T0 + 5000, T0 + 5000)])
        third = (await f.claim(T0 + 5100, 10)).claimed
        assert len(third) == 1
        assert (await f.claim(T0 + 9000, 10)).claimed == []
        # Every request acked: the domain's 9 pages all go out, never more than 2 at once.
        held = [second[0][0], third[0][0]]
        now, fetched = T0 + 9000, 3
        while held or fetched < 9:
            await f.ack([Completion(held.pop(0).member, now, now)])
            now += 1000
            for _ in range(2):
                claimed = (await f.claim(now, 10)).claimed
                held += [lease for lease, _ in claimed]
                fetched += len(claimed)
                now += 100
            assert len(held) <= 2
        assert fetched == 9

    run(body, politeness_key=PolitenessKey.DOMAIN, per_key=2, min_delay=0.1)


def test_hosts_of_one_domain_share_one_clock_and_one_request_in_flight(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        await f.enqueue([entry(f"http://{name}.farm.example/{i}") for name in ("a", "b", "c") for i in range(3)]
                        + [entry("http://other.example/0")])
        claim = await f.claim(T0, 10)
        hosts = sorted(lease.host for lease, _ in claim.claimed)
        assert len(hosts) == 2 and "other.example" in hosts  # one of farm.example's three, and the other domain
        farm = next(lease for lease, _ in claim.claimed if lease.host != "other.example")
        # farm.example is in flight: none of its hosts, until the ack.
        assert (await f.claim(T0 + 5, 10)).claimed == []
        f = await h.reopen()
        await f.ack([Completion(farm.member, T0 + 1000, T0 + 100)])
        assert (await f.claim(T0 + 999, 10)).claimed == []
        # At the domain's next allowed time, a host that waited goes first; the acked one queues behind it.
        order = []
        now = T0 + 1000
        for _ in range(5):
            [(lease, _)] = (await f.claim(now, 10)).claimed
            order.append(lease.host)
            await f.ack([Completion(lease.member, now + 1000, now)])
            assert (await f.claim(now + 999, 10)).claimed == []
            now += 1000
        assert order[0] != farm.host and len(set(order[:2]) | {farm.host}) == 3, order
        # A worker that dies gives its group back when its lease expires.
        [(lease, _)] = (await f.claim(now, 10)).claimed
        farm_claims = [lease for lease, _ in (await f.claim(now + 9_999, 10)).claimed if lease.host != "other.example"]
        assert farm_claims == []
        again = [lease for lease, _ in (await f.claim(now + 10_000, 10)).claimed if lease.host != "other.example"]
        assert len(again) == 1

    run(body, politeness_key=PolitenessKey.DOMAIN)


def test_hosts_of_one_address_share_one_clock(run: Callable[..., None]) -> None:
    async def body(h: Harness) -> None:
        f = h.frontier
        assert f is not None
        entries = [entry(f"http://n{i}.test/0")._replace(group="192.0.2.7") for i in range(4)]
        entries.append(entry("http://elsewhere.test/0")._replace(group="192.0.2.8"))
        await f.enqueue(entries)
        claim = await f.claim(T0, 10)
        assert len(claim.claimed) == 2  # one host of 192.0.2.7, and elsewhere.test
        fetched = 2
        now = T0
        while fetched < 5:
            leases = [lease for lease, _ in claim.claimed]
            await f.ack([Completion(lease.member, now + 500, now) for lease in leases])
            now += 500
            claim = await f.claim(now, 10)
            assert len(claim.claimed) == 1
            fetched += 1
        assert (await f.counts()).queued == 0

    run(body, politeness_key=PolitenessKey.IP)
