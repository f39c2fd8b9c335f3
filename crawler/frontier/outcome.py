"""How a leased request ends, as decided by the middlewares that handle it.

By default a request whose processing ends is *done*: its lease is acked and
the URL is forgotten (it stays in the seen set). A middleware can decide
otherwise with :func:`reschedule` (back to the frontier, not before a given
time: retries, robots.txt fetched first, throttling) or :func:`dead_letter`
(give up: the request moves to the dead-letter queue with its error), and
then end the request's processing by raising :class:`Rescheduled`. The
scheduler applies the outcome in the ack of the lease, in the same atomic
step that gives the host its next allowed time: :class:`LeaseCompleter` turns
every finished request into its lease's :class:`Completion` (the host's next
allowed time from the politeness policy, none if the request never reached the
host, and what the middlewares decided), which the next step's ack carries
(``lua/ack.lua``; its arguments are ``ACK`` of :mod:`crawler.crawlstate.protocol`).
This module and :mod:`crawler.frontier.inhand` (the leases a worker holds until
their ack) are the ack's Python.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest

from crawler.exceptions import CodecError
from crawler.requestmeta import CONTACTED_META, LEASE_META
from crawler.urls import url_fingerprint, url_key

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.codec import RequestCodec
    from crawler.policy.politeness import PolitenessPolicy

logger = logging.getLogger(__name__)



class LeaseAction(IntEnum):
    DONE = 0
    REQUEUE = 1
    DEAD = 2


class HostSignal(IntEnum):
    """What the fetch says about the host, for host-level backoff."""

    #: A normal answer: throttling decays by one level, failures reset.
    OK = 0
    #: 429 or 503: the host's throttle level rises.
    THROTTLED = 1
    #: A connection-level failure: the host's consecutive-failure count rises.
    FAILED = 2
    #: Neither (e.g. the page waits for robots.txt): host state unchanged.
    NEUTRAL = 3
    #: A failure that parks the host at once: a server that accepted the
    #: connection and never answered, a name that does not resolve.
    SILENT = 4
    #: The request's origin has no robots.txt decision: the host's robots.txt
    #: is handed out first again.
    ROBOTS_MISSING = 5


@dataclass(slots=True)
class LeaseOutcome:
    action: LeaseAction
    host_signal: HostSignal = HostSignal.OK
    #: Epoch seconds before which the host is not contacted again (0: no floor).
    not_before: float = 0.0
    #: Changes to the stored request's meta (retry counters...), or None.
    meta_updates: dict[str, Any] | None = None
    error: str = ""
    message: str = ""


@dataclass(slots=True)
class Handout:
    """A leased request on its way through this worker."""

    lease: Any  # crawler.frontier.redisfrontier.Lease
    #: Epoch seconds from which the lease surely runs (its claim's step, or the last renewal Redis applied).
    confirmed_at: float
    handed_at: float = 0.0
    outcome: LeaseOutcome | None = field(default=None)
    #: The host signal of a request that completed normally (set by middlewares).
    host_signal: HostSignal = HostSignal.OK


class Rescheduled(IgnoreRequest):
    """Ends a request whose lease outcome has been set; not an error."""


def handout_of(request: Request) -> Handout | None:
    handout = request.meta.get(LEASE_META)
    return handout if isinstance(handout, Handout) else None


def reschedule(
    request: Request,
    *,
    not_before: float,
    host_signal: HostSignal = HostSignal.NEUTRAL,
    meta_updates: dict[str, Any] | None = None,
    reason: str = "",
) -> bool:
    """Send a leased request back to the frontier; False if it holds no lease."""
    handout = handout_of(request)
    if handout is None:
        return False
    handout.outcome = LeaseOutcome(LeaseAction.REQUEUE, host_signal, not_before, meta_updates, message=reason)
    return True


def dead_letter(
    request: Request,
    *,
    error: str,
    message: str,
    host_signal: HostSignal = HostSignal.OK,
    meta_updates: dict[str, Any] | None = None,
) -> bool:
    """Move a leased request to the dead-letter queue; False if it holds no lease."""
    handout = handout_of(request)
    if handout is None:
        return False
    handout.outcome = LeaseOutcome(LeaseAction.DEAD, host_signal, 0.0, meta_updates, error, message)
    return True


def complete(
    request: Request, *, not_before: float = 0.0, host_signal: HostSignal = HostSignal.OK, reason: str = ""
) -> bool:
    """End a leased request as done, its host not contacted again before ``not_before``
    (a robots.txt lease that found robots.txt unreachable); False if it holds no lease."""
    handout = handout_of(request)
    if handout is None:
        return False
    handout.outcome = LeaseOutcome(LeaseAction.DONE, host_signal, not_before, message=reason)
    return True


def waits(request: Request) -> bool:
    """Whether a leased request has been sent back to the frontier to wait (:func:`reschedule`):
    a middleware then returns the request instead of raising :class:`Rescheduled`, and the
    frontier scheduler takes it as given back, so the spider's errback hears nothing of a wait
    (as of a retry with Scrapy's RetryMiddleware)."""
    handout = handout_of(request)
    return handout is not None and handout.outcome is not None and handout.outcome.action is LeaseAction.REQUEUE


def signal_host(request: Request, signal: HostSignal) -> None:
    """Record what a normally completed fetch says about its host."""
    handout = handout_of(request)
    if handout is not None:
        handout.host_signal = signal


@dataclass(frozen=True, slots=True)
class Completion:
    """A finished lease: the host's next allowed time and what becomes of the URL."""

    member: bytes
    next_allowed_ms: int
    completed_ms: int
    action: LeaseAction = LeaseAction.DONE
    #: The host is not contacted before this (ms; 0 = no floor). For REQUEUE.
    not_before_ms: int = 0
    #: A re-encoded request to store (REQUEUE, DEAD); empty keeps the stored one.
    blob: bytes = b""
    host_signal: HostSignal = HostSignal.OK
    #: Error class and message of a dead letter.
    error: str = ""
    message: str = ""
    #: The URL's key (:func:`crawler.metadata.record.url_key`), to mark a dead letter dead in its record.
    url_key: int | None = None
    #: The frontier shard of the lease (see :class:`Lease`).
    shard: int = 0

    @property
    def dead_info(self) -> str:
        """A dead letter's ``error\tmessage``, each on one line of at most 500 characters."""
        return f"{_clean(self.error)}\t{_clean(self.message)}"

    @property
    def record_key(self) -> int | bytes:
        """The URL key as the ack script reads it (empty: none)."""
        return b"" if self.url_key is None else self.url_key


def _clean(text: str) -> str:
    return " ".join(text.split())[:500]


class LeaseCompleter:
    def __init__(self, politeness: PolitenessPolicy, codec: RequestCodec, stats: StatsCollector) -> None:
        self.politeness = politeness
        self.codec = codec
        self.stats = stats

    def completion(self, request: Request, handout: Handout, now: float) -> Completion:
        """The completion of ``handout``'s lease, the engine having finished with ``request`` at ``now``."""
        meta = request.meta
        if CONTACTED_META not in meta:
            # Never reached the network (a middleware ended it first): the host
            # owes no delay (0 tells the ack script).
            next_allowed = 0
        else:
            duration = meta.get("download_latency")
            if duration is None:  # the fetch failed: it took this long
                duration = now - handout.handed_at
            next_allowed = self.politeness.next_allowed_ms(now, duration, handout.lease.host)
        outcome = handout.outcome
        if outcome is None:
            return Completion(handout.lease.member, next_allowed, int(now * 1000), host_signal=handout.host_signal,
                              shard=handout.lease.shard)
        if outcome.action is LeaseAction.DONE:
            return Completion(handout.lease.member, next_allowed, int(now * 1000),
                              not_before_ms=int(outcome.not_before * 1000), host_signal=outcome.host_signal,
                              shard=handout.lease.shard)
        blob = b""
        if outcome.meta_updates:
            try:
                blob = self.codec.encode(request.replace(meta={**request.meta, **outcome.meta_updates})).blob
            except CodecError as exc:
                logger.error("Frontier could not re-encode %s: %s; keeping the stored request", request.url, exc)
        if outcome.action is LeaseAction.REQUEUE:
            self.stats.inc_value("frontier/requeued")
        else:
            self.stats.inc_value("frontier/dead_lettered")
            self.stats.inc_value(f"frontier/dead_lettered/{outcome.error or 'unknown'}")
            logger.warning("Dead letter: %s (%s: %s)", request.url, outcome.error, outcome.message)
        return Completion(
            handout.lease.member,
            next_allowed,
            int(now * 1000),
            action=outcome.action,
            not_before_ms=int(outcome.not_before * 1000),
            blob=blob,
            host_signal=outcome.host_signal,
            error=outcome.error,
            message=outcome.message,
            url_key=url_key(url_fingerprint(request.url)) if outcome.action is LeaseAction.DEAD else None,
            shard=handout.lease.shard,
        )
