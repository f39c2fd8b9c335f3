"""The leases a worker holds, from claim to ack (no I/O).

A claimed request waits in a small buffer until the engine takes it
(:meth:`InHand.hand_out`); it is then *handed* until the engine drops it from
its in-progress set (after the download, the callback, the requests it
produced and its items: :meth:`InHand.finished`, called by that set), when
:meth:`InHand.collect` turns it into a
:class:`~crawler.frontier.steps.Completion` for the next step's ack. Every
lease held, buffered or handed, is renewed; buffered leases are given back
(released) when the worker drains or closes.

A buffered request is handed out only while its lease is surely held: one
not confirmed (claimed, or renewed by a step Redis answered) for
:data:`LAPSE_SHARE` of ``FRONTIER_LEASE_TIMEOUT`` may have expired, its host
claimed by another worker (Redis was unreachable, the worker stalled); it is
given back instead (:meth:`InHand.take_lapsed`), so that no host is fetched by
two workers at once.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, TypeVar

#: The share of the lease timeout after which a buffered lease not confirmed since is not handed out:
#: leases are renewed every third of it, so a lease older than two thirds missed a renewal.
LAPSE_SHARE = 2 / 3

T = TypeVar("T")

if TYPE_CHECKING:
    from scrapy import Request

    from crawler.frontier.outcome import Completion, Handout, LeaseCompleter


def _put_back(pending: dict[int, list[T]], taken: dict[int, list[T]], shard: int) -> None:
    """What a failed step took for ``shard`` goes back in front of what came since."""
    if shard in taken:
        pending[shard] = taken[shard] + pending.get(shard, [])


class InHand:
    def __init__(self, concurrency: int, lease_timeout: float) -> None:
        self.concurrency = concurrency
        self.lease_timeout = lease_timeout
        self.lapse_after = lease_timeout * LAPSE_SHARE
        #: Claimed, waiting for the engine.
        self.buffer: deque[tuple[Request, Handout]] = deque()
        #: Taken by the engine, not finished yet.
        self.handed: dict[Request, Handout] = {}
        #: Per shard (only shards with something to send): acks for the next step.
        self.completions: dict[int, list[Completion]] = {}
        #: Handed requests the engine is done with, not yet collected.
        self._finished: list[Request] = []
        self.completer: LeaseCompleter | None = None
        #: Per shard: buffered leases not handed out because they may have lapsed, to give back.
        self.lapsed: dict[int, list[bytes]] = {}
        #: How many lapsed since the pump last said so (a give-back that failed is not counted again).
        self.newly_lapsed = 0

    def bind(self, completer: LeaseCompleter) -> None:
        self.completer = completer

    def finished(self, request: Request) -> None:
        """The engine is done with ``request`` (called by the engine's in-progress set for every request)."""
        if request in self.handed:
            self._finished.append(request)

    def capacity(self) -> int:
        """Free download slots: requests this worker could claim now."""
        return self.concurrency - len(self.handed) - len(self.buffer)

    def add(self, request: Request, handout: Handout) -> None:
        self.buffer.append((request, handout))

    def hand_out(self) -> Request | None:
        buffer = self.buffer
        if not buffer:
            return None
        now = time.time()
        while buffer:
            request, handout = buffer.popleft()
            if now - handout.confirmed_at > self.lapse_after:
                self.lapsed.setdefault(handout.lease.shard, []).append(handout.lease.member)
                self.newly_lapsed += 1
                continue
            handout.handed_at = now
            self.handed[request] = handout
            return request
        return None

    def collect(self) -> bool:
        """Turn the requests the engine has finished with into completions; whether there were any."""
        if not self._finished:
            return False
        finished, self._finished = self._finished, []
        assert self.completer is not None
        now = time.time()
        completions = self.completions
        handed = self.handed
        for request in finished:
            handout = handed.pop(request, None)
            if handout is None:
                continue  # (the same request finished twice)
            completion = self.completer.completion(request, handout, now)
            completions.setdefault(completion.shard, []).append(completion)
        return True

    def complete(self, completion: Completion) -> None:
        """A completion decided without the engine (a stored request that cannot be decoded)."""
        self.completions.setdefault(completion.shard, []).append(completion)

    def take_completions(self) -> dict[int, list[Completion]]:
        completions, self.completions = self.completions, {}
        return completions

    def put_back(self, sent: dict[int, list[Completion]], shard: int) -> None:
        """A shard's unsent acks go back in front of what came since."""
        _put_back(self.completions, sent, shard)

    def held(self) -> dict[int, list[Handout]]:
        """Per shard: every lease held (buffered or handed), to renew."""
        renew: dict[int, list[Handout]] = {}
        for handout in [*self.handed.values(), *(h for _, h in self.buffer)]:
            renew.setdefault(handout.lease.shard, []).append(handout)
        return renew

    def renewed(self, handouts: list[Handout], sent_at: float, answered_at: float) -> None:
        """A renewal of ``handouts`` sent at ``sent_at`` was applied by ``answered_at``: each lease that had
        not expired by then (confirmed less than the lease timeout before) now runs from ``sent_at``."""
        for handout in handouts:
            if answered_at - handout.confirmed_at < self.lease_timeout:
                handout.confirmed_at = sent_at

    def take_lapsed(self) -> dict[int, list[bytes]]:
        lapsed, self.lapsed = self.lapsed, {}
        return lapsed

    def put_back_lapsed(self, taken: dict[int, list[bytes]], shard: int) -> None:
        """A shard's unsent give-backs of lapsed leases go back for the next step."""
        _put_back(self.lapsed, taken, shard)

    def release_buffered(self) -> dict[int, list[bytes]]:
        """Empty the buffer; per shard, the members of its leases (and of those that lapsed), to give back."""
        releases = self.take_lapsed()
        for _, handout in self.buffer:
            releases.setdefault(handout.lease.shard, []).append(handout.lease.member)
        self.buffer.clear()
        return releases
