"""How a request the engine is done with becomes its lease's completion.

The frontier scheduler turns every finished request into a
:class:`~crawler.frontier.steps.Completion` for the next step's ack: the host's
next allowed time from the politeness policy (none if the request never
reached the host), and what the middlewares decided about the URL (done,
back to the frontier with its updated meta, or a dead letter).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from crawler.exceptions import CodecError
from crawler.frontier.outcome import Handout, LeaseAction
from crawler.frontier.steps import Completion
from crawler.requestmeta import CONTACTED_META
from crawler.urls import url_fingerprint, url_key

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.codec import RequestCodec
    from crawler.policy.politeness import PolitenessPolicy

logger = logging.getLogger(__name__)


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
