"""The crawl's figures (``scrapy frontier stats``): the frontier's counts and Redis memory summed over
shards, with the workers' totals and the pages rate of the recent timeline; as data and as text."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from crawler.ops.figures import latency_buckets
from crawler.ops.timeline import Timeline
from crawler.ops.view import frontier_figures

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis

#: The pages rate the time to the memory limit is told at: the last this many seconds of the timeline.
RATE_WINDOW = 600.0


async def crawl_stats(client: AnyRedis, router: ShardRouter, memory_limit: int = 0) -> tuple[dict[str, Any], list[str]]:
    """The crawl's figures as a JSON-ready document and as lines of text (``memory_limit``: REDIS_MEMORY_LIMIT,
    bytes; 0: the servers' maxmemory)."""
    figures = await frontier_figures(client, router, memory_limit)
    timeline = Timeline(client, router.crawl_id)
    totals = await timeline.totals()
    now = time.time()
    workers = await timeline.workers(now - 120)
    recent = [sample for sample in await timeline.samples() if sample.time >= now - RATE_WINDOW]
    rate = sum(sample.pages for sample in recent) / RATE_WINDOW if recent else 0.0
    hours = figures.hours_to_limit(rate)
    draining = bool(await client.exists(router.crawl_keys.crawl_key("draining")))
    pages = int(totals.get("pages", 0))
    errors = {k[6:]: int(v) for k, v in totals.items() if k.startswith("error:") and v}
    exact, near = int(totals.get("dedup:exact", 0)), int(totals.get("dedup:near", 0))
    statuses = dict(sorted((k[7:], int(v)) for k, v in totals.items() if k.startswith("status:")))
    latency = [(bound, n) for bound, n in latency_buckets(totals) if n]
    document: dict[str, Any] = {
        "draining": draining, "shards": router.count, "queued": figures.queued, "in_flight": figures.leased,
        "hosts": {"active": figures.awake_hosts, "ready": figures.ready_hosts, "sleeping": figures.sleeping,
                  "parked": figures.parked},
        "dead_letters": figures.dead_letters, "seen": figures.seen, "revisits_scheduled": figures.due,
        "pages": pages, "url_records": figures.records,
        "memory": {
            "used": figures.memory_used, "limit": figures.memory_limit or None,
            "share": round(figures.memory_share, 4) if figures.memory_limit else None,
            "bytes_per_page": round(figures.bytes_per_record, 1) if figures.records else None,
            "pages_per_second": round(rate, 2), "hours_to_limit": round(hours, 2) if hours is not None else None,
            "servers": [server.as_dict(rate, figures.records) for server in figures.servers],
        },
        "workers_reporting": len(workers), "errors": errors, "duplicates": {"exact": exact, "near": near},
        "robots_disallowed": int(totals.get("robots:disallowed", 0)), "status_codes": statuses,
        "latency": dict(latency),
    }
    memory = figures.memory_text().removeprefix("Redis ")
    if hours is not None:
        memory += f", {hours:,.1f} h to the limit at {rate:,.1f} pages/s (the last {RATE_WINDOW / 60:.0f} min)"
    rows = [
        ("crawl", router.crawl_id + (" (draining)" if draining else "")),
        ("shards", str(router.count)),
        ("queued URLs", f"{figures.queued:,}"),
        ("in flight", f"{figures.leased:,}"),
        ("active hosts", f"{figures.awake_hosts:,}"),
        ("ready hosts", f"{figures.ready_hosts:,}"),
        ("sleeping hosts", f"{figures.sleeping:,} ({figures.parked:,} parked)"),
        ("dead letters", f"{figures.dead_letters:,}"),
        ("seen URLs", f"{figures.seen:,}"),
        ("revisits scheduled", f"{figures.due:,}"),
        ("pages fetched", f"{pages:,}"),
        ("URL records", f"{figures.records:,}"),
        ("redis memory", memory),
    ]
    if len(figures.servers) > 1:
        for server in figures.servers:
            share = f" ({server.share:.0%} of {server.limit:,} B)" if server.limit else ""
            rows.append((f"  {server.server}", f"{server.used:,} B{share}, {server.records:,} records"))
    rows += [
        ("workers reporting (2 min)", f"{len(workers)}"),
        ("errors", ", ".join(f"{k} {v:,}" for k, v in sorted(errors.items())) or "none"),
        ("duplicates", f"{exact:,} exact, {near:,} near" + (f" ({(exact + near) / pages:.1%})" if pages else "")),
        ("robots.txt drops", f"{int(totals.get('robots:disallowed', 0)):,}"),
        ("status codes", ", ".join(f"{k} {v:,}" for k, v in statuses.items()) or "-"),
        ("latency", ", ".join(f"<={b}s {n:,}" for b, n in latency) or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    return document, [f"{key:<{width}}  {value}" for key, value in rows]
