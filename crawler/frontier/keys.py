"""Every Redis key of a crawl's frontier shard, named in one place: :data:`SHARD_KEYS`.

All keys of one crawl shard share the hash tag ``{<crawl id>.<shard>}``, so a
Lua script touching several of them stays within one Redis Cluster slot.
Python builds them through :class:`FrontierKeys`; the Lua scripts through the
``K`` table of the prelude generated from the same schema
(:func:`crawler.schema.lua_prelude`): ``P .. K.ready``, ``P .. K.queue .. host``.
A contract test checks that every key a script builds is one named here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

NAMESPACE = "frontier"


class ShardKey(NamedTuple):
    """One key (or, with a trailing ``:``, one family of keys) of a frontier shard."""

    suffix: str
    kind: str
    meaning: str


#: The Lua name -> key of every key of a frontier shard (prefix ``frontier:{<crawl>.<shard>}:``).
SHARD_KEYS: dict[str, ShardKey] = {
    "bloom": ShardKey("seen:bloom", "string", "bitmap of the seen set's Bloom filter"),
    "seen_exact": ShardKey("seen:x:", "set", "<index>: 64-bit fingerprints, one part of the exact seen store"),
    "seen_count": ShardKey("seencount", "string", "URLs ever added to the seen set"),
    "host_pages": ShardKey("budget:host", "hash", "host -> URLs enqueued (the per-host page budget)"),
    "domain_pages": ShardKey("budget:domain", "hash", "registered domain -> URLs enqueued"),
    "requests": ShardKey("req", "hash", "request id -> encoded request (back queues, leased)"),
    "sequence": ShardKey("seq", "string", "the last request id given"),
    "front": ShardKey("front:", "list", "<level>: \"<host> <id> [<request>]\" entries of one priority level"),
    "selector": ShardKey("sel", "string", "the biased selector's round-robin counter"),
    "queue": ShardKey("q:", "zset", "<host>: the host's back queue, request id -> level * 1e13 + id"),
    "active": ShardKey("active", "set", "hosts that own a back queue (ready, in flight or asleep)"),
    "ready": ShardKey("ready", "zset", "awake host -> earliest time (ms) it may be contacted"),
    "sleeping": ShardKey("sleep", "zset", "host that keeps its back queue -> wake time (ms)"),
    "parked": ShardKey("parked", "set", "sleeping hosts parked after connection failures"),
    "cool": ShardKey("cool", "zset", "host without a back queue -> next allowed time (ms)"),
    "leases": ShardKey("leases", "zset", "lease member -> expiry (ms)"),
    "lease_sequence": ShardKey("leaseseq", "string", "the last lease number given"),
    "queued": ShardKey("queued", "string", "requests in front and back queues (not leased)"),
    "host_delay": ShardKey("hostdelay", "hash", "host -> minimum delay (ms) from robots.txt Crawl-delay"),
    "host_throttle": ShardKey("hostthrottle", "hash", "host -> throttle level (429/503 in a row)"),
    "host_failures": ShardKey("hostfail", "hash", "host -> consecutive connection-level failures"),
    "host_robots": ShardKey("robots", "hash", "host -> time (ms) until which its robots.txt decision stands"),
    "robots_record": ShardKey("robots:", "string", "<origin>: the shared robots.txt record of an origin"),
    "sitemaps": ShardKey("sitemaps:", "set", "<host>: sitemap URLs robots.txt lists"),
    "group": ShardKey("group", "hash", "host -> its politeness group (domain or address)"),
    "group_next": ShardKey("gnext", "hash", "politeness group -> next allowed time (ms)"),
    "group_busy": ShardKey("gbusy", "hash", "politeness group -> its host in flight"),
    "group_wait": ShardKey("gwait:", "zset", "<group>: ready hosts waiting for their group, by time"),
    "dead": ShardKey("dead", "hash", "request id -> encoded request of a dead letter"),
    "dead_info": ShardKey("deadinfo", "hash", "request id -> \"host\\tlevel\\ttime\\terror\\tmessage\""),
    "due": ShardKey("due", "zset", "URL (hex metadata field) -> next visit (crawl-clock ms)"),
    "due_requests": ShardKey("due:req", "hash", "URL (hex metadata field) -> \"<level> <host> <request>\""),
    "inlinks": ShardKey("inlinks", "string", "8-bit counters: the in-link sketch"),
    "host_quality": ShardKey("hostq", "hash", "\"<host>|n\", \"|e\", \"|d\" -> pages, errors, near duplicates"),
    "urlmeta": ShardKey("urlmeta:", "hash", "<host>: URL fingerprint (8 bytes) -> URL metadata record"),
}

#: Keys of the whole crawl, outside any shard (prefix ``frontier:{<crawl>}:``).
CRAWL_KEYS: dict[str, ShardKey] = {
    "meta": ShardKey("meta", "hash", "the crawl's fixed facts: normalization version, shards, politeness key"),
    "draining": ShardKey("draining", "string", "set while the crawl drains (scrapy frontier drain)"),
    "totals": ShardKey("totals", "hash", "every worker's counters, summed"),
    "timeline": ShardKey("timeline", "list", "progress samples (msgpack), the newest 100,000"),
    "workers": ShardKey("workers", "zset", "worker -> when it last reported"),
    "render": ShardKey("render", "hash", "host or domain -> render mark: on / off (an operator's), "
                       "js:<until ms> / static:<until ms> (detected)"),
}


@dataclass(frozen=True)
class FrontierKeys:
    crawl_id: str
    shard: int = 0

    @property
    def prefix(self) -> str:
        return f"{NAMESPACE}:{{{self.crawl_id}.{self.shard}}}:"

    def key(self, name: str) -> str:
        return self.prefix + name

    @property
    def bloom(self) -> str:
        """Bitmap of the seen set's Bloom filter."""
        return self.key(SHARD_KEYS["bloom"].suffix)

    def exact(self, index: int) -> str:
        """SET (intset) of 64-bit fingerprints: one part of the exact seen store."""
        return self.key(SHARD_KEYS["seen_exact"].suffix + str(index))

    @property
    def host_pages(self) -> str:
        """HASH host -> URLs enqueued (the per-host page budget)."""
        return self.key(SHARD_KEYS["host_pages"].suffix)

    @property
    def domain_pages(self) -> str:
        """HASH registered domain -> URLs enqueued (the per-domain page budget)."""
        return self.key(SHARD_KEYS["domain_pages"].suffix)

    @property
    def requests(self) -> str:
        """HASH request id -> encoded request, for URLs in back queues, leased, or dead."""
        return self.key(SHARD_KEYS["requests"].suffix)

    @property
    def ready(self) -> str:
        """ZSET host -> earliest time (ms) it may be contacted; hosts not in flight."""
        return self.key(SHARD_KEYS["ready"].suffix)

    @property
    def active(self) -> str:
        """SET of hosts that own a back queue (ready, in flight or asleep)."""
        return self.key(SHARD_KEYS["active"].suffix)

    @property
    def sleeping(self) -> str:
        """ZSET host -> wake time (ms) of hosts that own a back queue but wait beyond the sleep horizon."""
        return self.key(SHARD_KEYS["sleeping"].suffix)

    @property
    def parked(self) -> str:
        """SET of hosts that own a back queue and are parked after connection failures."""
        return self.key(SHARD_KEYS["parked"].suffix)

    @property
    def host_robots(self) -> str:
        """HASH host -> time (ms) until which the host's robots.txt decision stands (robots.txt first)."""
        return self.key(SHARD_KEYS["host_robots"].suffix)

    @property
    def cooldown(self) -> str:
        """ZSET host -> next allowed time (ms) of hosts without a back queue."""
        return self.key(SHARD_KEYS["cool"].suffix)

    @property
    def leases(self) -> str:
        """ZSET lease member -> expiry (ms)."""
        return self.key(SHARD_KEYS["leases"].suffix)

    @property
    def queued(self) -> str:
        """Counter of requests in front and back queues (not leased)."""
        return self.key(SHARD_KEYS["queued"].suffix)

    @property
    def host_delay(self) -> str:
        """HASH host -> minimum delay (ms) set by other components (robots, backoff)."""
        return self.key(SHARD_KEYS["host_delay"].suffix)

    @property
    def due(self) -> str:
        """ZSET URL (hex metadata field) -> next visit (crawl-clock ms): the recrawl schedule."""
        return self.key(SHARD_KEYS["due"].suffix)

    @property
    def due_requests(self) -> str:
        """HASH URL (hex metadata field) -> "<level> <host> <encoded request>" of a scheduled revisit."""
        return self.key(SHARD_KEYS["due_requests"].suffix)

    @property
    def inlinks(self) -> str:
        """STRING of 8-bit counters: the in-link sketch (see ``lua/common.lua``)."""
        return self.key(SHARD_KEYS["inlinks"].suffix)

    @property
    def host_quality(self) -> str:
        """HASH "<host>|n", "|e", "|d" -> pages, errors, near duplicates of the host."""
        return self.key(SHARD_KEYS["host_quality"].suffix)

    def front(self, level: int) -> str:
        """LIST of ``"<host> <id> <encoded request>"`` (or ``"<host> <id>"``) entries of one priority level."""
        return self.key(SHARD_KEYS["front"].suffix + str(level))

    def back(self, host: str) -> str:
        """ZSET request id -> level * 1e13 + id: the back queue of one host."""
        return self.key(SHARD_KEYS["queue"].suffix + host)

    @property
    def seen_count(self) -> str:
        """Counter of URLs ever added to the seen set."""
        return self.key(SHARD_KEYS["seen_count"].suffix)

    @property
    def dead(self) -> str:
        """HASH request id -> encoded request of a dead letter."""
        return self.key(SHARD_KEYS["dead"].suffix)

    @property
    def dead_info(self) -> str:
        """HASH request id -> "host\\tlevel\\ttime\\terror\\tmessage" of a dead letter."""
        return self.key(SHARD_KEYS["dead_info"].suffix)

    def robots_record(self, origin: str) -> str:
        """The shared robots.txt record of an origin (``scheme://host:port``)."""
        return self.key(SHARD_KEYS["robots_record"].suffix + origin)

    def sitemaps(self, host: str) -> str:
        """SET of the sitemap URLs a host's robots.txt lists."""
        return self.key(SHARD_KEYS["sitemaps"].suffix + host)

    def urlmeta(self, host: str) -> str:
        """HASH URL fingerprint (8 bytes) -> URL metadata record, of one host."""
        return self.key(SHARD_KEYS["urlmeta"].suffix + host)

    def crawl_key(self, name: str) -> str:
        """A key of the whole crawl, outside any shard (one of :data:`CRAWL_KEYS`)."""
        return f"{NAMESPACE}:{{{self.crawl_id}}}:{CRAWL_KEYS[name].suffix}"
