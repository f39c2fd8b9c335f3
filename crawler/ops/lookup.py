"""What happened to one URL, to one host: the operator's two questions, read from a crawl's Redis.

:func:`url_answer` and :func:`host_answer` read (never write) the shard that
holds the URL or host, a bounded amount each: the back queues of one host (at
most ``scan_limit`` entries per level), the leases in flight, the dead
letters (an ``HSCAN`` walk, at most ``scan_limit``), the CDXJ indexes of the
crawl's WARC files (local or S3). Their answers are plain data (JSON-ready
dicts): ``scrapy frontier url|host`` prints them as text or, with
``--json``, as they are. The schema is in docs/operating.md.

What the frontier does not keep is said, not guessed: a lease's worker is
known once the worker has renewed it (workers name the leases they hold at
each renewal), and a URL record keeps the last fetch only (with the counts of
all of them). A URL that was refused is not stored
either: the rule that refuses it is found by applying the crawl's rules now
(its filters, its host's robots.txt record, its budgets, the memory
admission).
"""

from __future__ import annotations

import json
import struct
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.settings import BaseSettings

from crawler import defaults
from crawler.crawlstate.compact import LinearHash
from crawler.crawlstate.schema import TABLE_FIELD
from crawler.dedup.index import DedupIndex
from crawler.exceptions import CodecError
from crawler.frontier import (
    MAX_LEVELS,
    DeadLetter,
    FrontierConfig,
    SeenConfig,
    read_dead_letters,
    server_fills,
    stored_url,
)
from crawler.metadata.record import UrlRecord, UrlState
from crawler.metadata.store import UrlMetadataStore
from crawler.policy.clock import CrawlClock
from crawler.policy.memory import ADMIT_ALL, Admission
from crawler.redisconn.resp import text
from crawler.robots.policy import (
    RobotsConfig,
    RobotsRecord,
    RobotsRules,
    RobotsState,
    origin_of,
    prepare_robots,
)
from crawler.urls import bloom_positions, normalize_url, sketch_offsets, url_fingerprint, url_key
from crawler.urls.filters import Dropped, FilterConfig, UrlFilter
from crawler.urls.normalize import UrlError
from crawler.warc.store import WarcStoreConfig, s3_client
from crawler.warc.surtkey import surt

if TYPE_CHECKING:
    from crawler.crawlstate.keys import ShardKeys
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis

#: Entries read at most per back-queue level, dead letters at most, CDXJ bytes at most per file.
SCAN_LIMIT = 10_000
CDXJ_MAX_BYTES = 256 * 1024 * 1024


class UrlStatus(StrEnum):
    #: Not in the seen set: the crawl never admitted it.
    NOT_SEEN = "not seen"
    #: The crawl's rules refuse it now (``refused_by`` says which).
    REFUSED = "refused"
    QUEUED = "queued"
    LEASED = "leased"
    FETCHED = "fetched"
    FAILED = "failed"
    DEAD_LETTER = "dead letter"
    #: In the seen set but in no queue, lease or record read here: a worker's hands, or past the scan limit.
    SEEN = "seen"


class HostStatus(StrEnum):
    #: In flight: a request of it is leased to a worker.
    ACTIVE = "active"
    #: Has URLs queued and may be contacted at ``next_allowed``.
    READY = "ready"
    SLEEPING = "sleeping"
    PARKED = "parked"
    #: Its URLs wait in a front queue: it gets a back queue when one comes free.
    WAITING = "waiting"
    #: Has no URL queued (``next_allowed`` still holds for a new one).
    IDLE = "idle"
    #: Its robots.txt failed ``ROBOTS_MAX_FAILURES`` times: its URLs went to the dead letters.
    DEAD = "dead"
    #: Never seen by this crawl.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Lookup:
    """What the answers need besides Redis: the crawl's settings and where its data lives."""

    settings: BaseSettings
    router: ShardRouter
    config: FrontierConfig
    job_dir: Path
    #: ``REDIS_MEMORY_LIMIT`` (bytes, 0: the server's maxmemory) and ``FRONTIER_PAGE_BYTES``: the memory admission.
    memory_limit: int = 0
    page_bytes: int = defaults.FRONTIER_PAGE_BYTES
    scan_limit: int = SCAN_LIMIT

    @property
    def token(self) -> str:
        return RobotsConfig.from_settings(self.settings).user_agent_token


_RECORD_STATUS = {UrlState.FETCHED: UrlStatus.FETCHED, UrlState.FAILED: UrlStatus.FAILED,
                  UrlState.DEAD: UrlStatus.DEAD_LETTER, UrlState.QUEUED: UrlStatus.SEEN}


def _iso(epoch: float | None) -> str | None:
    if not epoch:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


async def url_answer(client: AnyRedis, lookup: Lookup, url: str) -> dict[str, Any]:
    """Everything the crawl knows of ``url`` (see the module docstring)."""
    answer: dict[str, Any] = {"url": url}
    refused_by: dict[str, str] | None = None
    try:
        normalized, host = UrlFilter(FilterConfig.from_settings(lookup.settings)).check(url)
    except Dropped as dropped:
        refused_by = {"rule": str(dropped.reason), "detail": dropped.detail}
        try:
            normalized, host = normalize_url(url)
        except UrlError:
            return {**answer, "status": UrlStatus.REFUSED.value, "refused_by": refused_by, "normalized": None}
    fingerprint = url_fingerprint(normalized)
    key = url_key(fingerprint)
    shard = lookup.router.shard_of(host)
    keys = lookup.router.keys[shard]
    answer.update(normalized=normalized, host=host, fingerprint=fingerprint.hex(), key=key, shard=shard)
    meta = {text(k): text(v) for k, v in (await client.hgetall(lookup.router.crawl_keys.crawl_key("meta"))).items()}
    positions = _positions(lookup, fingerprint, meta)
    seen = await _seen(client, keys, positions, key)
    answer["seen"] = seen
    robots = await _robots(client, lookup, keys, normalized)
    answer["robots"] = robots
    if robots.get("allowed") is False and refused_by is None:
        refused_by = {"rule": "robots.txt", "detail": robots.get("rule") or "unreachable robots.txt"}
    record = await _record(client, lookup, normalized, host)
    queued = await _in_queues(client, lookup, keys, host, normalized, key)
    leased = await _in_leases(client, lookup, keys, host, normalized, key)
    dead = await _in_dead_letters(client, lookup, keys, normalized, key)
    if not seen["member"] and record is None and refused_by is None:
        refused_by = await _admission_refusal(client, lookup, keys, host)
    status = UrlStatus.SEEN if seen["member"] else UrlStatus.NOT_SEEN
    if dead is not None:
        status = UrlStatus.DEAD_LETTER
    elif leased is not None:
        status = UrlStatus.LEASED
    elif queued is not None:
        status = UrlStatus.QUEUED
    elif record is not None:
        status = _RECORD_STATUS[record.state]
    elif refused_by is not None:
        status = UrlStatus.REFUSED
    answer.update(status=status.value, refused_by=refused_by, queued=queued, leased=leased, dead_letter=dead)
    answer["last_fetch"] = await _fetch_of(client, lookup, keys, record) if record is not None else None
    answer["recrawl"] = _recrawl_of(record, lookup) if record is not None else None
    answer["inlinks"] = await _inlinks(client, keys, positions, meta)
    answer["warc"] = _warc_records(lookup, normalized)
    answer["duplicate_of"] = await _duplicate_of(client, lookup, normalized, answer["warc"])
    return answer


async def _duplicate_of(client: AnyRedis, lookup: Lookup, url: str, warc: dict[str, Any]) -> dict[str, Any] | None:
    """The first capture of the payload of the URL's newest WARC record, when it is another URL's (an
    exact duplicate: its record is a revisit). Near duplicates are counted per host, not kept per URL."""
    records = [record for record in warc.get("records", []) if str(record.get("digest") or "").startswith("sha1:")]
    if not records:
        return None
    newest = max(records, key=lambda record: record["timestamp"])
    index = DedupIndex(client, lookup.router, 0)
    await index.open()
    try:
        first = await index.first_capture(newest["digest"])
    finally:
        await index.close()
    if first is None or first[0] == url:
        return None
    return {"url": first[0], "captured": first[1], "digest": newest["digest"]}


def _positions(lookup: Lookup, fingerprint: bytes, meta: dict[str, str]) -> bytes:
    """The URL's Bloom filter positions (which the in-link sketch uses too), hashed as the workers hash
    for the seen set's recorded size; empty without one."""
    bits = int(meta.get("bloom_bits") or 0)
    if not bits:
        return b""
    planned = SeenConfig.from_settings(lookup.settings)
    seen = SeenConfig.of_bits(planned.expected_urls, planned.false_positive_rate, bits)
    return bloom_positions(fingerprint, bits, seen.bloom_hashes)


async def _seen(client: AnyRedis, keys: ShardKeys, positions: bytes, key: int) -> dict[str, Any]:
    bloom = None
    if positions:
        pipe = client.pipeline(transaction=False)
        for j in range(0, len(positions), 4):
            pipe.getbit(keys.bloom, int.from_bytes(positions[j:j + 4], "little"))
        bloom = all(int(bit) for bit in await pipe.execute())
    state = LinearHash.parse(await client.get(keys.lh("seen")))
    member = bool(await client.sismember(keys.seen_exact(state.bucket(key)), str(key)))
    return {"member": member, "bloom": bloom}


async def _robots(client: AnyRedis, lookup: Lookup, keys: ShardKeys, url: str) -> dict[str, Any]:
    origin = origin_of(url)
    blob = await client.get(keys.robots_record(origin))
    record = RobotsRecord.decode(_raw(blob)) if blob else None
    if record is None:
        return {"origin": origin, "fetched": False, "allowed": None,
                "note": "no robots.txt record: fetched first when the host is next claimed"}
    rules = RobotsRules(record, lookup.token)
    allowed = rules.allowed(url)
    out: dict[str, Any] = {"origin": origin, "fetched": True, "state": record.state.name.lower(),
                           "status": record.status, "fetched_at": _iso(record.fetched_at),
                           "expires_at": _iso(record.expires_at), "allowed": allowed, "token": lookup.token}
    if record.state is RobotsState.RULES:
        out["rule"] = rules.deciding_rule(url)
    return out


async def _record(client: AnyRedis, lookup: Lookup, url: str, host: str) -> UrlRecord | None:
    store = UrlMetadataStore(client, lookup.router)
    await store.open()
    try:
        return await store.get(url, host)
    finally:
        await store.close()


def _raw(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def _entry_is(blob: bytes, host: str, url: str, key: int) -> bool:
    """Is a queue entry (a stored request, ``@<key>`` for a revisit, ``#<record>`` resolved) this URL?"""
    if blob[:1] == b"@":
        return blob[1:] == str(key).encode()
    try:
        return stored_url(blob, host) == url
    except CodecError:
        return False


async def _in_queues(client: AnyRedis, lookup: Lookup, keys: ShardKeys, host: str, url: str,
                     key: int) -> dict[str, Any] | None:
    limit = lookup.scan_limit
    for level in range(min(lookup.config.levels, MAX_LEVELS)):
        entries = await client.lrange(keys.queue(host, level), -limit, -1)
        for position, blob in enumerate(reversed(entries)):
            if _entry_is(_raw(blob), host, url, key):
                return {"queue": "back", "level": level, "position": position}
    for level, position, entry in await _front_entries(client, lookup, keys, host):
        if _entry_is(entry, host, url, key):
            return {"queue": "front", "level": level, "position": position}
    return None


async def _in_leases(client: AnyRedis, lookup: Lookup, keys: ShardKeys, host: str, url: str,
                     key: int) -> dict[str, Any] | None:
    leased = await client.hgetall(keys.leased)
    for leaseno, blob in leased.items():
        if leaseno != TABLE_FIELD and _entry_is(_raw(blob), host, url, key):
            number = text(leaseno)
            expiry = None
            members: list[Any] = await client.zrange(keys.leases, 0, -1, withscores=True)
            for member, score in members:
                if text(member).split(" ", 1)[0] == number:
                    expiry = float(score) / 1000
            answer: dict[str, Any] = {"lease": int(number), "until": _iso(expiry), "worker": None,
                                      "reported_at": None}
            for worker, held in (await client.hgetall(keys.holders)).items():
                reported, *numbers = text(held).split(" ")
                if number in numbers:
                    answer.update(worker=text(worker), reported_at=_iso(int(reported) / 1000))
                    return answer
            answer["note"] = (f"its worker has not named it yet: workers name the leases they hold when they renew "
                              f"them, every {lookup.config.lease_timeout / 3:g} s (FRONTIER_LEASE_TIMEOUT / 3)")
            return answer
    return None


def _letter(letter: DeadLetter) -> dict[str, Any]:
    return {"id": letter.request_id, "level": letter.level, "at": _iso(letter.died_at), "error": letter.error,
            "message": letter.message}


async def _in_dead_letters(client: AnyRedis, lookup: Lookup, keys: ShardKeys, url: str,
                           key: int) -> dict[str, Any] | None:
    for letter in await read_dead_letters(client, keys, lookup.scan_limit):
        if _entry_is(letter.blob, letter.host, url, key):
            return _letter(letter)
    return None


async def _admission_refusal(client: AnyRedis, lookup: Lookup, keys: ShardKeys, host: str) -> dict[str, str] | None:
    """A budget, or the memory admission, that refuses new URLs of ``host`` now, if any."""
    config = lookup.config
    pages = int(await client.hget(keys.host_pages, host) or 0)
    if config.host_page_budget and pages >= config.host_page_budget:
        return {"rule": "host_budget", "detail": f"{pages:,} URLs of {host} admitted, HOST_PAGE_BUDGET is "
                                                 f"{config.host_page_budget:,}"}
    admission = await _memory_admission(client, lookup, keys)
    if admission.level < 0 or (not admission.new_hosts and pages == 0):
        return {"rule": "memory", "detail": admission.reason}
    if admission.reason:
        return {"rule": "memory", "detail": f"{admission.reason} (a new URL of a lower level is refused)"}
    return None


async def _memory_admission(client: AnyRedis, lookup: Lookup, keys: ShardKeys) -> Admission:
    """What the server holding ``keys``' shard admits now: what the workers' memory watch computes."""
    fills = await server_fills(client, lookup.router, lookup.memory_limit, lookup.config.levels, lookup.page_bytes)
    return next((fill.admission for shards, fill in fills if keys.shard in shards), ADMIT_ALL)


async def _fetch_of(client: AnyRedis, lookup: Lookup, keys: ShardKeys, record: UrlRecord) -> dict[str, Any]:
    clock = CrawlClock.from_settings(lookup.settings)
    offset = clock.at(time.time()) - time.time() if clock.scale == 1.0 else 0.0
    return {
        "state": record.state.name.lower(), "status": record.status,
        "at": _iso(record.fetched_at - offset), "payload_digest4": record.digest.hex() or None,
        "length": record.length, "outlinks": record.outlinks, "observations": record.observations,
        "changes": record.changes, "first_fetch": _iso(record.first_fetch - offset) if record.first_fetch else None,
        "captured": _iso(record.captured / 1e6) if record.captured else None,
        "depth": record.depth,
        "note": "the record keeps the last fetch, and the counts of all of them",
    }


def _recrawl_of(record: UrlRecord, lookup: Lookup) -> dict[str, Any]:
    clock = CrawlClock.from_settings(lookup.settings)
    offset = clock.at(time.time()) - time.time() if clock.scale == 1.0 else 0.0
    rate = record.changes / record.observations if record.observations else None
    return {
        "next_visit": _iso(record.next_visit - offset) if record.next_visit else None,
        "level": record.level if record.next_visit else None,
        "observations": record.observations, "changes": record.changes,
        "change_rate": round(rate, 4) if rate is not None else None,
    }


async def _inlinks(client: AnyRedis, keys: ShardKeys, positions: bytes, meta: dict[str, str]) -> int | None:
    cells = int(meta.get("inlink_cells") or 0)
    count = len(positions) // 4
    if not cells or not count:
        return None
    offsets = sketch_offsets(struct.unpack(f"<{count}I", positions[: 4 * count]), cells)
    args = [part for offset in offsets for part in ("GET", "u8", offset)]
    values = await client.execute_command("BITFIELD_RO", keys.inlinks, *args)
    return min(int(v) for v in values) if values else 0


def _warc_records(lookup: Lookup, url: str) -> dict[str, Any]:
    """The URL's response and revisit records, from the CDXJ index of every finished WARC file."""
    store = WarcStoreConfig.from_settings(lookup.settings, lookup.job_dir)
    prefix = surt(url) + " "
    found: list[dict[str, Any]] = []

    def scan(name: str, lines: Any) -> None:
        for line in lines:
            line = line.decode() if isinstance(line, bytes) else line
            if line.startswith(prefix):
                _, timestamp, fields = line.rstrip("\n").split(" ", 2)
                entry = json.loads(fields)
                found.append({"file": entry.get("filename", name), "offset": int(entry.get("offset", 0)),
                              "length": int(entry.get("length", 0)), "timestamp": timestamp,
                              "status": entry.get("status"), "digest": entry.get("digest"),
                              "kind": entry.get("mime") if entry.get("mime") == "warc/revisit" else "response"})

    for path in sorted(store.spool.glob("*.cdxj")) if store.spool.is_dir() else []:
        if path.stat().st_size <= CDXJ_MAX_BYTES:
            with path.open(encoding="utf-8", errors="replace") as handle:
                scan(path.name, handle)
    where = str(store.spool)
    if store.is_s3:
        from botocore.exceptions import BotoCoreError, ClientError

        where = store.describe()
        try:
            client = s3_client(store)
            pages = client.get_paginator("list_objects_v2").paginate(
                Bucket=store.bucket, Prefix=f"{store.key_prefix}/" if store.key_prefix else "")
            for page in pages:
                for item in page.get("Contents", []):
                    if item["Key"].endswith(".cdxj") and item["Size"] <= CDXJ_MAX_BYTES:
                        body = client.get_object(Bucket=store.bucket, Key=item["Key"])["Body"]
                        scan(item["Key"].rsplit("/", 1)[-1], body.iter_lines())
        except (BotoCoreError, ClientError, OSError) as exc:  # an unreachable store is part of the answer
            return {"store": where, "records": found, "error": f"{type(exc).__name__}: {exc}"}
    return {"store": where, "records": found,
            "note": "records of the WARC file still open are indexed when it closes"}


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
    members: list[Any] = await client.zrange(keys.leases, 0, -1)
    in_flight = [text(member) for member in members if text(member).rsplit(" ", 1)[-1] == host]
    queued = {str(level): int(n) for level, n in enumerate(lengths) if int(n)}
    front = len(await _front_entries(client, lookup, keys, host)) if not active else 0
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
        "next_allowed": _iso(next_allowed), "next_allowed_in_s": round(next_allowed - now, 3) if next_allowed else None,
        "in_flight": len(in_flight),
        "politeness": {
            "key": config.politeness_key.value, "group": text(group) if group is not None else host,
            "per_key": config.per_key, "min_delay": config.min_delay, "delay_factor": config.delay_factor,
            "max_delay": config.max_delay, "crawl_delay_floor": floor,
            "throttle_level": int(throttle or 0), "connection_failures": int(failures or 0),
            "delay_reason": _delay_reason(floor, int(throttle or 0), int(failures or 0), config),
        },
        "robots": robots,
        "robots_decided_until": _iso(int(robots_until) / 1000) if robots_until is not None else None,
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
        record = RobotsRecord.decode(_raw(blob)) if blob else None
        if record is None:
            continue
        rules = RobotsRules(record, lookup.token)
        group = prepare_robots(record.body, lookup.token).splitlines() if record.state is RobotsState.RULES else None
        return {"origin": origin, "state": record.state.name.lower(), "status": record.status,
                "error": record.error or None, "fetched_at": _iso(record.fetched_at),
                "expires_at": _iso(record.expires_at), "failures": record.failures, "token": lookup.token,
                "group": group, "crawl_delay": rules.crawl_delay(float("inf"))[0]}
    return {"origin": None, "state": None, "checked": origins,
            "note": "no robots.txt record: fetched first when the host is next claimed"}


async def _front_entries(client: AnyRedis, lookup: Lookup, keys: ShardKeys,
                         host: str) -> list[tuple[int, int, bytes]]:
    """``host``'s entries in the front queues: (level, entries ahead of it, entry without the host), of
    the last ``scan_limit`` entries of each level."""
    prefix = host.encode() + b" "
    found = []
    for level in range(min(lookup.config.levels, MAX_LEVELS)):
        entries = await client.lrange(keys.front(level), -lookup.scan_limit, -1)
        for position, entry in enumerate(reversed(entries)):
            entry = _raw(entry)
            if entry.startswith(prefix):
                found.append((level, position, entry[len(prefix):]))
    return found


async def _dead_letters_of(client: AnyRedis, keys: ShardKeys, host: str, limit: int) -> list[dict[str, Any]]:
    """The newest ``limit`` dead letters of ``host`` (of the first SCAN_LIMIT read)."""
    letters = [letter for letter in await read_dead_letters(client, keys, SCAN_LIMIT) if letter.host == host]
    return [_letter(letter) for letter in sorted(letters, key=lambda letter: letter.died_at, reverse=True)[:limit]]


# -- the answers as text ----------------------------------------------------------------------


def url_lines(answer: dict[str, Any]) -> list[str]:
    """:func:`url_answer` for a person: the state first, then what explains it."""
    lines = [f"url         {answer['url']}"]
    if answer.get("normalized") is None:
        refused = answer.get("refused_by") or {}
        return [*lines, f"status      refused: {refused.get('rule')} ({refused.get('detail')})"]
    lines += [f"normalized  {answer['normalized']}",
              f"host        {answer['host']} (shard {answer['shard']})",
              f"fingerprint {answer['fingerprint']} (key {answer['key']})"]
    status = answer["status"]
    detail = ""
    if answer.get("queued"):
        queued = answer["queued"]
        detail = f": {queued['queue']} queue, level {queued['level']}, {queued['position']} ahead of it"
    elif answer.get("leased"):
        leased = answer["leased"]
        holder = f"held by {leased['worker']} (named at {leased['reported_at']})" if leased["worker"] \
            else "its worker not named yet"
        detail = f": lease {leased['lease']} until {leased['until']}, {holder}"
    elif answer.get("dead_letter"):
        dead = answer["dead_letter"]
        detail = f" since {dead['at']}: {dead['error']} {dead['message']}".rstrip()
    elif answer.get("refused_by"):
        refused = answer["refused_by"]
        detail = f" by {refused['rule']}: {refused['detail']}"
    elif status == UrlStatus.NOT_SEEN.value:
        robots = answer.get("robots") or {}
        if robots.get("allowed") is None:
            detail = " (not in the frontier; its host's robots.txt is not fetched yet)"
        else:
            detail = " (not in the frontier; robots.txt of its host would allow it)"
    lines.append(f"status      {status}{detail}")
    robots = answer.get("robots") or {}
    if robots.get("fetched"):
        verdict = "allowed" if robots.get("allowed") else "disallowed"
        rule = f" by '{robots['rule']}'" if robots.get("rule") else ""
        lines.append(f"robots.txt  {verdict}{rule} for '{robots.get('token')}' ({robots.get('state')}, HTTP "
                     f"{robots.get('status')}, fetched {robots.get('fetched_at')}, until {robots.get('expires_at')})")
    fetch = answer.get("last_fetch")
    if fetch:
        lines.append(f"last fetch  {fetch['at']}: HTTP {fetch['status']} ({fetch['state']}), {fetch['length']:,} B, "
                     f"digest {fetch['payload_digest4'] or '-'}..., {fetch['outlinks']} links; "
                     f"{fetch['observations']} observations, {fetch['changes']} changes")
    recrawl = answer.get("recrawl")
    if recrawl:
        rate = recrawl["change_rate"]
        lines.append(f"recrawl     {recrawl['next_visit'] or 'not scheduled'} (level {recrawl['level']}; changed "
                     f"{recrawl['changes']} of {recrawl['observations']} times"
                     + (f", rate {rate:.2f})" if rate is not None else ")"))
    if answer.get("inlinks") is not None:
        lines.append(f"in-links    about {answer['inlinks']}")
    duplicate = answer.get("duplicate_of")
    if duplicate:
        lines.append(f"duplicate   of {duplicate['url']} (captured {duplicate['captured']}; {duplicate['digest']})")
    warc = answer.get("warc") or {}
    for record in warc.get("records", []):
        lines.append(f"warc        {record['file']} offset {record['offset']} length {record['length']} "
                     f"({record['timestamp']}, HTTP {record['status']})")
    if warc.get("error"):
        lines.append(f"warc        {warc['store']}: {warc['error']}")
    elif not warc.get("records"):
        lines.append(f"warc        no record in the indexes of {warc.get('store')}")
    return lines


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
