"""The frontier's mechanism: Mercator queues kept in Redis, changed only by Lua scripts.

One :class:`RedisFrontier` per shard. Its keys are named in
:mod:`crawler.crawlstate.keys`; docs/frontier.md describes them (front queues per
priority level, back queues per host and level, the ready heap, sleeping and
cooling hosts, robots.txt decisions, leases, the seen set, URL records) and
docs/sizing.md what each costs.

Each multi-key change is one function of the crawler's Lua library
(``lua/*.lua``, package data, with the prelude's helpers defined once, :mod:`crawler.crawlstate.library`;
:mod:`crawler.redisconn.functions`): enqueue (seen-check + route), claim (expire +
refill + lease), ack (forget + reschedule host), release (give back unfetched
leases). :meth:`RedisFrontier.step` sends enqueues, acks, releases, a lease
renewal and a claim in one pipelined round trip, in that order, so a page's
outlinks are stored before the page's lease is acked.
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from redis.exceptions import ResponseError

from crawler.crawlstate.compact import BucketSizes
from crawler.crawlstate.keys import ShardKeys
from crawler.crawlstate.schema import TABLE_FIELD
from crawler.crawlstate.shards import ShardRouter
from crawler.frontier.config import FrontierConfig
from crawler.frontier.outcome import Completion
from crawler.frontier.seen import SeenConfig
from crawler.frontier.steps import (
    DONT_FILTER,
    EXACT_ONLY,
    ROBOTS_REQUEST_ID,
    ClaimResult,
    DeadLetter,
    DrainResult,
    EnqueueEntry,
    FrontierCounts,
    Lease,
    Step,
    StepResult,
    Touch,
    read_counts,
)
from crawler.frontier.wire import StepCommands
from crawler.policy.backoff import BackoffPolicy
from crawler.policy.memory import Admission
from crawler.redisconn.functions import crawler_library, is_missing
from crawler.redisconn.link import AnyRedis, KeyConnection, is_slot_error, read_replies
from crawler.urls.fingerprint import bloom_positions, url_key

__all__ = [
    "DONT_FILTER",
    "EXACT_ONLY",
    "ROBOTS_REQUEST_ID",
    "ClaimResult",
    "Completion",
    "DeadLetter",
    "DrainResult",
    "EnqueueEntry",
    "FrontierCounts",
    "Lease",
    "RedisFrontier",
    "Step",
    "StepResult",
    "Touch",
    "read_counts",
    "read_dead_letters",
    "shard_frontiers",
]

async def read_dead_letters(client: AnyRedis, keys: ShardKeys, limit: int = 1000) -> list[DeadLetter]:
    """Up to ``limit`` of a shard's dead letters (an HSCAN walk, never a blocking scan)."""
    out: list[DeadLetter] = []
    cursor = 0
    while True:
        cursor, batch = await client.hscan(keys.dead_info, cursor, count=200)
        info: dict[bytes, bytes] = dict(batch)  # type: ignore[arg-type]
        if info:
            ids = list(info)
            blobs = await client.hmget(keys.dead, ids)
            for raw_id, blob in zip(ids, blobs):
                if not isinstance(blob, bytes):
                    continue
                host, level, died, error, message = info[raw_id].decode("utf-8", "replace").split("\t", 4)
                out.append(DeadLetter(int(raw_id), host, int(level), int(died) / 1000, error, message, blob))
                if len(out) >= limit:
                    return out
        if cursor == 0:
            return out


class RedisFrontier:
    """Async access to one shard of the frontier. Never blocks the event loop."""

    def __init__(
        self,
        client: AnyRedis,
        keys: ShardKeys,
        config: FrontierConfig,
        backoff: BackoffPolicy | None = None,
        seen: SeenConfig | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.config = config
        self.seen = seen or SeenConfig.sized(1_000_000, 0.01)
        self._library = crawler_library()
        self._commands = StepCommands(keys, config, self.seen, backoff or BackoffPolicy())
        #: The connection steps are sent on (one step at a time; see begin_step):
        #: to the server, or the cluster node, that holds this shard's slot.
        self._link = KeyConnection(client, keys.leases)

    @property
    def sizes(self) -> BucketSizes:
        """Entries per bucket of the shard's compact structures (set from the server's settings)."""
        return self._commands.sizes

    @sizes.setter
    def sizes(self, sizes: BucketSizes) -> None:
        self._commands.sizes = sizes

    @property
    def admission(self) -> Admission:
        """What new URLs the server's memory admits (set by :class:`~crawler.frontier.admission.MemoryWatch`)."""
        return self._commands.admission

    @admission.setter
    def admission(self, admission: Admission) -> None:
        self._commands.admission = admission

    async def prepare(self) -> None:
        """Load the scripts and allocate the Bloom filter at its full size.

        Allocating once (a zero bit at the last offset) keeps the bitmap at
        exactly ``bloom_bits / 8`` bytes instead of the doubling growth of
        writes at ever higher offsets. Existing bits are untouched. Then
        :meth:`hold_tables`.
        """
        await self.load_scripts()
        await self.client.setbit(self.keys.bloom, self.seen.bloom_bits - 1, 0)
        await self.hold_tables()

    async def hold_tables(self) -> None:
        """Keep the shard's ``table`` hashes (:class:`crawler.crawlstate.schema.KeySpec`: per-host counters, host
        numbers, leases...) as hash tables: a placeholder field whose value is longer than the server keeps
        in a listpack converts each, for good (Redis never converts back, and rereads it so from a dump)."""
        placeholder = b"\0" * (self.sizes.hash_value + 1)
        pipe = self.client.pipeline(transaction=False)
        for key in self.keys.tables:
            pipe.hset(key, TABLE_FIELD, placeholder)
        await pipe.execute()

    async def load_scripts(self) -> None:
        """Make sure the server has the crawler's function library (:mod:`crawler.redisconn.functions`)."""
        await self._library.ensure(self.client)

    # -- single operations (each one round trip) -------------------------------------

    async def enqueue(self, entries: list[EnqueueEntry]) -> tuple[int, int]:
        result = await self.step(Step(enqueues=entries))
        return result.added, result.duplicates

    def entry(
        self, fingerprint: bytes, host: str, domain: str, level: int, blob: bytes, flags: int = 0
    ) -> EnqueueEntry:
        """An enqueue entry for a URL fingerprint (:func:`crawler.urls.url_fingerprint`)."""
        seen = self.seen
        positions = bloom_positions(fingerprint, seen.bloom_bits, seen.bloom_hashes)
        return EnqueueEntry(url_key(fingerprint), positions, host, domain, level, flags, blob)

    async def claim(self, now_ms: int, max_claim: int) -> ClaimResult:
        result = await self.step(Step(claim=max_claim, now_ms=now_ms))
        assert result.claim is not None
        return result.claim

    async def ack(self, completions: list[Completion]) -> tuple[int, int]:
        result = await self.step(Step(completions=completions))
        return result.acked, result.stale

    async def release(self, members: list[bytes], now_ms: int) -> int:
        result = await self.step(Step(releases=members, now_ms=now_ms))
        return result.released

    async def set_host_delay(self, host: str, delay_ms: int | None) -> None:
        """Set (or clear, with ``None``) a floor on one host's politeness delay."""
        if delay_ms is None:
            await self.client.hdel(self.keys.host_delay, host)
        else:
            await self.client.hset(self.keys.host_delay, host, delay_ms)

    # -- one round trip for everything a worker has to say ---------------------------

    async def step(self, step: Step) -> StepResult:
        """Apply ``step`` (:class:`Step` says in which order) in one round trip."""
        return await (await self.begin_step(step))

    async def begin_step(self, step: Step) -> Coroutine[Any, Any, StepResult]:
        """Send a step now; the returned coroutine reads and parses its replies.

        Lets a caller do other work while Redis runs the scripts. Steps share
        one connection: finish a step before beginning the next.
        """
        commands, order = self._commands.build(step)
        if not order:
            return self._nothing()
        await self._write(commands)
        return self._finish(commands, order)

    async def _nothing(self) -> StepResult:
        return StepResult()

    async def _finish(self, commands: list[bytes], order: list[str]) -> StepResult:
        try:
            replies = await self._read(len(commands))
        except ResponseError as exc:
            if not is_missing(exc):
                raise
            # Redis lost its functions (a restart without persistence): load the library and
            # send the step again (enqueue and ack are idempotent enough: a
            # duplicate enqueue is a seen duplicate, a second ack is stale).
            await self.load_scripts()
            await self._write(commands)
            replies = await self._read(len(commands))
        return self._commands.parse(order, replies)

    async def _write(self, commands: list[bytes]) -> None:
        connection = await self._link.get()
        try:
            await connection.send_packed_command(b"".join(commands), check_health=False)
        except BaseException:
            await self._link.drop()
            raise

    async def _read(self, count: int) -> list[Any]:
        """Read ``count`` replies in order (an error reply keeps the stream in step)."""
        connection = await self._link.get()
        try:
            replies = await read_replies(connection, count)
        except BaseException:
            await self._link.drop()
            raise
        failure = next((reply for reply in replies if isinstance(reply, ResponseError)), None)
        if failure is not None:
            if is_slot_error(failure):
                raise await self._link.moved(failure)
            raise failure
        return replies

    async def close(self) -> None:
        """Give the steps' connection back."""
        await self._link.release()

    # -- dead letters ----------------------------------------------------------------

    async def dead_letters(self, limit: int = 1000) -> list[DeadLetter]:
        """Up to ``limit`` dead letters (an HSCAN walk, never a blocking scan)."""
        return await read_dead_letters(self.client, self.keys, limit)

    async def revive(self, entries: list[tuple[int, bytes]]) -> int:
        """Requeue dead letters by id, with a re-encoded request (or b"" to keep it)."""
        if not entries:
            return 0
        args: list[Any] = [self.keys.prefix]
        for request_id, blob in entries:
            args += (request_id, blob)
        return int(await self._library.call(self.client, "revive", [self.keys.dead], *args))

    # -- inspection ------------------------------------------------------------------

    async def counts(self) -> FrontierCounts:
        return await read_counts(self.client, self.keys, self.config.levels)


def shard_frontiers(
    client: Any, router: ShardRouter, config: FrontierConfig, seen: SeenConfig, backoff: BackoffPolicy | None = None
) -> list[RedisFrontier]:
    """One :class:`RedisFrontier` per shard, with the seen set of one shard (:mod:`crawler.frontier.sizing`)
    and its share of the active hosts."""
    count = router.count
    if count > 1:
        config = replace(config, active_hosts=max(2, -(-config.active_hosts // count)))
    return [RedisFrontier(client, keys, config, backoff, seen) for keys in router.keys]
