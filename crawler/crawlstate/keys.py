"""Every Redis key of a crawl, built from the schema's tables (:data:`crawler.crawlstate.schema.SHARD_KEYS`,
:data:`~crawler.crawlstate.schema.CRAWL_KEYS`): no key is written by hand.

All keys of one crawl shard share one hash tag (:func:`shard_tag`), so a Lua
script touching several of them stays within one Redis Cluster slot. Python
builds them through :class:`ShardKeys`, one attribute per schema name: a key is
a string (``keys.ready``), a family of keys (a suffix ending in ``:``) a function
of its member's parts, joined by ``:`` (``keys.queue(host, level)``,
``keys.urls(bucket)``). The Lua scripts build the same keys through the ``K``
names (written in as literals when the library is composed) from the same
schema (:mod:`crawler.crawlstate.library`): ``P .. K.ready``, ``P .. K.queue .. host``.
A contract test checks that every key a script builds is one named here, and
each key says what its size grows with (``grows``: the sizing page,
``docs/sizing.md``, and ``benchmarks/memory.py`` read it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from crawler.crawlstate.schema import CRAWL_KEYS, SHARD_KEYS, KeySpec

__all__ = ["CRAWL_KEYS", "LAYOUT_VERSION", "NAMESPACE", "SHARD_KEYS", "KeySpec", "ShardKeys", "shard_tag"]

NAMESPACE = "frontier"
#: The layout of a crawl's keys and records. A crawl started with another layout is refused
#: (``check_crawl_metadata``): its keys would be misread. 1: one key per URL, host and
#: duplicate; 2: compact (linear hashing by the low 24 bits of a URL key, states "L s n");
#: 3: linear hashing by the key's last 9 decimal digits, binary states; 4: the near-duplicate index
#: in hashes of 16 fields (``nd:<block>:<high byte>:<low byte div 16>``), where each held 256; 5: the
#: recrawl schedule's entries scored from their bucket's bound, latest first (``schema.DUE_STEPS``).
LAYOUT_VERSION = 5


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


def _family(base: str) -> Callable[..., str]:
    def member(*parts: object) -> str:
        return base + ":".join(map(str, parts))

    return member


@dataclass(frozen=True)
class ShardKeys:
    """The keys of one shard of a crawl (``crawl_id``, ``shard`` of ``shards``): for each name of
    :data:`SHARD_KEYS` an attribute of the same name (a key, or a family's function of its member),
    made once, when the shard's keys are made."""

    crawl_id: str
    shard: int = 0
    #: The crawl's shard count (FRONTIER_SHARDS): it places each shard's tag in the slot space.
    shards: int = 1
    prefix: str = field(init=False)
    #: The shard's hashes kept as hash tables (``KeySpec.table``; see :meth:`RedisFrontier.hold_tables`).
    tables: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        prefix = f"{NAMESPACE}:{{{shard_tag(self.crawl_id, self.shard, self.shards)}}}:"
        made: dict[str, Any] = {"prefix": prefix}
        for name, spec in SHARD_KEYS.items():
            made[name] = _family(prefix + spec.suffix) if spec.suffix.endswith(":") else prefix + spec.suffix
        made["tables"] = tuple(prefix + spec.suffix for spec in SHARD_KEYS.values() if spec.table)
        for name, value in made.items():
            object.__setattr__(self, name, value)

    if TYPE_CHECKING:  # every name of SHARD_KEYS, made in __post_init__
        def __getattr__(self, name: str) -> Any: ...

    def crawl_key(self, name: str) -> str:
        """A key of the whole crawl, outside any shard (one of :data:`CRAWL_KEYS`)."""
        return f"{NAMESPACE}:{{{self.crawl_id}}}:{CRAWL_KEYS[name].suffix}"
