"""The Redis commands of one frontier step, and the step's result from their replies (no I/O).

A :class:`~crawler.frontier.steps.Step` becomes one ``FCALL`` per script
call (the crawler's function library: :mod:`crawler.redisconn.functions`;
enqueues in batches of ``FRONTIER_ENQUEUE_BATCH``) and a ``ZADD XX``
for the lease renewal (with an ``HSET`` naming the leases' worker), encoded once with
:func:`crawler.redisconn.resp.command`;
:class:`crawler.frontier.store.RedisFrontier` sends them in one pipelined
write and reads the replies back in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from crawler.crawlstate.compact import BucketSizes, lh_hash
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


def _clean(text: str) -> str:
    return " ".join(text.split())[:500]


def _optional_ms(value: Any) -> int | None:
    number = int(value)
    return None if number < 0 else number


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
        self._backoff_args = (
            int(backoff.throttle_base * 1000),
            int(backoff.throttle_max * 1000),
            backoff.park_after,
            int(backoff.park_base * 1000),
            int(backoff.park_max * 1000),
        )
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
            head = (
                b"FCALL", self._functions["enqueue"], 1, keys.bloom, prefix, hashes,
                self.config.host_page_budget, self.config.domain_page_budget, sketched, grouping,
                admission.level, int(admission.new_hosts), self.sizes.seen,
            )
            for start in range(0, len(enqueues), batch):
                args: list[Any] = list(head)
                for e in enqueues[start : start + batch]:
                    offsets = unpack(e.bloom_positions)
                    args += (e.key, lh_hash(e.key), e.host, e.domain, e.level, e.flags, e.blob)
                    if grouping == 2:
                        args.append(e.group or e.host)
                    args += offsets
                    if sketched:
                        args += sketch_offsets(offsets, cells)
                commands.append(command(*args))
                order.append("enqueue")
        if completions:
            args = [b"FCALL", self._functions["ack"], 1, keys.leases, prefix, now_ms, *self._backoff_args,
                    self._horizon_ms, self._grouped, self.config.levels, self.sizes.records, self.config.per_key,
                    int(self.config.slot_limited)]
            for done in completions:
                args += (
                    done.member, done.next_allowed_ms, done.completed_ms, int(done.action), done.not_before_ms,
                    done.blob, int(done.host_signal), f"{_clean(done.error)}\t{_clean(done.message)}",
                    b"" if done.url_key is None else done.url_key,
                )
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
                    b"FCALL", self._functions["claim"], 1, keys.leases, prefix, now_ms, claim,
                    now_ms + int(self.config.lease_timeout * 1000), self.config.active_hosts,
                    self.config.refill_batch, 1000, self._horizon_ms, int(self.config.robots_first), self._grouped,
                    self.sizes.records, self.config.per_key, int(self.config.min_delay * 1000),
                    int(self.config.slot_limited), *self._weights,
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
                added += int(reply[0])
                duplicates += int(reply[1])
                over_host += int(reply[2])
                over_domain += int(reply[3])
                false_positives += int(reply[4])
                refused += int(reply[5])
            elif kind == "ack":
                acked, stale, requeued, dead, parked = (int(x) for x in reply)
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
    flat = reply[0]
    claimed = [(Lease.from_member(flat[i], shard), flat[i + 1]) for i in range(0, len(flat), 2)]
    return ClaimResult(
        claimed=claimed,
        expired=int(reply[1]),
        moved=int(reply[2]),
        next_ready_ms=_optional_ms(reply[3]),
        next_expiry_ms=_optional_ms(reply[4]),
        queued=int(reply[5]),
        leased=int(reply[6]),
        missing=int(reply[7]),
        opened=int(reply[8]),
        woken=int(reply[9]),
    )
