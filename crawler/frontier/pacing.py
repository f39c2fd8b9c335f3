"""When a worker asks which shard for URLs, and what it last heard from each (no I/O).

A worker keeps, per frontier shard, the time its next host is due (or its
next lease expires), its queued and leased URLs, and its recrawl due set's
state, as the last step with that shard told it. From these the scheduler
knows when to wake up, whether the crawl may be over, and how to share its
free download slots among the shards (:meth:`ShardPacer.claims`). No shard
is ever scanned: the cost per cycle depends on the shards with work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Container

    from crawler.frontier.steps import ClaimResult, DrainResult

#: "No revisit known": later than any crawl-clock time.
NEVER_MS = 2**62


class ShardPacer:
    def __init__(self, shards: int, idle_poll: float) -> None:
        self.shards = shards
        self.idle_poll = idle_poll
        #: Per shard: when to ask it for URLs next (s), its queued + leased URLs, its due set.
        self._next = [0.0] * shards
        self._pending = [0] * shards
        self._due_now = [0] * shards
        self._next_due = [0] * shards
        self._heard = [False] * shards
        self._turn = 0
        #: The crawl's figures, summed over shards.
        self.pending = 0
        self.next_ready_at = 0.0
        self.due_now = 0
        self.next_due_ms = 0

    @property
    def synced(self) -> bool:
        """Every shard has answered a claim at least once."""
        return all(self._heard)

    def claims(self, capacity: int, now: float, sent: Container[int]) -> dict[int, int]:
        """How many URLs to claim from which shard (0: only expire leases, refill and report).

        A shard is asked when its next host is due by what this worker last
        heard, when it was just sent URLs or acks (``sent``: new hosts, and
        hosts acked with no delay, may be ready at once), and at least every
        ``FRONTIER_IDLE_POLL`` (other workers' URLs). The free slots are
        shared among the shards asked, starting with a different one each
        cycle so none is starved.
        """
        if self.shards == 1:
            return {0: capacity} if capacity > 0 else {}
        if capacity <= 0:
            return {}
        due = [shard for shard in range(self.shards) if self._next[shard] <= now or shard in sent]
        if not due:
            return {}
        start = self._turn % len(due)
        self._turn += 1
        share = -(-capacity // len(due))
        claims: dict[int, int] = {}
        left = capacity
        for shard in due[start:] + due[:start]:
            take = min(share, left)
            claims[shard] = take
            left -= take
        return claims

    def heard_drain(self, shard: int, drain: DrainResult) -> None:
        self._due_now[shard] = drain.due_now
        self._next_due[shard] = drain.next_due_ms if drain.next_due_ms is not None else NEVER_MS
        self.due_now = sum(self._due_now)
        self.next_due_ms = min(self._next_due)

    def heard_claim(self, shard: int, claim: ClaimResult, now: float) -> None:
        self._pending[shard] = claim.queued + claim.leased
        self.pending = sum(self._pending)
        self._heard[shard] = True
        next_at = [t / 1000.0 for t in (claim.next_ready_ms, claim.next_expiry_ms) if t is not None]
        # With no ready host and no lease anywhere, only another worker's
        # enqueue can create work: look again after the idle poll (a sharded
        # frontier looks at every shard that often in any case).
        poll_at = now + self.idle_poll
        self._next[shard] = min(next_at) if next_at else poll_at
        if self.shards > 1:
            self._next[shard] = min(self._next[shard], poll_at)
        self.next_ready_at = min(self._next)

    def revisit_scheduled(self, due_ms: int) -> bool:
        """A revisit due at ``due_ms`` was scheduled here; True if it is the earliest known."""
        if due_ms < self.next_due_ms:
            self.next_due_ms = due_ms
            return True
        return False
