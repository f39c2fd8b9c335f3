"""The duplicate index in Redis (``lua/dedup.lua``): exact payload digests and SimHash blocks.

It lives in the frontier's shards, spread so that it grows on every shard
(and every cluster primary) alike: a payload digest in the shard its first
two bytes pick, each of a SimHash's four 16-bit blocks in the shard its block
number and high byte pick. Per distinct payload it keeps 12 bytes of the
digest, the URL key and shard of the first capture and its time (``dx:``,
about 35 bytes with its listpack field); per SimHash 8 bytes under each block
(``nd:``), and under block 0 the URL key and shard too (about 45 bytes in
all). A duplicate's URL is read from its URL record: the URL metadata
pipeline's, written moments after the check; without that pipeline
(``write_records``) the check writes one first for the page (its URL only)
when the URL has none yet. Two copies of a payload checked within those
moments, or a page whose worker died between the two, leave a duplicate
whose first capture cannot be named yet: it is stored in full
(``dedup/unresolved``), and the record is there from the next fetch of that
URL on.

On one shard (one Redis, the default) a page costs one script call, atomic as
a whole; on several, the digest's shard first (with the page's record), then
the other blocks' shards together, then the additions: two pages that are
near duplicates of each other checked at the same moment on a cluster may
both be indexed (neither is flagged), which costs an index entry, never a
page.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.bounded import BoundedMap
from crawler.crawlstate.compact import BucketSizes, LinearHash
from crawler.metadata.record import UrlRecord, UrlState
from crawler.redisconn.batch import BatchedScripts
from crawler.urls import page_fingerprint, url_key
from crawler.warc.dates import warc_date_micros
from crawler.warc.digests import sha1_bytes

if TYPE_CHECKING:
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis

#: Modes of ``lua/dedup.lua``.
_CHECK, _CHECK_ADD, _ADD, _FIND_REF = 0, 1, 2, 3


@dataclass(frozen=True)
class DedupVerdict:
    #: The first capture of this exact payload: (URL, WARC date), or None.
    duplicate_of: tuple[str, str] | None
    #: The URL of an indexed page within the SimHash distance, or None.
    near_duplicate_of: str | None
    distance: int | None
    #: A duplicate was found whose URL could not be read (its record is gone): stored in full.
    unresolved: bool = False


def _record_url(packed: bytes) -> str | None:
    """The URL of a record the script read (None if it has none)."""
    return UrlRecord.unpack(packed).url or None


#: Pages this worker checked lately (their reference -> URL) whose URL record may not be written yet.
RECENT_CHECKS = 4096


class DedupIndex:
    def __init__(self, client: AnyRedis, router: ShardRouter, max_distance: int,
                 sizes: BucketSizes | None = None, *, write_records: bool = True) -> None:
        self.router = router
        #: The pages checked lately, reference (URL key, shard) -> URL: a page identical to one still in
        #: flight here (checked, its URL record not yet written by the URL metadata pipeline) names it
        #: from here, not from its record (bounded).
        self._recent = BoundedMap(RECENT_CHECKS)
        #: Write the page's URL record (its URL only) before indexing it: no other pipeline does.
        self.write_records = write_records
        self.scripts = BatchedScripts(client)
        self.max_distance = max_distance
        self.sizes = sizes or BucketSizes()

    async def open(self) -> None:
        await self.scripts.load()

    def digest_shard(self, digest: bytes) -> int:
        return int.from_bytes(digest[:2], "big") % self.router.count

    def block_shard(self, simhash: int, block: int) -> int:
        high = (simhash >> (56 - 16 * block)) & 0xFF
        return (block * 256 + high) % self.router.count

    async def _call(self, shard: int, digest_key: Any = "", capture: bytes = b"", simhash: bytes = b"",
                    blocks: str = "", mode: int = _CHECK, ref: bytes = b"", own_key: Any = "",
                    own_record: bytes = b"") -> list[Any]:
        keys = self.router.keys[shard]
        reply = await self.scripts.call("dedup", [keys.lh("dx")], [
            keys.prefix, shard, digest_key, capture, simhash, blocks, self.max_distance, mode, ref,
            self.sizes.digests, self.sizes.records, own_key, own_record,
        ])
        return list(reply)

    async def _url(self, ref: bytes) -> str | None:
        """The URL of a reference (URL key, shard), from its record."""
        key = int.from_bytes(ref[:8], "big", signed=True)
        shard = int.from_bytes(ref[8:10], "big")
        if shard >= self.router.count:
            return None
        keys = self.router.keys[shard]
        (packed,) = await self.scripts.call("record", [keys.lh("url")], [keys.prefix, key])
        if not packed:
            return None
        return UrlRecord.unpack(packed).url or None

    async def first_capture(self, digest: str) -> tuple[str, str] | None:
        """The first capture indexed of payload ``digest`` (``sha1:<base32>``): its URL and WARC date,
        or None. Reads only (the operator's question, never the crawl's)."""
        raw = sha1_bytes(digest)
        key = int.from_bytes(raw[:8], "big", signed=True)
        keys = self.router.keys[self.digest_shard(raw)]
        client = self.scripts.client
        state = LinearHash.parse(await client.get(keys.lh("dx")))
        first = await client.hget(keys.digests(state.bucket(key)), str(key))
        if not isinstance(first, bytes) or first[:4] != raw[8:12]:
            return None
        url = await self._url(first[4:14])
        return (url, warc_date_micros(int.from_bytes(first[14:22], "big"))) if url else None

    async def check(self, url: str, host: str, digest: str, captured: int, simhash: int | None) -> DedupVerdict:
        """Check a page (its normalized URL and host, payload digest, WARC date as epoch microseconds,
        SimHash) and index it."""
        raw = sha1_bytes(digest)
        digest_key = int.from_bytes(raw[:8], "big", signed=True)
        own = url_key(page_fingerprint(url))
        own_shard = self.router.shard_of(host)
        ref = own.to_bytes(8, "big", signed=True) + own_shard.to_bytes(2, "big")
        self._recent.put(ref, url)
        capture = raw[8:12] + ref + captured.to_bytes(8, "big")
        # The page's record, written by the check only when no URL metadata pipeline writes it.
        own_record = UrlRecord(UrlState.QUEUED, 0, url=url, host=host).pack() if self.write_records else b""
        own_key = own if own_record else ""
        packed_simhash = b"" if simhash is None else simhash.to_bytes(8, "big")
        count = self.router.count
        if count == 1:
            first, first_url, near, distance, near_ref, near_url = await self._call(
                0, digest_key, capture, packed_simhash, "0123" if simhash is not None else "", _CHECK_ADD, ref,
                own_key, own_record)
            return await self._verdict(first, first_url, near, int(distance), near_ref, near_url)
        # Several shards: the page's record, then the digest (with the blocks held there), then the rest.
        digest_shard = self.digest_shard(raw)
        if own_key and own_shard != digest_shard:
            await self._call(own_shard, own_key=own_key, own_record=own_record)
        by_shard: dict[int, str] = defaultdict(str)
        if simhash is not None:
            for block in range(4):
                by_shard[self.block_shard(simhash, block)] += str(block)
        first, first_url, near, distance, near_ref, near_url = await self._call(
            digest_shard, digest_key, capture, packed_simhash, by_shard.pop(digest_shard, ""), _CHECK, ref,
            *((own_key, own_record) if own_shard == digest_shard else ("", b"")))
        if first:
            return await self._verdict(first, first_url, b"", -1, b"", b"")
        candidates = [(int(distance), near, near_ref, near_url)] if near else []
        replies = await asyncio.gather(*(
            self._call(shard, simhash=packed_simhash, blocks=blocks, mode=_CHECK) for shard, blocks in by_shard.items()
        ))
        candidates += [(int(reply[3]), reply[2], reply[4], reply[5]) for reply in replies if reply[2]]
        if not candidates:
            assert simhash is not None or not by_shard
            if simhash is not None:
                adds = dict(by_shard)
                digest_blocks = "".join(str(b) for b in range(4) if self.block_shard(simhash, b) == digest_shard)
                if digest_blocks:
                    adds[digest_shard] = digest_blocks
                await asyncio.gather(*(
                    self._call(shard, simhash=packed_simhash, blocks=blocks, mode=_ADD, ref=ref)
                    for shard, blocks in adds.items()
                ))
            return DedupVerdict(None, None, None)
        distance_, near, near_ref, near_url = min(candidates, key=lambda candidate: candidate[0])
        if not near_ref:
            reply = await self._call(self.block_shard(int.from_bytes(near, "big"), 0), simhash=near, blocks="0",
                                     mode=_FIND_REF)
            near_ref, near_url = reply[4], reply[5]
        return await self._verdict(b"", b"", near, distance_, near_ref, near_url)

    async def _verdict(self, first: bytes, first_url: bytes, near: bytes, distance: int,
                       near_ref: bytes, near_url: bytes) -> DedupVerdict:
        if first:
            date = warc_date_micros(int.from_bytes(first[14:22], "big"))
            resolved = _record_url(first_url) if first_url else await self._url(first[4:14])
            if resolved is None:
                resolved = self._recent.get(first[4:14])
            if resolved is None:
                return DedupVerdict(None, None, None, unresolved=True)
            return DedupVerdict((resolved, date), None, None)
        if near:
            resolved = _record_url(near_url) if near_url else (await self._url(near_ref) if near_ref else None)
            if resolved is None and near_ref:
                resolved = self._recent.get(near_ref)
            if resolved is None:
                return DedupVerdict(None, None, None, unresolved=True)
            return DedupVerdict(None, resolved, distance)
        return DedupVerdict(None, None, None)

    async def close(self) -> None:
        await self.scripts.close()
