"""The compact Redis layout's building blocks, against a real redis-server: the scripts' arithmetic
agrees with Python's, linear hashing keeps every entry findable through its splits, URL records
read and written by Lua are byte-identical to Python's, memory-full scripts are refused before
their first write, and a crawl of the first layout is refused with the way to start over."""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from crawler.crawlstate.compact import LH_MOD, BucketSizes, LinearHash, lh_hash
from crawler.crawlstate.encodings import SERVER_CONFIG, server_config_problems
from crawler.crawlstate.keys import LAYOUT_VERSION, ShardKeys
from crawler.crawlstate.library import compose
from crawler.crawlstate.schema import due_entry_time
from crawler.crawlstate.shards import ShardRouter, check_crawl_metadata
from crawler.exceptions import ConfigurationError
from crawler.metadata.record import KIND_OTHER, UrlRecord, UrlState
from crawler.redisconn.embedded import EmbeddedRedisServer
from crawler.urls import url_fingerprint, url_key
from tests.conftest import RedisServer


def probe(client: redis.Redis, body: str, keys: list[str], *args: object) -> object:
    return client.eval(compose("#!lua", body), len(keys), *keys, *args)  # with the helpers it uses


def signed(value: int) -> int:
    return struct.unpack(">q", value.to_bytes(8, "big"))[0]


def test_fmt_writes_a_number_as_string_format_d_does(redis_server: RedisServer) -> None:
    """values.lua's fmt (digits by groups of three from tables) against string.format('%d') of the
    number, rounded half up if it has a fraction: whole numbers of every length up to 2^53, negative
    ones, fractions; given as a number or as its text."""
    client = redis_server.client()
    rng = random.Random(11)
    numbers = [0, 1, 9, 10, 999, 1000, 1001, 999_999, 1_000_000, 10**12, 1_800_000_000_123, 10**15 - 1, 10**15,
               2**53 - 1, 2**53]
    numbers += [rng.randrange(min(10 ** rng.randrange(1, 17), 2**53)) for _ in range(400)]
    numbers += [-n for n in numbers[:200]]
    text = " ".join(str(n) for n in numbers) + " 0.5 1.5 2.4999 -0.5 -1.5 999.5 1234567.49 1234567.5"
    body = """
local mine, theirs = {}, {}
for word in string.gmatch(ARGV[1], '[^ ]+') do
  local n = tonumber(word)
  mine[#mine + 1] = fmt(#mine % 2 == 0 and n or word)
  theirs[#theirs + 1] = string.format('%d', n % 1 == 0 and n or math.floor(n + 0.5))
end
return {mine, theirs}
"""
    mine, theirs = probe(client, body, [], text)  # type: ignore[misc]
    assert mine == theirs and len(mine) == len(numbers) + 8
    assert [int(n) for n in mine[: len(numbers)]] == numbers


def test_lh_hash_in_lua_is_python_s_for_signed_64_bit_keys(redis_server: RedisServer) -> None:
    client = redis_server.client()
    rng = random.Random(3)
    keys = [0, 1, -1, 12, -12, 2**63 - 1, -(2**63), 16_777_216, -16_777_216, 10**9, -(10**9), 999_999_999,
            -999_999_999, 1_000_000_001, -1_000_000_001, 123_456_789_012, -123_456_789_012]
    keys += [signed(rng.getrandbits(64)) for _ in range(300)]
    keys += [url_key(url_fingerprint(f"http://h{i}.test/p/{i}")) for i in range(100)]
    answer = probe(client, "local out = {} for i = 1, #ARGV do out[i] = lh_hash(ARGV[i]) end return out", [],
                   *keys)
    assert answer == [lh_hash(key) for key in keys]
    assert all(0 <= h < LH_MOD for h in answer)  # type: ignore[union-attr]


def test_fmt_in_lua_writes_whole_numbers_as_python_does(redis_server: RedisServer) -> None:
    """fmt (crawlstate/lua/values.lua) writes the numbers the scripts send to Redis (times in ms,
    counts, bucket numbers) as integers, never in a float's notation; a fraction is rounded."""
    client = redis_server.client()
    rng = random.Random(5)
    numbers = [0, 1, 7, 9, 10, 99, 100, 999, 1000, 1001, 1010, 10_000, 100_100, 999_999, 1_000_000, 1_000_001,
               1_002_003_004, 999_999_999_999, 1_000_000_000_000, 1_733_456_789_123, 100_000_000_000_007,
               999_999_999_999_999, 10**15, 10**15 + 1, 2**53, -1, -999, -1000, -1_733_456_789_123]
    numbers += [rng.randrange(10**15) for _ in range(300)] + [rng.randrange(10**6) for _ in range(100)]
    answer = probe(client, "local out = {} for i = 1, #ARGV do out[i] = fmt(ARGV[i] + 0) end return out", [],
                   *numbers)
    assert answer == [str(n).encode() for n in numbers]
    halves = probe(client, "return {fmt(2.5), fmt(1733456789122.5), fmt(0.4), fmt(-2.5), fmt(999.5)}", [])
    assert halves == [b"3", b"1733456789123", b"0", b"-2", b"1000"]


def test_back_queue_keys_memo_answers_the_keys_through_its_generations(redis_server: RedisServer) -> None:
    """back_keys (frontier/lua/hosts.lua) keeps a host's back-queue keys in a memo of two generations:
    the keys are the ones back_key writes, for a host built again after both generations turned over,
    for one still in the old generation, and for the same host with another level count."""
    client = redis_server.client()
    body = """
    local P, wrong = ARGV[1], {}
    local function same(host, levels)
      local keys = back_keys(P, host, levels)
      if keys[1] ~= 'LMPOP' or keys[2] ~= tostring(levels) or keys[levels + 3] ~= 'RIGHT' then
        wrong[#wrong + 1] = host
      end
      for level = 0, levels - 1 do
        if keys[level + 3] ~= back_key(P, host, level) then wrong[#wrong + 1] = host .. ':' .. level end
      end
    end
    for i = 1, 20000 do same('h' .. i .. '.example', 4) end
    for i = 1, 20000, 97 do same('h' .. i .. '.example', 4) end
    for i = 19990, 20000 do same('h' .. i .. '.example', 4); same('h' .. i .. '.example', 6) end
    same('h1.example', 1)
    return wrong"""
    assert probe(client, body, [], "frontier:{memo}:0:") == []


def test_lh_hash_spreads_url_keys_evenly_over_buckets() -> None:
    """The hash is taken from a key's last 9 decimal digits: URL keys still fill 2^L buckets as
    evenly as a random hash does (chi-square per degree of freedom near 1; a hash of the last 3
    digits gives 4.4 and 152 here)."""
    keys = [url_key(url_fingerprint(f"http://h{i % 997}.test/a/{i}?q={i * 7}")) for i in range(200_000)]
    for level in (6, 12):
        counts = [0] * (1 << level)
        for key in keys:
            counts[lh_hash(key) % (1 << level)] += 1
        mean = len(keys) / len(counts)
        chi_square = sum((count - mean) ** 2 / mean for count in counts) / (len(counts) - 1)
        assert chi_square < (1.6 if level == 6 else 1.15), (level, chi_square)
        assert min(counts) > 0
    # At 2^24 buckets, a hash value is hit 59 or 60 times in 10^9: within 2% of even.
    assert (10**9 // LH_MOD + 1) / (10**9 / LH_MOD) < 1.02


def _lh_adds(load: int) -> str:
    """Lua adding ARGV[3..] to the linear-hashing set 'seen' (ARGV[1]: prefix, ARGV[2]: bucket base)."""
    return f"""
local lh = lh_open(ARGV[1], 'seen', ARGV[2], 'set', {load})
for i = 3, #ARGV do
  if redis.call('SADD', lh_key(lh, lh_hash(ARGV[i])), ARGV[i]) == 1 then
    lh.added = lh.added + 1
  end
end
lh_close(lh)
"""


def _members_in_place(client: Any, keys: ShardKeys, lh: LinearHash, most: int | None = None) -> int:
    """The members of every bucket, each checked to be in the bucket Python computes for it (and the
    bucket no larger than ``most``)."""
    found = 0
    for bucket in range(lh.buckets):
        members = {int(m) for m in client.smembers(keys.seen_exact(bucket))}
        assert all(lh.bucket(member) == bucket for member in members), bucket
        assert most is None or len(members) <= most
        found += len(members)
    return found


def _filled(client: Any, body: str, keys: ShardKeys, name: str, base: str, *, seed: int, batches: int,
            size: int) -> tuple[LinearHash, list[int]]:
    """Random signed 64-bit keys added through ``body`` (which returns the state of the linear-hashing
    structure ``name``) in ``batches`` calls of ``size``: the state read back, and the keys."""
    rng = random.Random(seed)
    added: list[int] = []
    for _ in range(batches):
        batch = [signed(rng.getrandbits(64)) for _ in range(size)]
        state = probe(client, body, [keys.lh(name)], keys.prefix, base, *batch)
        added += batch
    return LinearHash.parse(state), added  # type: ignore[arg-type]


def test_linear_hashing_splits_keep_every_entry_in_the_bucket_python_computes(redis_server: RedisServer) -> None:
    """Entries added in batches through lh_open/lh_close: the structure splits as it grows, every
    bucket holds only keys that hash to it, and Python's LinearHash finds each key's bucket."""
    client = redis_server.client()
    keys = ShardKeys(f"lh-{random.getrandbits(32)}")
    base = keys.seen_exact(0)[:-1]
    body = _lh_adds(16) + "return redis.call('GET', ARGV[1] .. K.lh .. 'seen')\n"
    lh, added = _filled(client, body, keys, "seen", base, seed=5, batches=20, size=100)
    assert lh.entries == len(set(added)) == 2000
    assert lh.buckets >= 2000 // 16
    # No bucket has grown past a few times the load (each stays a small intset).
    assert _members_in_place(client, keys, lh, most=16 * 4) == 2000


def test_a_split_of_a_hash_structure_keeps_every_field_and_its_value(redis_server: RedisServer) -> None:
    """The hash kind (URL records, exact duplicate index): splits rewrite a bucket with the fields that
    stay, so every field keeps its value and sits in the bucket Python computes for it."""
    client = redis_server.client()
    keys = ShardKeys(f"lh-{random.getrandbits(32)}")
    base = keys.urls(0)[:-1]
    body = """
local lh = lh_open(ARGV[1], 'url', ARGV[2], 'hash', 4)
for i = 3, #ARGV do
  if redis.call('HSET', lh_key(lh, lh_hash(ARGV[i])), ARGV[i], 'v' .. ARGV[i]) == 1 then
    lh.added = lh.added + 1
  end
end
lh_close(lh)
return redis.call('GET', ARGV[1] .. K.lh .. 'url')
"""
    lh, added = _filled(client, body, keys, "url", base, seed=7, batches=10, size=60)
    assert lh.entries == 600 and lh.buckets >= 600 // 4
    found = {}
    for bucket in range(lh.buckets):
        fields = {int(k): v.decode() for k, v in client.hgetall(keys.urls(bucket)).items()}
        assert all(lh.bucket(key) == bucket for key in fields), bucket
        found.update(fields)
    assert found == {key: f"v{key}" for key in added}


def test_many_calls_in_one_run_share_the_linear_hashing_state_and_save_it_once(redis_server: RedisServer) -> None:
    """A script's many form opens a linear-hashing state once for all its calls and writes its count at
    the end (splits write theirs at once): after runs of 100 calls of 3 keys each, with a call failing
    in the middle, the state counts every key added, each is in the bucket Python computes, and the
    structure split as it grew. The plain form is unchanged (it writes at every call)."""
    from crawler.redisconn.functions import FunctionLibrary

    client = redis_server.client()
    keys = ShardKeys(f"lh-many-{random.getrandbits(32)}")
    base = keys.seen_exact(0)[:-1]
    body = "#!lua\nif ARGV[3] == 'fail' then\n  error('a failing call')\nend\n" + _lh_adds(4) + "return lh.n\n"
    client.function_load(FunctionLibrary("lhtest", {"adds": body}, many=("adds",)).source, replace=True)
    rng = random.Random(7)
    added: list[int] = []
    sets = 0
    for _ in range(10):
        packed: list[object] = []
        for call in range(100):
            batch: list[object] = ["fail"] if call == 50 else [signed(rng.getrandbits(64)) for _ in range(3)]
            packed += [2 + len(batch), keys.prefix, base, *batch]
            if call != 50:
                added += batch  # type: ignore[arg-type]
        before = int(client.info("commandstats").get("cmdstat_set", {}).get("calls", 0))
        replies = client.fcall("lhtest_adds_many", 1, keys.lh("seen"), *packed)
        sets += int(client.info("commandstats").get("cmdstat_set", {}).get("calls", 0)) - before
        assert isinstance(replies[50], ResponseError) and "a failing call" in str(replies[50])
        assert replies[99] == len(added)  # the count carried from call to call within the run
    lh = LinearHash.parse(client.get(keys.lh("seen")))  # type: ignore[arg-type]
    assert lh.entries == len(set(added)) == 2970
    assert lh.buckets >= 2970 // 4
    # Written at each split and once per run, not once per call (990 calls).
    assert sets < 990
    assert _members_in_place(client, keys, lh) == 2970
    # A single call of the same script (after the runs: its state is not theirs) writes its state at once.
    extra = [signed(rng.getrandbits(64)) for _ in range(3)]
    assert client.fcall("lhtest_adds", 1, keys.lh("seen"), keys.prefix, base, *extra) == 2973
    assert LinearHash.parse(client.get(keys.lh("seen"))).entries == 2973  # type: ignore[arg-type]


_DUE_INSERTS = """
local P, max = ARGV[1], tonumber(ARGV[2])
for i = 3, #ARGV, 3 do
  due_insert(P, ARGV[i], tonumber(ARGV[i + 1]), max, nil, tonumber(ARGV[i + 2]))
end
return 1
"""


def _schedule_entries(client: redis.Redis, keys: ShardKeys) -> list[tuple[int, list[tuple[str, int]]]]:
    """Each bucket's bound and its entries (URL key, due time) in the bucket's order."""
    buckets = []
    for bucket, bound in client.zrange(keys.due, 0, -1, withscores=True):
        entries = client.zrange(keys.due_bucket(int(bucket)), 0, -1, withscores=True)
        assert all(score <= 0 for _, score in entries)
        buckets.append((int(bound), [(member.decode(), due_entry_time(bound, score)) for member, score in entries]))
    return buckets


def test_the_recrawl_schedule_scores_entries_from_their_bucket_s_bound_latest_first(
        redis_server: RedisServer) -> None:
    """A crawl schedules its pages in the order it fetches them: each goes to the start of its
    bucket's sorted set (scored from the bucket's bound, latest first; within one second by the
    fetch's fraction of a second), the splits keep every entry's time, and an entry below every
    bound gets a bucket of its own: no bound ever moves."""
    client = redis_server.client()
    keys = ShardKeys(f"due-{random.getrandbits(32)}")
    t0, max_entries = 1_800_000_000, 8
    # 40 pages fetched in order over 5 seconds, due a day later: 8 a second, steps rising.
    pages = [(f"{1000 + i}", t0 + 86_400 + i // 8, (i % 8) * 100) for i in range(40)]
    probe(client, _DUE_INSERTS, [keys.due], keys.prefix, max_entries,
          *[value for page in pages for value in page])
    buckets = _schedule_entries(client, keys)
    assert sorted(key for _, entries in buckets for key, _ in entries) == sorted(key for key, _, _ in pages)
    due = {key: t for key, t, _ in pages}
    for bound, entries in buckets:
        assert 0 < len(entries) <= max_entries + 1
        assert all(t == due[key] and t >= bound for key, t in entries)
        # The bucket's order is the reverse of the fetches': latest first.
        assert [key for key, _ in entries] == sorted((key for key, _ in entries), key=int, reverse=True)
    assert len(buckets) >= 40 // max_entries
    # Below every bound: a bucket of its own, the others' bounds as they were.
    probe(client, _DUE_INSERTS, [keys.due], keys.prefix, max_entries, "999", t0 + 3600, 0)
    after = _schedule_entries(client, keys)
    assert after[0] == (t0 + 3600, [("999", t0 + 3600)])
    assert sorted(after[1:]) == sorted(buckets)


def test_a_url_record_packed_by_lua_is_byte_identical_to_python_s(redis_server: RedisServer) -> None:
    client = redis_server.client()
    records = [
        UrlRecord(UrlState.FETCHED, 1_700_000_000, 200, b"abcd", (2**64 - 1).to_bytes(8, "big"), 'W/"x"',
                  1_699_999_999, 4_000_000_000, 65_535, 65_535, 65_535, 1_800_000_000, 1_600_000_000,
                  1_700_000_000_999_999, 15, 255, KIND_OTHER, "https://a.example:8443/p?q=1", "a.example"),
        UrlRecord(UrlState.DEAD, 5),
        UrlRecord(UrlState.QUEUED, 0, url="http://b.example/x", host="c.example"),
    ]
    body = "local out = {} for i = 1, #ARGV do out[i] = record_pack(record_unpack(ARGV[i])) end return out"
    packed = [record.pack() for record in records]
    assert probe(client, body, [], *packed) == packed
    # Stored with its host by number, read with its host's name, handed out as Python wrote it.
    prefix = ShardKeys(f"hosts-{random.getrandbits(32)}").prefix
    body = """
local P = ARGV[1]
local out = {}
for i = 2, #ARGV do
  local r = record_unpack(ARGV[i])
  record_intern(P, r)
  local stored = record_pack(r)
  out[#out + 1] = #stored
  out[#out + 1] = record_host(P, record_unpack(stored))
  out[#out + 1] = record_external(P, stored)
end
return out
"""
    answer = probe(client, body, [], prefix, packed[0], packed[2], packed[0])
    assert answer[1::3] == [b"a.example", b"c.example", b"a.example"]
    assert answer[2::3] == [packed[0], packed[2], packed[0]]
    # The host's name (9 bytes) became a 3-byte number, the same one again for the same host.
    assert answer[0::3] == [len(packed[0]) - 6, len(packed[2]) - 6, len(packed[0]) - 6]
    assert client.hlen(prefix + "hostid") == 2


def test_a_crawl_of_the_first_layout_is_refused_with_the_way_to_start_over(redis_server: RedisServer) -> None:
    crawl_id = f"old-{random.getrandbits(32)}"
    router = ShardRouter(crawl_id)
    client = redis_server.client()
    # What a worker of the first layout left: a crawl meta without "layout".
    client.hset(router.crawl_keys.crawl_key("meta"), mapping={"created": 1, "shards": 1})

    async def check() -> None:
        async_client = Redis.from_url(redis_server.url)
        try:
            await check_crawl_metadata(async_client, router)
        finally:
            await async_client.aclose()

    with pytest.raises(ConfigurationError) as failure:
        asyncio.run(check())
    message = str(failure.value)
    assert f"layout 1; this code keeps a crawl's state in layout {LAYOUT_VERSION}" in message
    assert f"scrapy frontier reset --crawl-id {crawl_id} --yes" in message
    # Nothing was written over the old crawl's metadata.
    assert client.hget(router.crawl_keys.crawl_key("meta"), "layout") is None


class _AnotherWorkerStartsMeanwhile:
    """A worker's Redis client after whose first command another worker records the same crawl's metadata:
    the slow worker of two started together (seen in CI)."""

    def __init__(self, client: Redis, other_worker: Any) -> None:
        self._client = client
        self._other_worker: Any = other_worker

    def __getattr__(self, name: str) -> Any:
        command = getattr(self._client, name)

        async def call(*args: Any, **kwargs: Any) -> Any:
            answer = await command(*args, **kwargs)
            other_worker, self._other_worker = self._other_worker, None
            if other_worker is not None:
                await other_worker()
            return answer

        return call


def test_workers_starting_together_both_accept_a_new_crawl(redis_server: RedisServer) -> None:
    """A worker whose start is overtaken by another's does not read the other's half-written metadata (a
    ``created`` seen without its ``layout`` once made it take the new crawl for a first-layout one)."""
    router = ShardRouter(f"new-{random.getrandbits(32)}")

    async def check() -> None:
        slow, fast = Redis.from_url(redis_server.url), Redis.from_url(redis_server.url)
        try:
            await check_crawl_metadata(
                _AnotherWorkerStartsMeanwhile(slow, lambda: check_crawl_metadata(fast, router)), router
            )
        finally:
            await slow.aclose()
            await fast.aclose()

    asyncio.run(check())
    meta = redis_server.client().hgetall(router.crawl_keys.crawl_key("meta"))
    assert int(meta[b"layout"]) == LAYOUT_VERSION
    assert int(meta[b"shards"]) == 1


@pytest.mark.parametrize("shards", [1, 4])
def test_the_duplicate_index_finds_duplicates_across_hosts_and_shards(redis_server: RedisServer, shards: int) -> None:
    """Exact and near duplicates found across hosts whatever shards hold the digest and the SimHash
    blocks, each naming the first capture's URL (read from its record) and time."""
    from crawler.dedup.index import DedupIndex
    from crawler.warc.dates import micros_of_warc_date
    from crawler.warc.digests import payload_digest

    router = ShardRouter(f"dedup-{shards}-{random.getrandbits(32)}", shards)
    rng = random.Random(shards)

    async def main() -> None:
        client = Redis.from_url(redis_server.url)
        index = DedupIndex(client, router, 3)
        await index.open()
        try:
            originals = [(f"http://h{i}.example/articles/{i}-original.html", rng.getrandbits(64)) for i in range(40)]
            later = micros_of_warc_date("2026-12-02T00:00:01Z")
            for i, (url, simhash) in enumerate(originals):
                verdict = await index.check(url, f"h{i}.example", payload_digest(url.encode()),
                                            micros_of_warc_date(f"2026-12-01T00:00:{i:02d}.123456Z"), simhash)
                assert (verdict.duplicate_of, verdict.near_duplicate_of) == (None, None)
            for i, (url, simhash) in enumerate(originals):
                # The same payload on another host: an exact duplicate of the first capture.
                copy = f"http://copy{i}.example/x/{i}"
                verdict = await index.check(copy, f"copy{i}.example", payload_digest(url.encode()),
                                            micros_of_warc_date("2026-12-02T00:00:00Z"), rng.getrandbits(64))
                assert verdict.duplicate_of == (url, f"2026-12-01T00:00:{i:02d}.123456Z")
                # Three bits away (one in each of three blocks) on a third host: a near duplicate.
                near = simhash ^ (1 << 3) ^ (1 << 20) ^ (1 << 40)
                verdict = await index.check(f"http://near{i}.example/{i}", f"near{i}.example",
                                            payload_digest(f"near {i}".encode()), later, near)
                assert (verdict.near_duplicate_of, verdict.distance) == (url, 3)
                # Found under block 1 only (blocks 0, 2 and 3 differ): its reference is under its block 0.
                other = simhash ^ (1 << 60) ^ (1 << 3) ^ (1 << 20)
                verdict = await index.check(f"http://other{i}.example/{i}", f"other{i}.example",
                                            payload_digest(f"other {i}".encode()), later, other)
                assert (verdict.near_duplicate_of, verdict.distance) == (url, 3)
            # Four bits away: not a near duplicate.
            far = originals[0][1] ^ 0b1111
            verdict = await index.check("http://far.example/", "far.example", payload_digest(b"far"),
                                        micros_of_warc_date("2026-12-02T00:00:02Z"), far)
            assert verdict.near_duplicate_of is None
        finally:
            await index.close()
            await client.aclose()

    asyncio.run(main())


def test_a_digest_sharing_its_index_key_with_another_is_not_its_duplicate(redis_server: RedisServer) -> None:
    """The exact index is keyed by a digest's first 8 bytes and checks 4 more: a second payload with
    the same key and other bytes is no duplicate, and it leaves the first capture recorded (the first
    payload again is still a duplicate of it); a new digest is recorded at its first check."""
    import base64

    from crawler.dedup.index import DedupIndex
    from crawler.warc.dates import micros_of_warc_date

    router = ShardRouter(f"dedup-key-{random.getrandbits(32)}", 1)

    def digest(raw: bytes) -> str:
        return "sha1:" + base64.b32encode(raw).decode()

    first, clash = bytes(range(20)), bytes(range(8)) + b"\xff" * 12

    async def main() -> None:
        client = Redis.from_url(redis_server.url)
        index = DedupIndex(client, router, 3)
        await index.open()
        try:
            when = micros_of_warc_date("2026-12-01T00:00:00.000000Z")
            verdict = await index.check("http://a.example/1", "a.example", digest(first), when, None)
            assert verdict.duplicate_of is None
            assert await index.first_capture(digest(first)) == ("http://a.example/1", "2026-12-01T00:00:00.000000Z")
            verdict = await index.check("http://b.example/2", "b.example", digest(clash), when + 1, None)
            assert verdict.duplicate_of is None
            assert await index.first_capture(digest(clash)) is None
            verdict = await index.check("http://c.example/3", "c.example", digest(first), when + 2, None)
            assert verdict.duplicate_of == ("http://a.example/1", "2026-12-01T00:00:00.000000Z")
        finally:
            await index.close()
            await client.aclose()

    asyncio.run(main())


def test_a_duplicate_of_a_page_still_in_flight_names_it(redis_server: RedisServer) -> None:
    """With the URL metadata pipeline on, a page's URL record is written after its WARC record: a copy
    checked meanwhile (two identical pages in flight at once) is still a duplicate of the first, named from
    what this worker checked lately. Another worker, which never saw the first, cannot name it: unresolved
    (stored in full), as before."""
    from crawler.dedup.index import DedupIndex
    from crawler.warc.dates import micros_of_warc_date
    from crawler.warc.digests import payload_digest

    router = ShardRouter(f"inflight-{random.getrandbits(32)}", 1)

    async def main() -> None:
        client = Redis.from_url(redis_server.url)
        index = DedupIndex(client, router, 3, write_records=False)
        other = DedupIndex(client, router, 3, write_records=False)
        await index.open()
        await other.open()
        try:
            digest = payload_digest(b"<html>the same root page</html>")
            first = await index.check("http://a.example/", "a.example", digest,
                                      micros_of_warc_date("2026-12-05T00:00:01.5Z"), None)
            assert (first.duplicate_of, first.unresolved) == (None, False)
            copy = await index.check("http://b.example/", "b.example", digest,
                                     micros_of_warc_date("2026-12-05T00:00:02Z"), None)
            assert copy.duplicate_of == ("http://a.example/", "2026-12-05T00:00:01.500000Z")
            elsewhere = await other.check("http://c.example/", "c.example", digest,
                                          micros_of_warc_date("2026-12-05T00:00:03Z"), None)
            assert (elsewhere.duplicate_of, elsewhere.unresolved) == (None, True)
        finally:
            await index.close()
            await other.close()
            await client.aclose()

    asyncio.run(main())


def test_a_simhash_is_filed_under_each_block_s_documented_key_and_field(redis_server: RedisServer) -> None:
    """Block i of a SimHash is field <low byte mod 16> of hash P..'nd:<i>:<high byte>:<low byte div 16>'
    (decimal), its entry the 6 bytes outside the block, and under block 0 the page's URL key and shard
    too: bytes of one, two and three digits and 0 and 255, written by the script's table of byte
    decimals."""
    from crawler.dedup.index import DedupIndex
    from crawler.warc.dates import micros_of_warc_date
    from crawler.warc.digests import payload_digest

    router = ShardRouter(f"near-keys-{random.getrandbits(32)}", 1)
    simhash = bytes([0, 255, 100, 200, 10, 99, 254, 1])
    url = "http://blocks.example/page"

    async def main() -> None:
        client = Redis.from_url(redis_server.url)
        index = DedupIndex(client, router, 3)
        await index.open()
        try:
            verdict = await index.check(url, "blocks.example", payload_digest(b"blocks"),
                                        micros_of_warc_date("2026-12-01T00:00:00Z"), int.from_bytes(simhash, "big"))
            assert (verdict.duplicate_of, verdict.near_duplicate_of) == (None, None)
        finally:
            await index.close()
            await client.aclose()

    asyncio.run(main())
    client = redis_server.client()
    prefix = router.keys[0].prefix
    written = {key.decode() for key in client.scan_iter(f"{prefix}nd:*")}
    # Block i's two bytes: the high byte and the low byte's high nibble name the hash (16 fields each),
    # its low nibble the field.
    assert written == {f"{prefix}nd:{i}:{simhash[2 * i]}:{simhash[2 * i + 1] // 16}" for i in range(4)}
    for i in range(4):
        entry = client.hget(f"{prefix}nd:{i}:{simhash[2 * i]}:{simhash[2 * i + 1] // 16}", str(simhash[2 * i + 1] % 16))
        assert entry is not None
        assert entry[:6] == simhash[:2 * i] + simhash[2 * i + 2:]
        if i == 0:
            assert entry[6:] == struct.pack(">qH", url_key(url_fingerprint(url)), 0)
        else:
            assert len(entry) == 6


@pytest.mark.parametrize("shards", [1, 4])
def test_the_duplicate_check_writes_a_url_record_only_when_no_metadata_pipeline_does(
        redis_server: RedisServer, shards: int) -> None:
    """With the URL metadata pipeline on (``write_records=False``) the check writes no URL record (the
    pipeline's, written after it, names the first capture); without it the check writes the page's
    record itself, so a later duplicate is named either way. A duplicate (checked by another worker) of a
    page whose record was never written is stored in full (unresolved), never named wrongly."""
    from crawler.dedup.index import DedupIndex
    from crawler.metadata.recordstore import UrlMetadataStore, UrlRecord, UrlState
    from crawler.warc.dates import micros_of_warc_date
    from crawler.warc.digests import payload_digest

    router = ShardRouter(f"dedup-records-{shards}-{random.getrandbits(32)}", shards)

    async def main() -> None:
        client = Redis.from_url(redis_server.url)
        meta = UrlMetadataStore(client, router)
        await meta.open()
        indexes = {mode: DedupIndex(client, router, 3, write_records=mode) for mode in (True, False)}
        for index in indexes.values():
            await index.open()
        try:
            for mode, index in indexes.items():
                first, host = f"http://first-{mode}.example/page", f"first-{mode}.example"
                digest = payload_digest(first.encode())
                captured = micros_of_warc_date("2026-12-01T00:00:00.123456Z")
                verdict = await index.check(first, host, digest, captured, None)
                assert verdict.duplicate_of is None
                written = await meta.get(first, host)
                assert (written is not None) == mode, f"write_records={mode}: record {written}"
                if not mode:
                    # Before the metadata pipeline wrote it: another worker's copy cannot name it yet (this
                    # worker's can: test_a_duplicate_of_a_page_still_in_flight_names_it).
                    other = DedupIndex(client, router, 3, write_records=False)
                    await other.open()
                    early = await other.check(f"http://early.example/{mode}", "early.example", digest,
                                              micros_of_warc_date("2026-12-01T00:00:01Z"), None)
                    await other.close()
                    assert (early.duplicate_of, early.unresolved) == (None, True)
                    await meta.record(first, host, UrlRecord(UrlState.FETCHED, 10, 200, url=first, host=host))
                copy = await index.check(f"http://copy.example/{mode}", "copy.example", digest,
                                         micros_of_warc_date("2026-12-01T00:00:02Z"), None)
                assert copy.duplicate_of == (first, "2026-12-01T00:00:00.123456Z")
        finally:
            for index in indexes.values():
                await index.close()
            await meta.close()
            await client.aclose()

    asyncio.run(main())


def test_the_server_settings_check_names_what_an_external_server_lacks_and_what_it_has_too_much_of() -> None:
    shipped = {name: str(value) for name, value in SERVER_CONFIG.items()}
    assert server_config_problems(shipped) == []
    assert BucketSizes.from_config(shipped).due == 64
    # A limit of 1024 (what the embedded server used before 2026-12-06) keeps the ready heap and the
    # leases as listpacks, scanned on every write: named, with the most the frontier wants.
    problems = server_config_problems({**shipped, "zset-max-listpack-entries": "1024"})
    assert len(problems) == 1
    assert problems[0].startswith("zset-max-listpack-entries 1024 (the frontier wants at most 128")
    # Redis' own defaults: what each compact bucket lacks, and nothing about the sorted sets (128).
    defaults = {"set-max-intset-entries": "512", "hash-max-listpack-entries": "128",
                "hash-max-listpack-value": "64", "zset-max-listpack-entries": "128", "list-compress-depth": "0"}
    named = [problem.split()[0] for problem in server_config_problems(defaults)]
    assert named == ["set-max-intset-entries", "hash-max-listpack-entries", "hash-max-listpack-value",
                     "list-compress-depth"]


def test_the_embedded_server_runs_with_the_layout_s_settings(tmp_path: Path) -> None:
    """The embedded server (make crawl's) has every setting of SERVER_CONFIG; on it, a recrawl-schedule
    bucket of the size the frontier gives it stays a listpack, and a sorted set with an entry per host
    past 128 hosts (the ready heap) is a skip list."""
    server = EmbeddedRedisServer(tmp_path / "redis")

    async def check() -> None:
        await server.start()
        try:
            client = Redis.from_url(server.url)
            config = await client.config_get("*")
            for name, value in SERVER_CONFIG.items():
                assert int(config[name]) == value, name
            due = BucketSizes.from_config(config).due
            await client.zadd("bucket", {str(member): 1_800_000_000 for member in range(due + 1)})
            await client.zadd("ready", {f"127.0.{n // 250}.{n % 250}": 1_800_000_000_000 + n for n in range(200)})
            assert await client.object("encoding", "bucket") == b"listpack"
            assert await client.object("encoding", "ready") == b"skiplist"
            await client.aclose()
        finally:
            await server.stop()

    asyncio.run(check())
