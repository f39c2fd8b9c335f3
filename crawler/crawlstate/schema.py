"""The Redis schema the Lua scripts share with Python: the crawl's keys and the URL record's layout.

One source for each fact, here: the keys of a frontier shard
(:data:`SHARD_KEYS`, the duplicate index's among them; :class:`crawler.crawlstate.keys.ShardKeys`
builds them) and the layout of a URL record (:data:`RECORD_STRUCT`;
:mod:`crawler.metadata.record` packs it). Nothing here imports what it describes.
:mod:`crawler.crawlstate.library` writes them into the crawl's Lua as it is composed (as literals:
``K.ready`` becomes ``'ready'``; a table named on its own is defined whole):

* ``K.<name>``: a frontier shard key's suffix (``P .. K.ready``; a family,
  ending in ``:``, takes its member after it: ``P .. K.queue .. host``);
* ``URLREC.<field>``: a field's position in a URL record's head (1-based, as
  Lua counts; ``URLREC_FORMAT`` its ``struct`` format, ``URLREC_COUNT`` its
  fields), ``URLREC_FLAG.<NAME>`` the bits of its flags, ``URL_STATE.<STATE>``
  the values of its state field.

No script writes a key name or a record position of its own: the contract
tests check that every ``K.``/``URLREC.`` name a script uses exists here, that
no script builds a key from a string literal, and that every key a crawl
leaves in Redis matches the schema.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

# -- the keys of a frontier shard (crawler.crawlstate.keys builds them) ---------------------


class KeySpec(NamedTuple):
    """One key (or, with a trailing ``:``, one family of keys) of a frontier shard."""

    suffix: str
    kind: str
    meaning: str
    #: What the key's size grows with: "page" (crawled pages or seen URLs), "queued" (URLs waiting),
    #: "host", "fixed" (sized once for the crawl), "crawl" (small or bounded).
    grows: str = "crawl"
    #: A hash read or written by field on a page's path, with up to one field per host or request in
    #: flight: kept as a hash table from the start (:data:`TABLE_FIELD`), never a listpack, which Redis
    #: scans from its start at every lookup (a few hundred hosts in one: a sixth of Redis' instructions).
    table: bool = False


#: The field that keeps a ``table`` hash a hash table: its value is longer than the server keeps in a
#: listpack (``hash-max-listpack-value``), written by every worker as it opens a shard. No host, lease
#: number or counter name is empty; readers of a whole hash skip it.
TABLE_FIELD = b""


#: The Lua name -> key of every key of a frontier shard (prefix ``frontier:{<shard tag>}:``).
SHARD_KEYS: dict[str, KeySpec] = {
    "bloom": KeySpec("seen:bloom", "string", "bitmap of the seen set's Bloom filter", "fixed"),
    "seen_exact": KeySpec("seen:x:", "set", "<bucket>: 64-bit URL keys (intset), one bucket of the exact seen "
                           "store (linear hashing, state lh:seen)", "page"),
    "seen_count": KeySpec("seencount", "string", "URLs ever added to the seen set"),
    "lh": KeySpec("lh:", "string",
                   "<structure>: level, split pointer, entries of a linear-hashing structure (struct '>BI4I8')"),
    "host_pages": KeySpec("budget:host", "hash", "host -> URLs enqueued (the per-host page budget)", "host",
                           table=True),
    "domain_pages": KeySpec("budget:domain", "hash", "registered domain -> URLs enqueued", "host", table=True),
    "front": KeySpec("front:", "list", "<level>: \"<host> <entry>\" of one priority level (hosts without a "
                      "back queue)", "queued"),
    "selector": KeySpec("sel", "string", "the biased selector's round-robin counter"),
    "queue": KeySpec("q:", "list", "<host>:<level>: the host's back queue of one level, entries (oldest at "
                      "the right)", "queued"),
    "active": KeySpec("active", "set", "hosts that own a back queue (ready, in flight or asleep)", "host"),
    "ready": KeySpec("ready", "zset", "awake host -> earliest time (ms) it may be contacted", "host"),
    "sleeping": KeySpec("sleep", "zset", "host that keeps its back queue -> wake time (ms)", "host"),
    "parked": KeySpec("parked", "set", "sleeping hosts parked after connection failures", "host"),
    "cool": KeySpec("cool", "zset", "host without a back queue -> next allowed time (ms)", "host"),
    "leases": KeySpec("leases", "zset", "lease member -> expiry (ms)"),
    "leased": KeySpec("leased", "hash", "lease number -> the entry it holds (in flight only)", table=True),
    "holders": KeySpec("holders", "hash", "worker -> \"<ms> <lease number>...\": the leases it held at its last "
                        "renewal (for scrapy frontier url; one field per worker process)"),
    "lease_sequence": KeySpec("leaseseq", "string", "the last lease (and dead letter) number given"),
    "queued": KeySpec("queued", "string", "requests in front and back queues (not leased)"),
    "host_delay": KeySpec("hostdelay", "hash", "host -> minimum delay (ms) from robots.txt Crawl-delay", "host"),
    "host_throttle": KeySpec("hostthrottle", "hash", "host -> throttle level (429/503 in a row)", "host"),
    "host_failures": KeySpec("hostfail", "hash", "host -> consecutive connection-level failures", "host"),
    "host_robots": KeySpec("robots", "hash", "host -> time (ms) until which its robots.txt decision stands",
                            "host", table=True),
    "robots_record": KeySpec("robots:", "string", "<origin>: the shared robots.txt record of an origin", "host"),
    "sitemaps": KeySpec("sitemaps:", "set", "<host>: sitemap URLs robots.txt lists", "host"),
    "slots": KeySpec("slots", "hash", "host -> \"<in flight> <spacing ms> <last start ms> <hold ms> <slot free "
                      "ms>...\" (only for keys with several requests in flight)", "host", table=True),
    "slot_limit": KeySpec("slotk", "hash", "politeness key -> its requests in flight at most (DOWNLOAD_SLOTS "
                           "concurrency)", "host"),
    "group": KeySpec("group", "hash", "host -> its politeness group (domain or address)", "host", table=True),
    "group_next": KeySpec("gnext", "hash", "politeness group -> next allowed time (ms)", "host", table=True),
    "group_busy": KeySpec("gbusy", "hash", "politeness group -> its host in flight (with "
                           "FRONTIER_CONCURRENCY_PER_KEY > 1: its requests in flight)", "host"),
    "group_wait": KeySpec("gwait:", "zset", "<group>: ready hosts waiting for their group, by time", "host"),
    "dead": KeySpec("dead", "hash", "dead letter number -> its request", "page"),
    "dead_info": KeySpec("deadinfo", "hash", "dead letter number -> \"host\\tlevel\\ttime\\terror\\tmessage\"",
                          "page"),
    "due": KeySpec("due", "zset", "bucket number -> its bound, the lowest due time (crawl-clock s) it holds: "
                    "the index of the recrawl schedule", "page"),
    "due_bucket": KeySpec("due:", "zset", "<bucket>: URL key -> its due time from the bucket's bound, latest first "
                           "(due_score), one bucket of the recrawl schedule", "page"),
    "due_sequence": KeySpec("dueseq", "string", "the last due bucket number given"),
    "due_count": KeySpec("duecount", "string", "URLs in the recrawl schedule"),
    "inlinks": KeySpec("inlinks", "string", "8-bit counters: the in-link sketch", "fixed"),
    "host_quality": KeySpec("hostq", "hash", "\"<host>|n\", \"|e\", \"|d\" -> pages, errors, near duplicates",
                             "host", table=True),
    "urls": KeySpec("url:", "hash", "<bucket>: URL key -> URL record (crawler/metadata/record.py), one bucket "
                     "(linear hashing, state lh:url)", "page"),
    "digests": KeySpec("dx:", "hash", "<bucket>: payload digest key -> first capture, one bucket of the exact "
                        "duplicate index (linear hashing, state lh:dx)", "page"),
    "near": KeySpec("nd:", "hash", "<block>:<high byte>:<low byte div 16>: low byte mod 16 -> SimHashes with "
                     "that 16-bit block (the near-duplicate index)", "page"),
    "host_ids": KeySpec("hostid", "hash", "host -> its number in the shard's URL records", "host", table=True),
    "host_names": KeySpec("hostname", "hash", "host number -> host", "host", table=True),
    "host_sequence": KeySpec("hostseq", "string", "the last host number given"),
}

#: Keys of the whole crawl, outside any shard (prefix ``frontier:{<crawl>}:``).
CRAWL_KEYS: dict[str, KeySpec] = {
    "meta": KeySpec("meta", "hash", "the crawl's fixed facts: layout, normalization version, shards, politeness "
                     "key, seen set and sketch sizes"),
    "draining": KeySpec("draining", "string", "set while the crawl drains (scrapy frontier drain)"),
    "totals": KeySpec("totals", "hash", "every worker's counters, summed"),
    "timeline": KeySpec("timeline", "list", "progress samples (msgpack), the newest 100,000"),
    "workers": KeySpec("workers", "zset", "worker -> when it last reported"),
    "render": KeySpec("render", "hash", "host or domain -> render mark: on / off (an operator's), "
                       "js:<until ms> / static:<until ms> (detected)", "host"),
    "metrics_leader": KeySpec("metricsleader", "string", "the worker exporting the crawl-wide metrics (a lease "
                               "of three METRICS_REFRESH_INTERVAL)"),
    "slot_conf": KeySpec("slotconf", "hash", "host or politeness key -> its DOWNLOAD_SLOTS entry (JSON: delay, "
                          "concurrency, randomize_delay), every worker's", "host"),
}


#: Steps of a second in a recrawl-schedule entry's score (``DUE_STEPS`` in the Lua prelude): a bucket
#: scores an entry of due time ``t`` as ``-((t - bound) * DUE_STEPS + step)``, ``step`` the planned
#: time's fraction of a second (``crawlstate/lua/due.lua``, ``due_score``).
DUE_STEPS = 1024


#: A member of the ready heap and of the leases, scored +inf, that keeps each a skip list at any size
#: (``ZSET_ANCHOR`` in the Lua prelude; the claim script adds it). Both are written on every page, and a
#: sorted set below ``zset-max-listpack-entries`` is a listpack, where each ``ZADD`` scans it twice (for
#: the member, then to its score); a member longer than ``zset-max-listpack-value`` (64 bytes, at most
#: ``encodings.SERVER_CONFIG_MOST``) makes Redis convert it. Readers count and list them below +inf.
ZSET_ANCHOR = "~ a sorted set kept a skip list " + "~" * 48
assert len(ZSET_ANCHOR) > 64


def due_entry_time(bound: float, score: float) -> int:
    """The due time (crawl-clock seconds) of a recrawl-schedule entry scored ``score`` in a bucket whose
    bound (its score in the index ``due``) is ``bound``."""
    return int(bound) + int(-score) // DUE_STEPS


# -- the URL record's layout (crawler.metadata.record packs and reads it) ------------------

RECORD_VERSION = 2
#: The fixed head of a record, in :data:`RECORD_FIELDS` order.
RECORD_STRUCT = struct.Struct("<BBHIIIIQ4s8sIHHHBBBBB")
#: The same layout for the Lua ``struct`` library.
RECORD_LUA_FORMAT = "<BBHI4I4I4I4I8c4c8I4HHHBBBBB"
#: The head's fields, in order (``URLREC.<name>`` in the Lua prelude: positions from 1).
RECORD_FIELDS = (
    "version", "state", "status", "fetched_at", "first_fetch", "next_visit", "last_modified", "captured", "digest",
    "simhash", "length", "outlinks", "observations", "changes", "level", "depth", "flags", "etag_len", "host_len",
)
assert len(RECORD_FIELDS) == len(RECORD_STRUCT.unpack(bytes(RECORD_STRUCT.size)))

#: ``flags``: what the URL's callback is (two bits), then facts about the record.
KIND_PARSE = 0
KIND_SITEMAP = 1
KIND_OTHER = 2
KIND_MASK = 3
FLAG_HTTPS = 4
#: The host key is stored before the URL (it is not the start of the URL's authority).
FLAG_HOST_APART = 8
FLAG_DIGEST = 16
FLAG_SIMHASH = 32
#: The URL after its host is packed (:func:`pack_url_part`).
FLAG_PACKED = 64
#: In Redis, the host is the shard's 3-byte number for it (the scripts store records so, and hand
#: them out with the host's name: Python never sees one).
FLAG_HOST_ID = 128
#: The names of the flags above, as the scripts know them (``URLREC_FLAG.<NAME>``).
RECORD_FLAGS = ("KIND_PARSE", "KIND_SITEMAP", "KIND_OTHER", "KIND_MASK", "FLAG_HTTPS", "FLAG_HOST_APART",
                "FLAG_DIGEST", "FLAG_SIMHASH", "FLAG_PACKED", "FLAG_HOST_ID")

class UrlState(IntEnum):
    QUEUED = 0
    FETCHED = 1
    FAILED = 2
    DEAD = 3
