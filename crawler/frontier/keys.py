"""Every Redis key of a crawl's frontier shard, built from the schema's table (:data:`crawler.schema.SHARD_KEYS`).

All keys of one crawl shard share one hash tag (:func:`shard_tag`), so a Lua
script touching several of them stays within one Redis Cluster slot. Python
builds them through :class:`FrontierKeys`; the Lua scripts through the ``K``
names (written in as literals when a script is loaded) from the same schema
(:func:`crawler.schema.compose`): ``P .. K.ready``, ``P .. K.queue .. host``.
A contract test checks that every key a script builds is one named here, and
each key says what its size grows with (``grows``: the sizing page,
``docs/sizing.md``, and ``benchmarks/memory.py`` read it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from crawler.schema import CRAWL_KEYS, SHARD_KEYS, ShardKey

__all__ = ["CRAWL_KEYS", "NAMESPACE", "SHARD_KEYS", "FrontierKeys", "ShardKey", "shard_tag"]

NAMESPACE = "frontier"
#: The layout of a crawl's keys and records. A crawl started with another layout is refused
#: (``check_crawl_metadata``): its keys would be misread. 1: one key per URL, host and
#: duplicate; 2: compact (linear hashing by the low 24 bits of a URL key, states "L s n");
#: 3: linear hashing by the key's last 9 decimal digits, binary states.
LAYOUT_VERSION = 3


#: Slots searched for a shard's tag (see :func:`shard_tag`).
_TAG_WINDOW = 64


def _spread(shard: int, shards: int) -> int:
    """A slot for ``shard`` of ``shards``: the middle of its equal share of the slot space."""
    return (2 * shard + 1) * REDIS_CLUSTER_HASH_SLOTS // (2 * shards)


@cache
def shard_tag(crawl_id: str, shard: int, shards: int = 1) -> str:
    """The hash tag of a shard's keys: ``<crawl>.<shard>``, with a suffix chosen so that its
    Redis Cluster slot lies near :func:`_spread` of the shard.

    A cluster created with equal slot ranges per primary (``redis-cli --cluster create``)
    then holds as equal a number of shards on each primary as the counts allow (16 shards
    on 3 primaries: 5/6/5), instead of what hashing the plain names happens to give (it
    could be 2/6/8).
    """
    target = _spread(shard, shards)
    for salt in range(REDIS_CLUSTER_HASH_SLOTS * 4):
        tag = f"{crawl_id}.{shard}" if salt == 0 else f"{crawl_id}.{shard}.{salt}"
        if (key_slot(tag.encode("utf-8")) - target) % REDIS_CLUSTER_HASH_SLOTS < _TAG_WINDOW:
            return tag
    return f"{crawl_id}.{shard}"  # pragma: no cover - CRC16 reaches every window


@dataclass(frozen=True)
class FrontierKeys:
    crawl_id: str
    shard: int = 0
    #: The crawl's shard count (FRONTIER_SHARDS): it places each shard's tag in the slot space.
    shards: int = 1

    @cached_property
    def prefix(self) -> str:
        return f"{NAMESPACE}:{{{shard_tag(self.crawl_id, self.shard, self.shards)}}}:"

    def key(self, name: str) -> str:
        return self.prefix + name

    @cached_property
    def tables(self) -> tuple[str, ...]:
        """The shard's hashes kept as hash tables (``ShardKey.table``; see :meth:`RedisFrontier.hold_tables`)."""
        return tuple(self.key(key.suffix) for key in SHARD_KEYS.values() if key.table)

    @property
    def bloom(self) -> str:
        """Bitmap of the seen set's Bloom filter."""
        return self.key(SHARD_KEYS["bloom"].suffix)

    def exact(self, bucket: int) -> str:
        """SET (intset) of 64-bit URL keys: one bucket of the exact seen store."""
        return self.key(SHARD_KEYS["seen_exact"].suffix + str(bucket))

    def lh(self, structure: str) -> str:
        """The state of a linear-hashing structure (``seen``, ``url``, ``dx``)."""
        return self.key(SHARD_KEYS["lh"].suffix + structure)

    @property
    def host_pages(self) -> str:
        """HASH host -> URLs enqueued (the per-host page budget)."""
        return self.key(SHARD_KEYS["host_pages"].suffix)

    @property
    def domain_pages(self) -> str:
        """HASH registered domain -> URLs enqueued (the per-domain page budget)."""
        return self.key(SHARD_KEYS["domain_pages"].suffix)

    @property
    def leased(self) -> str:
        """HASH lease number -> the queue entry the lease holds (requests in flight only)."""
        return self.key(SHARD_KEYS["leased"].suffix)

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
    def holders(self) -> str:
        """HASH worker -> ``"<ms> <lease number>..."``: the leases it held when it last renewed them."""
        return self.key(SHARD_KEYS["holders"].suffix)

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
        """ZSET bucket number -> lowest due time (crawl-clock s): the index of the recrawl schedule."""
        return self.key(SHARD_KEYS["due"].suffix)

    def due_bucket(self, bucket: int) -> str:
        """ZSET URL key -> due time (crawl-clock s): one bucket of the recrawl schedule."""
        return self.key(SHARD_KEYS["due_bucket"].suffix + str(bucket))

    @property
    def due_count(self) -> str:
        """Counter of URLs in the recrawl schedule."""
        return self.key(SHARD_KEYS["due_count"].suffix)

    @property
    def inlinks(self) -> str:
        """STRING of 8-bit counters: the in-link sketch (see ``lua/common.lua``)."""
        return self.key(SHARD_KEYS["inlinks"].suffix)

    @property
    def host_quality(self) -> str:
        """HASH "<host>|n", "|e", "|d" -> pages, errors, near duplicates of the host."""
        return self.key(SHARD_KEYS["host_quality"].suffix)

    def front(self, level: int) -> str:
        """LIST of ``"<host> <entry>"`` of one priority level (hosts without a back queue)."""
        return self.key(SHARD_KEYS["front"].suffix + str(level))

    def back(self, host: str, level: int) -> str:
        """LIST of entries: the back queue of one host at one level (oldest at the right)."""
        return self.key(f"{SHARD_KEYS['queue'].suffix}{host}:{level}")

    @property
    def seen_count(self) -> str:
        """Counter of URLs ever added to the seen set."""
        return self.key(SHARD_KEYS["seen_count"].suffix)

    @property
    def dead(self) -> str:
        """HASH dead letter number -> its request (an entry, a revisit resolved to its URL record)."""
        return self.key(SHARD_KEYS["dead"].suffix)

    @property
    def dead_info(self) -> str:
        """HASH dead letter number -> "host\\tlevel\\ttime\\terror\\tmessage"."""
        return self.key(SHARD_KEYS["dead_info"].suffix)

    def robots_record(self, origin: str) -> str:
        """The shared robots.txt record of an origin (``scheme://host:port``)."""
        return self.key(SHARD_KEYS["robots_record"].suffix + origin)

    def sitemaps(self, host: str) -> str:
        """SET of the sitemap URLs a host's robots.txt lists."""
        return self.key(SHARD_KEYS["sitemaps"].suffix + host)

    def urls(self, bucket: int) -> str:
        """HASH URL key -> URL record: one bucket of the URL records."""
        return self.key(SHARD_KEYS["urls"].suffix + str(bucket))

    def digests(self, bucket: int) -> str:
        """HASH payload digest key -> first capture: one bucket of the exact duplicate index."""
        return self.key(SHARD_KEYS["digests"].suffix + str(bucket))

    def near(self, block: int, high: int) -> str:
        """HASH low byte -> SimHashes whose 16-bit block ``block`` is ``high * 256 + low byte``."""
        return self.key(f"{SHARD_KEYS['near'].suffix}{block}:{high}")

    def crawl_key(self, name: str) -> str:
        """A key of the whole crawl, outside any shard (one of :data:`CRAWL_KEYS`)."""
        return f"{NAMESPACE}:{{{self.crawl_id}}}:{CRAWL_KEYS[name].suffix}"
