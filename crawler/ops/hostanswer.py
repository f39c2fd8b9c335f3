"""The operator's second question: what is happening to one host (``scrapy frontier host``), read from
the crawl's Redis; the answer as data (:func:`host_answer`) and as text (:func:`host_lines`). What it reads
is said in :mod:`crawler.ops.lookup`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from crawler.frontier import (
    MAX_LEVELS,
    FrontierConfig,
    read_dead_letters,
)
from crawler.ops.lookup import SCAN_LIMIT, HostStatus, Lookup, front_entries, iso, letter_answer, raw_bytes
from crawler.redisconn.resp import text
from crawler.robots.policy import (
    RobotsRecord,
    RobotsRules,
    RobotsState,
    origin_of,
    prepare_robots,
)
from crawler.urls import normalize_url
from crawler.urls.normalize import UrlError

if TYPE_CHECKING:
    from crawler.crawlstate.keys import ShardKeys
    from crawler.redisconn.link import AnyRedis



async def host_answer(client: AnyRedis, lookup: Lookup, host_or_url: str) -> dict[str, Any]:
    """Everything the crawl knows of a host: its state and why, its delay and why, its robots.txt,
    its counts and budget, its last dead letters."""
    given = host_or_url
    try:
        host = normalize_url(given if "://" in given else f"http://{given}/")[1]
    except UrlError as exc:
        return {"host": given, "status": HostStatus.UNKNOWN.value, "error": str(exc)}
    config = lookup.config
    shard = lookup.router.shard_of(host)
    keys = lookup.router.keys[shard]
    levels = min(config.levels, MAX_LEVELS)
    pipe = client.pipeline(transaction=False)
    pipe.sismember(keys.active, host)
    pipe.zscore(keys.ready, host)
    pipe.zscore(keys.sleeping, host)
    pipe.sismember(keys.parked, host)
    pipe.zscore(keys.cool, host)
    pipe.hget(keys.host_delay, host)
    pipe.hget(keys.host_throttle, host)
    pipe.hget(keys.host_failures, host)
    pipe.hget(keys.host_robots, host)
    pipe.hget(keys.group, host)
    pipe.hmget(keys.host_quality, [f"{host}|n", f"{host}|e", f"{host}|d"])
    pipe.hget(keys.host_pages, host)
    pipe.smembers(keys.sitemaps(host))
    for level in range(levels):
        pipe.llen(keys.queue(host, level))
    (active, ready_at, wake_at, parked, cool_at, delay_ms, throttle, failures, robots_until, group, quality,
     budget_used, sitemaps, *lengths) = await pipe.execute()
    members: list[Any] = await client.zrangebyscore(keys.leases, "-inf", "(inf")
    in_flight = [text(member) for member in members if text(member).rsplit(" ", 1)[-1] == host]
    queued = {str(level): int(n) for level, n in enumerate(lengths) if int(n)}
    front = len(await front_entries(client, lookup, keys, host)) if not active else 0
    pages, errors, near = (int(v or 0) for v in quality)
    origins = [origin_of(given)] if "://" in given else [f"https://{host}", f"http://{host}"]
    robots = await _host_robots(client, lookup, keys, origins)
    now = time.time()
    next_allowed = next((float(t) / 1000 for t in (ready_at, wake_at, cool_at) if t is not None), None)
    if in_flight:
        status = HostStatus.ACTIVE
    elif parked:
        status = HostStatus.PARKED
    elif wake_at is not None:
        status = HostStatus.SLEEPING
    elif ready_at is not None:
        status = HostStatus.READY
    elif robots.get("state") == RobotsState.UNREACHABLE.name.lower() and not active and pages == 0 \
            and int(failures or 0) == 0 and await _dead_letters_of(client, keys, host, 1):
        status = HostStatus.DEAD
    elif front:
        status = HostStatus.WAITING
    elif cool_at is not None or pages or active:
        status = HostStatus.IDLE
    else:
        status = HostStatus.UNKNOWN
    floor = int(delay_ms) / 1000 if delay_ms is not None else None
    answer: dict[str, Any] = {
        "host": host, "shard": shard, "status": status.value,
        "why": _why(status, int(throttle or 0), int(failures or 0), robots, next_allowed, now, config),
        "next_allowed": iso(next_allowed), "next_allowed_in_s": round(next_allowed - now, 3) if next_allowed else None,
        "in_flight": len(in_flight),
        "politeness": {
            "key": config.politeness_key.value, "group": text(group) if group is not None else host,
            "per_key": config.per_key, "min_delay": config.min_delay, "delay_factor": config.delay_factor,
            "max_delay": config.max_delay, "crawl_delay_floor": floor,
            "throttle_level": int(throttle or 0), "connection_failures": int(failures or 0),
            "delay_reason": _delay_reason(floor, int(throttle or 0), int(failures or 0), config),
        },
        "robots": robots,
        "robots_decided_until": iso(int(robots_until) / 1000) if robots_until is not None else None,
        "sitemaps": sorted(text(s) for s in sitemaps),
        "queued": {"total": sum(queued.values()) + front, "by_level": queued, "front": front},
        "pages": pages, "errors": errors, "near_duplicates": near,
        "budget": {"used": int(budget_used or 0), "host_page_budget": config.host_page_budget or None},
        "dead_letters": await _dead_letters_of(client, keys, host, 5),
    }
    return answer


def _why(status: HostStatus, throttle: int, failures: int, robots: dict[str, Any], next_allowed: float | None,
         now: float, config: FrontierConfig) -> str:
    if status is HostStatus.ACTIVE:
        return "a request of it is in flight"
    if status is HostStatus.PARKED:
        return f"parked after {failures} connection failures in a row"
    if status is HostStatus.DEAD:
        return "its robots.txt failed ROBOTS_MAX_FAILURES times: its URLs went to the dead letters"
    if status is HostStatus.UNKNOWN:
        return "this crawl has never seen the host"
    if status is HostStatus.WAITING:
        return "its URLs wait in a front queue until the frontier gives it a back queue"
    if robots.get("state") == RobotsState.UNREACHABLE.name.lower():
        return f"its robots.txt could not be fetched ({robots.get('error') or 'error'}): nothing is fetched " \
               f"until it is, again at {robots.get('expires_at')}"
    if status is HostStatus.SLEEPING:
        if throttle:
            return f"backing off after {throttle} 429/503 answers in a row (Retry-After honoured)"
        return f"its next allowed time is more than FRONTIER_SLEEP_HORIZON ({config.sleep_horizon:g} s) away"
    if status is HostStatus.READY:
        waiting = (next_allowed or now) - now
        return "may be contacted now" if waiting <= 0 else f"waits {waiting:.1f} s for its politeness delay"
    return "no URL of it is queued"


def _delay_reason(floor: float | None, throttle: int, failures: int, config: FrontierConfig) -> str:
    if throttle:
        return f"backoff: {throttle} 429/503 answers in a row (Retry-After when sent)"
    if failures:
        return f"backoff: {failures} connection failures in a row"
    if floor is not None and floor > config.min_delay:
        return f"robots.txt Crawl-delay ({floor:g} s, at most ROBOTS_MAX_CRAWL_DELAY)"
    return f"FRONTIER_MIN_DELAY ({config.min_delay:g} s) or FRONTIER_DELAY_FACTOR ({config.delay_factor:g}) " \
           "x the last fetch time, whichever is longer"


async def _host_robots(client: AnyRedis, lookup: Lookup, keys: ShardKeys, origins: list[str]) -> dict[str, Any]:
    """The robots.txt record of the first of ``origins`` that has one (a host is asked by its
    ``http`` and ``https`` origins; give a URL to ask for another port)."""
    for origin in origins:
        blob = await client.get(keys.robots_record(origin))
        record = RobotsRecord.decode(raw_bytes(blob)) if blob else None
        if record is None:
            continue
        rules = RobotsRules(record, lookup.token)
        group = prepare_robots(record.body, lookup.token).splitlines() if record.state is RobotsState.RULES else None
        return {"origin": origin, "state": record.state.name.lower(), "status": record.status,
                "error": record.error or None, "fetched_at": iso(record.fetched_at),
                "expires_at": iso(record.expires_at), "failures": record.failures, "token": lookup.token,
                "group": group, "crawl_delay": rules.crawl_delay(float("inf"))[0]}
    return {"origin": None, "state": None, "checked": origins,
            "note": "no robots.txt record: fetched first when the host is next claimed"}




async def _dead_letters_of(client: AnyRedis, keys: ShardKeys, host: str, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` dead letters of ``host`` (of the first SCAN_LIMIT read)."""
    letters = [letter for letter in await read_dead_letters(client, keys, SCAN_LIMIT) if letter.host == host]
    newest = sorted(letters, key=lambda letter: letter.died_at, reverse=True)[:limit]
    return [letter_answer(letter) for letter in newest]


# -- the answers as text ----------------------------------------------------------------------




def host_lines(answer: dict[str, Any]) -> list[str]:
    """:func:`host_answer` for a person."""
    if answer.get("error"):
        return [f"host        {answer['host']}: {answer['error']}"]
    politeness = answer["politeness"]
    robots = answer["robots"]
    queued = answer["queued"]
    lines = [
        f"host        {answer['host']} (shard {answer['shard']})",
        f"status      {answer['status']}: {answer['why']}",
        f"next        {answer['next_allowed'] or '-'}"
        + (f" (in {answer['next_allowed_in_s']:.1f} s)" if answer.get("next_allowed_in_s") else ""),
        f"politeness  key {politeness['key']} ({politeness['group']}), {politeness['per_key']} at a time; "
        f"delay: {politeness['delay_reason']}",
    ]
    if robots.get("state"):
        lines.append(f"robots.txt  {robots['state']}, HTTP {robots['status']}, fetched {robots['fetched_at']}, "
                     f"refreshed after {robots['expires_at']} ({robots['origin']})")
        if robots.get("group") is not None:
            group = "; ".join(robots["group"]) or "(no group applies: everything allowed)"
            lines.append(f"  group for '{robots['token']}': {group}")
    else:
        lines.append(f"robots.txt  {robots.get('note')}")
    levels = ", ".join([f"level {level}: {n:,}" for level, n in queued["by_level"].items()]
                       + ([f"front queues: {queued['front']:,}"] if queued["front"] else []))
    lines.append(f"queued      {queued['total']:,}" + (f" ({levels})" if levels else ""))
    budget = answer["budget"]
    cap = f" of {budget['host_page_budget']:,}" if budget["host_page_budget"] else " (no HOST_PAGE_BUDGET)"
    lines.append(f"pages       {answer['pages']:,} fetched, {answer['errors']:,} errors, "
                 f"{answer['near_duplicates']:,} near duplicates; budget {budget['used']:,}{cap}")
    for letter in answer["dead_letters"]:
        lines.append(f"dead letter {letter['at']}: {letter['error']} {letter['message']}".rstrip())
    return lines
