"""How the frontier's state stays compact: bucket sizes, the server settings they need, linear hashing.

Every structure that grows with the crawl is made of small keys that Redis
keeps in its compact encodings (intsets, listpacks, compressed lists) at any
crawl size (``docs/sizing.md``):

* the exact seen store, the URL records and the exact duplicate index grow by
  linear hashing (``lua/lhash.lua``): 2^L + s buckets, one more each time
  the entries pass :class:`BucketSizes` per bucket; :class:`LinearHash` finds
  a key's bucket as the scripts do;
* the recrawl schedule is a sequence of small sorted sets split at time
  boundaries;
* queues are lists, whose inner nodes Redis compresses (``list-compress-depth``).

Redis converts a key to a larger encoding once it passes a server limit
(``hash-max-listpack-entries`` and the like): ``SERVER_CONFIG`` is what the
embedded Redis is started with, and :func:`server_config_problems` names what an
external server lacks (the crawl still runs; its state takes more room); both in
:mod:`crawler.crawlstate.encodings`.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError

from crawler.crawlstate.encodings import server_config_problems

logger = logging.getLogger(__name__)

#: Linear hashing's hashes are below 2^24 (``lh_hash`` in ``lua/lhash.lua``).
LH_MOD = 1 << 24
#: A linear-hashing state as stored: level, split pointer, entries (``LH_STATE`` in ``lua/lhash.lua``).
LH_STATE = struct.Struct(">BIQ")


def lh_hash(key: int) -> int:
    """The hash linear hashing files a 64-bit URL key by: its absolute value's last 9 decimal digits,
    mod 2^24 (the scripts take it from the key's decimal form with one number conversion)."""
    return abs(key) % 1_000_000_000 % LH_MOD


@dataclass(frozen=True)
class LinearHash:
    """The state of one linear-hashing structure: ``2^level + split`` buckets, ``entries`` entries."""

    level: int = 0
    split: int = 0
    entries: int = 0

    @classmethod
    def parse(cls, raw: object) -> LinearHash:
        """The state as the scripts store it (``LH_STATE``, read with ``decode_responses=False``);
        none yet: empty."""
        if not raw:
            return cls()
        if not isinstance(raw, bytes):
            raise TypeError(f"a linear-hashing state is bytes, got {type(raw).__name__}")
        level, split, entries = LH_STATE.unpack(raw)
        return cls(level, split, entries)

    @property
    def buckets(self) -> int:
        return (1 << self.level) + self.split

    def bucket(self, key: int) -> int:
        """The bucket of a 64-bit key."""
        h = lh_hash(key)
        size = 1 << self.level
        bucket = h % size
        if bucket < self.split:
            bucket = h % (2 * size)
        return bucket


@dataclass(frozen=True)
class BucketSizes:
    """Entries per bucket the scripts aim at, well under what the server keeps compact: Redis never
    converts a key back to its compact encoding, so no bucket may pass the limit even for a moment.
    Linear hashing lets a bucket about to be split hold twice the average, and chance some more:
    its average is at most a quarter of the limit. The URL records and the exact duplicate index
    average a sixteenth of the hash limit, at most 32 (a write into a listpack scans it and moves
    its tail: a record inserted with its bucket's upkeep costs Redis 8.7 us at 32 against 11.3 at
    128, for 2 bytes more key overhead per record); a recrawl-schedule bucket is split as soon as
    it passes its size, half the limit but at most 128 (``ZADD`` scans a listpack too: 10 us into
    512 members against 3 into 128; the limit the layout wants, 128, gives 64). The defaults suit
    Redis' own defaults; :meth:`from_config` sizes them for a server's settings."""

    seen: int = 128
    records: int = 8
    digests: int = 8
    due: int = 64
    #: The longest hash value the server keeps in a listpack (``hash-max-listpack-value``): a
    #: ``table`` hash's placeholder is longer (:data:`crawler.crawlstate.schema.TABLE_FIELD`).
    hash_value: int = 64

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> BucketSizes:
        """Sizes for a server with this ``CONFIG GET`` answer (missing names: Redis' defaults)."""
        def value(name: str, default: int) -> int:
            try:
                return int(config.get(name, default))
            except (TypeError, ValueError):
                return default

        intset = value("set-max-intset-entries", 512)
        hash_entries = value("hash-max-listpack-entries", value("hash-max-ziplist-entries", 128))
        zset_entries = value("zset-max-listpack-entries", value("zset-max-ziplist-entries", 128))
        return cls(
            seen=max(8, min(1024, intset // 4)),
            records=max(8, min(32, hash_entries // 16)),
            digests=max(8, min(32, hash_entries // 16)),
            due=max(8, min(128, zset_entries // 2)),
            hash_value=max(0, value("hash-max-listpack-value", value("hash-max-ziplist-value", 64))),
        )


async def bucket_sizes(client: Any, key: str, *, external: bool) -> BucketSizes:
    """The bucket sizes for the server holding ``key`` (its ``CONFIG``); for an external server, one
    warning naming what its settings lack for the compact layout (the crawl runs either way)."""
    config: dict[str, Any] = {}
    try:
        if isinstance(client, RedisCluster):
            await client.initialize()
            answer = await client.config_get("*max-*", target_nodes=client.get_node_from_key(key))
        else:
            answer = await client.config_get("*max-*")
        config.update({_text(name): _text(value) for name, value in dict(answer).items()})
        if isinstance(client, RedisCluster):
            depth = await client.config_get("list-compress-depth", target_nodes=client.get_node_from_key(key))
        else:
            depth = await client.config_get("list-compress-depth")
        config.update({_text(name): _text(value) for name, value in dict(depth).items()})
    except RedisError as exc:
        if external:
            logger.warning("Cannot read the Redis server's settings (%s): the frontier assumes Redis' defaults. "
                           "See docs/sizing.md for the settings that keep the crawl's state compact.", exc)
        return BucketSizes.from_config({})
    if external:
        problems = server_config_problems(config)
        if problems:
            logger.warning("The Redis server's settings are not those the crawl's layout is sized for (more "
                           "memory per URL, or more Redis CPU per page): %s. See docs/sizing.md.", "; ".join(problems))
    return BucketSizes.from_config(config)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
