"""The leases a worker holds, from claim to ack (no I/O).

A claimed request waits in a small buffer until the engine takes it
(:meth:`InHand.hand_out`); it is then *handed* until the engine drops it from
its in-progress set (after the download, the callback, the requests it
produced and its items: :meth:`InHand.finished`, called by that set), when
:meth:`InHand.collect` turns it into a
:class:`~crawler.frontier.steps.Completion` for the next step's ack. Every
lease held, buffered or handed, is renewed; buffered leases are given back
(released) when the worker drains or closes.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy import Request

    from crawler.frontier.outcome import Completion, Handout, LeaseCompleter


class InHand:
    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        #: Claimed, waiting for the engine.
        self.buffer: deque[tuple[Request, Handout]] = deque()
        #: Taken by the engine, not finished yet.
        self.handed: dict[Request, Handout] = {}
        #: Per shard (only shards with something to send): acks for the next step.
        self.completions: dict[int, list[Completion]] = {}
        #: Handed requests the engine is done with, not yet collected.
        self._finished: list[Request] = []
        self.completer: LeaseCompleter | None = None

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
        if not self.buffer:
            return None
        request, handout = self.buffer.popleft()
        handout.handed_at = time.time()
        self.handed[request] = handout
        return request

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
        if shard in sent:
            self.completions[shard] = sent[shard] + self.completions.get(shard, [])

    def held(self) -> dict[int, list[bytes]]:
        """Per shard: the members of every lease held (buffered or handed), to renew."""
        renew: dict[int, list[bytes]] = {}
        for handout in [*self.handed.values(), *(h for _, h in self.buffer)]:
            renew.setdefault(handout.lease.shard, []).append(handout.lease.member)
        return renew

    def release_buffered(self) -> dict[int, list[bytes]]:
        """Empty the buffer; per shard, the members of its leases, to give back."""
        releases: dict[int, list[bytes]] = {}
        for _, handout in self.buffer:
            releases.setdefault(handout.lease.shard, []).append(handout.lease.member)
        self.buffer.clear()
        return releases
