"""The Redis commands of one frontier step, and the step's result from their replies (no I/O).

A :class:`~crawler.frontier.steps.Step` becomes one ``FCALL`` per script
call (the crawler's function library: :mod:`crawler.redisconn.functions`;
enqueues in batches of ``FRONTIER_ENQUEUE_BATCH``) and a ``ZADD XX``
for the lease renewal (with an ``HSET`` naming the leases' worker), encoded once with
:func:`crawler.redisconn.resp.command`;
:class:`crawler.frontier.redisfrontier.RedisFrontier` sends them in one pipelined
write and reads the replies back in order. The arguments of ``enqueue``, ``ack`` and ``claim`` and
their replies are those :mod:`crawler.crawlstate.protocol` declares, built and read by name.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any

from crawler.crawlstate.compact import BucketSizes
from crawler.crawlstate.protocol import ACK, CLAIM, ENQUEUE
from crawler.frontier.steps import ClaimResult, DrainResult, Lease, StepResult
from crawler.policy.memory import ADMIT_ALL, Admission
from crawler.redisconn.functions import crawler_library
from crawler.redisconn.provider import worker_name
from crawler.redisconn.resp import command
from crawler.urls.fingerprint import POSITIONS, SKETCH_CELLS, sketch_offsets

if TYPE_CHECKING:
    from crawler.crawlstate.keys import ShardKeys
    from crawler.frontier.config import FrontierConfig
    from crawler.frontier.seen import SeenConfig
    from crawler.frontier.steps import Step
    from crawler.policy.backoff import BackoffPolicy


def _optional_ms(value: Any) -> int | None:
    number = int(value)
    return None if number < 0 else number


#: An enqueued URL's and a completed lease's fields, in the order the scripts read them.
_ENQUEUE_FIELDS = ENQUEUE.item_getter()
_ACK_FIELDS = ACK.item_getter()
#: ``BITFIELD`` operations around an offset: a Bloom bit set, an in-link cell counted.
_SET_BIT = (b"SET", b"u1", b"1")
_COUNT_CELL = (b"INCRBY", b"u8", b"1")
#: ``BITFIELD`` operations per command at most. Redis grows a command's array of operations by one
#: at each (``zrealloc``): past a few kilobytes every growth copies it, and a batch's 1,600 operations in
#: one command cost Redis 1,800 instructions each, in commands of 64 about 2.7% fewer instructions per
#: page in all (``benchmarks/redis_cost.py``, 2026-12-07; 32 to 128 measure alike).
BITFIELD_CHUNK = 64


def _operations(operation: tuple[bytes, bytes, bytes], offsets: list[Any]) -> Iterator[Any]:
    """``BITFIELD`` arguments: ``operation`` (its name, its type, its value) at each of ``offsets``."""
    name, kind, value = operation
    return chain.from_iterable(zip(repeat(name), repeat(kind), offsets, repeat(value)))


class StepCommands:
    """Encodes steps for one shard.

    ``sizes`` (bucket sizes for the server's encodings) and ``admission`` (what new URLs Redis
    memory still admits) are set by the frontier as it learns them.
    """

    def __init__(
        self, keys: ShardKeys, config: FrontierConfig, seen: SeenConfig, backoff: BackoffPolicy,
    ) -> None:
        self.keys = keys
        self.config = config
        self.seen = seen
        self._functions = crawler_library().functions
        self.sizes = BucketSizes()
        self.admission: Admission = ADMIT_ALL
        self._backoff_args = {
            "throttle_base_ms": int(backoff.throttle_base * 1000),
            "throttle_max_ms": int(backoff.throttle_max * 1000),
            "park_after": backoff.park_after,
            "park_base_ms": int(backoff.park_base * 1000),
            "park_max_ms": int(backoff.park_max * 1000),
        }
        self._weights = list(config.queue_weights)
        self._horizon_ms = int(config.sleep_horizon * 1000)
        self._grouped = int(config.politeness_key.grouping > 0)
        self._worker = worker_name().encode()

    def build(self, step: Step) -> tuple[list[bytes], list[str]]:
        """The commands of ``step`` (one per script call, enqueues in batches) and what each one is."""
        enqueues, completions, releases, renew, claim, now_ms, drain_at_ms, touches, crawl_now_ms = (
            step.enqueues, step.completions, step.releases, step.renew, step.claim, step.now_ms, step.drain_at_ms,
            step.touches, step.crawl_now_ms,
        )
        keys = self.keys
        prefix = keys.prefix
        order: list[str] = []
        commands: list[bytes] = []
        if enqueues:
            batch = self.config.enqueue_batch
            hashes = self.seen.bloom_hashes
            unpack = POSITIONS[hashes].unpack
            cells = self.config.inlink_cells
            sketched = min(SKETCH_CELLS, hashes) if cells else 0
            grouping = self.config.politeness_key.grouping
            admission = self.admission
            head = [
                b"FCALL", self._functions["enqueue"], 1, keys.bloom, *ENQUEUE.head_args(
                    prefix=prefix, hashes=hashes, host_budget=self.config.host_page_budget,
                    domain_budget=self.config.domain_page_budget, grouping=grouping,
                    admit_level=admission.level, admit_new_hosts=int(admission.new_hosts),
                    seen_load=self.sizes.seen),
            ]
            fields = _ENQUEUE_FIELDS
            for start in range(0, len(enqueues), batch):
                args: list[Any] = list(head)
                # The Bloom bits and the in-link sketch cells of every URL sent, as plain commands after the
                # script's call (see the enqueue script).
                bits: list[int] = []
                inlinks: list[str] = []
                for e in enqueues[start : start + batch]:
                    offsets = unpack(e.bloom_positions)
                    args += fields(e)
                    if grouping == 2:
                        args.append(e.group or e.host)
                    args += offsets
                    bits += offsets
                    if sketched:
                        inlinks += sketch_offsets(offsets, cells)
                commands.append(command(*args))
                order.append("enqueue")
                for at in range(0, len(bits), BITFIELD_CHUNK):
                    commands.append(command(b"BITFIELD", keys.bloom,
                                            *_operations(_SET_BIT, bits[at : at + BITFIELD_CHUNK])))
                    order.append("bloom")
                for at in range(0, len(inlinks), BITFIELD_CHUNK):
                    commands.append(command(b"BITFIELD", keys.inlinks, b"OVERFLOW", b"SAT",
                                            *_operations(_COUNT_CELL, inlinks[at : at + BITFIELD_CHUNK])))
                    order.append("inlinks")
        if completions:
            args = [b"FCALL", self._functions["ack"], 1, keys.leases, *ACK.head_args(
                prefix=prefix, now_ms=now_ms, **self._backoff_args, horizon_ms=self._horizon_ms,
                grouped=self._grouped, levels=self.config.levels, records_load=self.sizes.records,
                per_key=self.config.per_key, slot_limited=int(self.config.slot_limited))]
            fields = _ACK_FIELDS
            for done in completions:
                args += fields(done)
            commands.append(command(*args))
            order.append("ack")
        if releases:
            commands.append(
                command(b"FCALL", self._functions["release"], 1, keys.leases, prefix, now_ms, self._grouped,
                        self.config.per_key, int(self.config.slot_limited), *releases)
            )
            order.append("release")
        if renew:
            until = now_ms + int(self.config.lease_timeout * 1000)
            args = [b"ZADD", keys.leases, b"XX"]
            for member in renew:
                args += (until, member)
            commands.append(command(*args))
            order.append("renew")
            # Who holds them, for the operator (scrapy frontier url): not read by the crawl.
            held = b" ".join([str(now_ms).encode(), *(member.split(b" ", 1)[0] for member in renew)])
            commands.append(command(b"HSET", keys.holders, self._worker, held))
            order.append("holders")
        if touches:
            args = [b"FCALL", self._functions["touch"], 1, keys.due, prefix, crawl_now_ms, self.sizes.due,
                    self.sizes.records]
            for touch in touches:
                args += touch
            commands.append(command(*args))
            order.append("touch")
        if drain_at_ms is not None:
            commands.append(
                command(b"FCALL", self._functions["drain"], 1, keys.due, prefix, drain_at_ms, self.config.due_batch,
                        self.sizes.records)
            )
            order.append("drain")
        if claim is not None:
            commands.append(
                command(
                    b"FCALL", self._functions["claim"], 1, keys.leases, *CLAIM.head_args(
                        prefix=prefix, now_ms=now_ms, max_claim=claim,
                        lease_until_ms=now_ms + int(self.config.lease_timeout * 1000),
                        max_awake=self.config.active_hosts, refill_limit=self.config.refill_batch,
                        expire_limit=1000, horizon_ms=self._horizon_ms, robots_first=int(self.config.robots_first),
                        grouped=self._grouped, records_load=self.sizes.records, per_key=self.config.per_key,
                        min_delay_ms=int(self.config.min_delay * 1000), slot_limited=int(self.config.slot_limited)),
                    *self._weights,
                )
            )
            order.append("claim")
        return commands, order

    def parse(self, order: list[str], replies: list[Any]) -> StepResult:
        """The result of a step from its replies, in the order of :meth:`build`."""
        added = duplicates = acked = stale = released = requeued = dead = parked = 0
        over_host = over_domain = false_positives = refused = 0
        claim_result = None
        drain_result = None
        touched = 0
        for kind, reply in zip(order, replies):
            if kind == "enqueue":
                counts = ENQUEUE.reply_values(reply)
                added += int(counts["added"])
                duplicates += int(counts["duplicates"])
                over_host += int(counts["over_host"])
                over_domain += int(counts["over_domain"])
                false_positives += int(counts["false_positives"])
                refused += int(counts["refused"])
            elif kind == "ack":
                counts = ACK.reply_values(reply)
                acked, stale, requeued, dead, parked = (
                    int(counts[name]) for name in ("acked", "stale", "requeued", "dead", "parked"))
            elif kind == "release":
                released = int(reply)
            elif kind == "claim":
                claim_result = parse_claim(reply, self.keys.shard)
            elif kind == "drain":
                drain_result = DrainResult(int(reply[0]), int(reply[1]), _optional_ms(reply[2]), int(reply[3]))
            elif kind == "touch":
                touched = int(reply)
        return StepResult(
            added=added, duplicates=duplicates, over_host_budget=over_host, over_domain_budget=over_domain,
            bloom_false_positives=false_positives, refused_memory=refused, acked=acked, stale=stale,
            released=released, claim=claim_result, requeued=requeued, dead=dead, parked=parked, drain=drain_result,
            touched=touched,
        )


def parse_claim(reply: list[Any], shard: int = 0) -> ClaimResult:
    """The claim script's reply."""
    values = CLAIM.reply_values(reply)
    flat = values["claimed"]
    claimed = [(Lease.from_member(flat[i], shard), flat[i + 1]) for i in range(0, len(flat), 2)]
    return ClaimResult(
        claimed=claimed,
        expired=int(values["expired"]),
        moved=int(values["moved"]),
        next_ready_ms=_optional_ms(values["next_ready_ms"]),
        next_expiry_ms=_optional_ms(values["next_expiry_ms"]),
        queued=int(values["queued"]),
        leased=int(values["leased"]),
        missing=int(values["missing"]),
        opened=int(values["opened"]),
        woken=int(values["woken"]),
    )
