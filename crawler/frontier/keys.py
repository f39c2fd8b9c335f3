"""Every Redis key of the frontier, named in one place.

All keys of one crawl shard share the hash tag ``{<crawl id>.<shard>}``, so a
Lua script touching several of them stays within one Redis Cluster slot.
Per-host keys (back queues) are derived from :attr:`FrontierKeys.prefix`
inside the scripts, with the same tag.
"""

from __future__ import annotations

from dataclasses import dataclass

NAMESPACE = "frontier"


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
        return self.key("seen:bloom")

    def exact(self, index: int) -> str:
        """SET (intset) of 64-bit fingerprints: one part of the exact seen store."""
        return self.key(f"seen:x:{index}")

    @property
    def host_pages(self) -> str:
        """HASH host -> URLs enqueued (the per-host page budget)."""
        return self.key("budget:host")

    @property
    def domain_pages(self) -> str:
        """HASH registered domain -> URLs enqueued (the per-domain page budget)."""
        return self.key("budget:domain")

    @property
    def requests(self) -> str:
        """HASH request id -> encoded request, for URLs in back queues, leased, or dead."""
        return self.key("req")

    @property
    def ready(self) -> str:
        """ZSET host -> earliest time (ms) it may be contacted; hosts not in flight."""
        return self.key("ready")

    @property
    def active(self) -> str:
        """SET of hosts that own a back queue (ready, in flight or asleep)."""
        return self.key("active")

    @property
    def sleeping(self) -> str:
        """ZSET host -> wake time (ms) of hosts that own a back queue but wait beyond the sleep horizon."""
        return self.key("sleep")

    @property
    def parked(self) -> str:
        """SET of hosts that own a back queue and are parked after connection failures."""
        return self.key("parked")

    @property
    def host_robots(self) -> str:
        """HASH host -> time (ms) until which the host's robots.txt decision stands (robots.txt first)."""
        return self.key("robots")

    @property
    def cooldown(self) -> str:
        """ZSET host -> next allowed time (ms) of hosts without a back queue."""
        return self.key("cool")

    @property
    def leases(self) -> str:
        """ZSET lease member -> expiry (ms)."""
        return self.key("leases")

    @property
    def queued(self) -> str:
        """Counter of requests in front and back queues (not leased)."""
        return self.key("queued")

    @property
    def host_delay(self) -> str:
        """HASH host -> minimum delay (ms) set by other components (robots, backoff)."""
        return self.key("hostdelay")

    @property
    def due(self) -> str:
        """ZSET URL (hex metadata field) -> next visit (crawl-clock ms): the recrawl schedule."""
        return self.key("due")

    @property
    def due_requests(self) -> str:
        """HASH URL (hex metadata field) -> "<level> <host> <encoded request>" of a scheduled revisit."""
        return self.key("due:req")

    @property
    def inlinks(self) -> str:
        """STRING of 8-bit counters: the in-link sketch (see ``lua/common.lua``)."""
        return self.key("inlinks")

    @property
    def host_quality(self) -> str:
        """HASH "<host>|n", "|e", "|d" -> pages, errors, near duplicates of the host."""
        return self.key("hostq")

    def front(self, level: int) -> str:
        """LIST of ``"<host> <id> <encoded request>"`` (or ``"<host> <id>"``) entries of one priority level."""
        return self.key(f"front:{level}")

    def back(self, host: str) -> str:
        """ZSET request id -> level * 1e13 + id: the back queue of one host."""
        return self.key(f"q:{host}")

    def crawl_key(self, name: str) -> str:
        """A key of the whole crawl, outside any shard (crawl metadata)."""
        return f"{NAMESPACE}:{{{self.crawl_id}}}:{name}"
