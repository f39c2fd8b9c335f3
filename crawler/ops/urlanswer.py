"""The operator's first question: what happened to one URL (``scrapy frontier url``), read from the
crawl's Redis and its WARC indexes; the answer as data (:func:`url_answer`) and as text (:func:`url_lines`).
What it reads, and what it cannot know, is said in :mod:`crawler.ops.lookup`."""

from __future__ import annotations

import json
import struct
import time
from typing import TYPE_CHECKING, Any

from crawler.crawlstate.compact import LinearHash
from crawler.crawlstate.schema import TABLE_FIELD
from crawler.dedup.index import DedupIndex
from crawler.exceptions import CodecError
from crawler.frontier import (
    MAX_LEVELS,
    SeenConfig,
    read_dead_letters,
    server_fills,
    stored_url,
)
from crawler.metadata.record import UrlRecord, UrlState
from crawler.metadata.recordstore import UrlMetadataStore
from crawler.ops.lookup import Lookup, UrlStatus, front_entries, iso, letter_answer, raw_bytes
from crawler.policy.clock import CrawlClock
from crawler.policy.memory import ADMIT_ALL, Admission
from crawler.redisconn.resp import text
from crawler.robots.policy import (
    RobotsRecord,
    RobotsRules,
    RobotsState,
    origin_of,
)
from crawler.urls import bloom_positions, normalize_url, sketch_offsets, url_fingerprint, url_key
from crawler.urls.filters import Dropped, FilterConfig, UrlFilter
from crawler.urls.normalize import UrlError
from crawler.warc.surtkey import surt
from crawler.warc.uploads import WarcStoreConfig, s3_client

if TYPE_CHECKING:
    from crawler.crawlstate.keys import ShardKeys
    from crawler.redisconn.link import AnyRedis


#: CDXJ bytes read at most per file.
CDXJ_MAX_BYTES = 256 * 1024 * 1024
_RECORD_STATUS = {UrlState.FETCHED: UrlStatus.FETCHED, UrlState.FAILED: UrlStatus.FAILED,
                  UrlState.DEAD: UrlStatus.DEAD_LETTER, UrlState.QUEUED: UrlStatus.SEEN}


async def url_answer(client: AnyRedis, lookup: Lookup, url: str) -> dict[str, Any]:
    """Everything the crawl knows of ``url`` (see :mod:`crawler.ops.lookup`)."""
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
    # No count recorded: a crawl no worker of this version has opened yet, whose filter was set at its
    # size's optimum count (7 at the defaults): double hashing makes these its first positions.
    hashes = int(meta.get("bloom_hashes") or 0) or SeenConfig.from_settings(lookup.settings).bloom_hashes
    return bloom_positions(fingerprint, bits, hashes)


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
    record = RobotsRecord.decode(raw_bytes(blob)) if blob else None
    if record is None:
        return {"origin": origin, "fetched": False, "allowed": None,
                "note": "no robots.txt record: fetched first when the host is next claimed"}
    rules = RobotsRules(record, lookup.token)
    allowed = rules.allowed(url)
    out: dict[str, Any] = {"origin": origin, "fetched": True, "state": record.state.name.lower(),
                           "status": record.status, "fetched_at": iso(record.fetched_at),
                           "expires_at": iso(record.expires_at), "allowed": allowed, "token": lookup.token}
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
            if _entry_is(raw_bytes(blob), host, url, key):
                return {"queue": "back", "level": level, "position": position}
    for level, position, entry in await front_entries(client, lookup, keys, host):
        if _entry_is(entry, host, url, key):
            return {"queue": "front", "level": level, "position": position}
    return None


async def _in_leases(client: AnyRedis, lookup: Lookup, keys: ShardKeys, host: str, url: str,
                     key: int) -> dict[str, Any] | None:
    leased = await client.hgetall(keys.leased)
    for leaseno, blob in leased.items():
        if leaseno != TABLE_FIELD and _entry_is(raw_bytes(blob), host, url, key):
            number = text(leaseno)
            expiry = None
            members: list[Any] = await client.zrangebyscore(keys.leases, "-inf", "(inf", withscores=True)
            for member, score in members:
                if text(member).split(" ", 1)[0] == number:
                    expiry = float(score) / 1000
            answer: dict[str, Any] = {"lease": int(number), "until": iso(expiry), "worker": None,
                                      "reported_at": None}
            for worker, held in (await client.hgetall(keys.holders)).items():
                reported, *numbers = text(held).split(" ")
                if number in numbers:
                    answer.update(worker=text(worker), reported_at=iso(int(reported) / 1000))
                    return answer
            answer["note"] = (f"its worker has not named it yet: workers name the leases they hold when they renew "
                              f"them, every {lookup.config.lease_timeout / 3:g} s (FRONTIER_LEASE_TIMEOUT / 3)")
            return answer
    return None




async def _in_dead_letters(client: AnyRedis, lookup: Lookup, keys: ShardKeys, url: str,
                           key: int) -> dict[str, Any] | None:
    for letter in await read_dead_letters(client, keys, lookup.scan_limit):
        if _entry_is(letter.blob, letter.host, url, key):
            return letter_answer(letter)
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
        "at": iso(record.fetched_at - offset), "payload_digest4": record.digest.hex() or None,
        "length": record.length, "outlinks": record.outlinks, "observations": record.observations,
        "changes": record.changes, "first_fetch": iso(record.first_fetch - offset) if record.first_fetch else None,
        "captured": iso(record.captured / 1e6) if record.captured else None,
        "depth": record.depth,
        "note": "the record keeps the last fetch, and the counts of all of them",
    }


def _recrawl_of(record: UrlRecord, lookup: Lookup) -> dict[str, Any]:
    clock = CrawlClock.from_settings(lookup.settings)
    offset = clock.at(time.time()) - time.time() if clock.scale == 1.0 else 0.0
    rate = record.changes / record.observations if record.observations else None
    return {
        "next_visit": iso(record.next_visit - offset) if record.next_visit else None,
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
