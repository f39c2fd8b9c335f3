"""The stats a frontier step's result adds to (``frontier/*``, ``recrawl/*``, ``urls/dropped/*budget``)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.statscollectors import StatsCollector

    from crawler.frontier.steps import StepResult

logger = logging.getLogger(__name__)


def count_step(stats: StatsCollector, result: StepResult) -> None:
    """Add what one step did to the crawl's stats (``frontier/*``, ``recrawl/*``)."""
    inc = stats.inc_value
    if result.added:
        inc("frontier/enqueued", result.added)
    if result.duplicates:
        inc("frontier/duplicate", result.duplicates)
    if result.over_host_budget:
        inc("urls/dropped/host_budget", result.over_host_budget)
    if result.over_domain_budget:
        inc("urls/dropped/domain_budget", result.over_domain_budget)
    if result.bloom_false_positives:
        inc("frontier/bloom_false_positive", result.bloom_false_positives)
    if result.refused_memory:
        inc("frontier/refused/memory", result.refused_memory)
    if result.acked:
        inc("frontier/acked", result.acked)
    if result.stale:
        inc("frontier/ack_stale", result.stale)
    claim = result.claim
    if claim is not None:
        if claim.claimed:
            inc("frontier/claimed", len(claim.claimed))
        if claim.expired:
            inc("frontier/lease_expired", claim.expired)
            logger.info("Frontier: %d expired leases returned their URLs to the queues", claim.expired)
        if claim.missing:
            inc("frontier/missing_request", claim.missing)
        if claim.opened:
            inc("frontier/hosts_opened", claim.opened)
        if claim.woken:
            inc("frontier/hosts_woken", claim.woken)
    if result.parked:
        inc("frontier/hosts_parked", result.parked)
    if result.drain is not None and result.drain.moved:
        inc("recrawl/drained", result.drain.moved)
    if result.touched:
        inc("recrawl/sitemap_due", result.touched)
