"""The crawl's per-key politeness overrides (Scrapy's ``DOWNLOAD_SLOTS``), kept in the shared frontier.

Each worker writes its own ``DOWNLOAD_SLOTS`` entries into the crawl's
``slotconf`` hash when it opens, and reads every worker's back: a worker
started without the setting applies the entries another one brought, so one
``scrapy crawl`` with them configures the whole crawl (an entry a later
worker gives again replaces the earlier one). The delay and randomization
are applied by the worker that acks a fetch (its :class:`PolitenessPolicy`);
the concurrency by the frontier's scripts, which read it from each shard's
``slotk`` hash (only when the crawl has any: ``FrontierConfig.slot_limited``).
To remove an entry: ``scrapy frontier reset``, or ``HDEL`` it from both.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from crawler.policy.politeness import SlotOverride, parse_slot_overrides

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter

#: What a malformed entry in Redis is called in the error (the crawl's copy, not the setting).
SHARED = "DOWNLOAD_SLOTS (the crawl's copy in Redis, key slotconf)"


async def share_slot_overrides(client: Any, router: ShardRouter,
                               own: dict[str, SlotOverride]) -> dict[str, SlotOverride]:
    """Write this worker's entries, and return every worker's (the concurrencies written to every shard)."""
    key = router.crawl_keys.crawl_key("slot_conf")
    if own:
        await client.hset(key, mapping={name: json.dumps(entry.as_scrapy(), sort_keys=True)
                                        for name, entry in own.items()})
    stored = await client.hgetall(key)
    try:
        shared = {name.decode(): json.loads(value) for name, value in stored.items()}
    except ValueError:
        shared = {"(unreadable)": None}
    merged = parse_slot_overrides(shared, SHARED)
    limits = {name: entry.concurrency for name, entry in merged.items() if entry.concurrency is not None}
    if limits:
        for keys in router.keys:
            await client.hset(keys.slot_limit, mapping=limits)
    return merged
