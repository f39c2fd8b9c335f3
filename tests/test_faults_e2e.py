"""Fault tolerance, proven by breaking things: killed workers, a restarted Redis.

Every test checks from the mock web's request log (what was fetched, how
often, how politely) and from the WARC files (what was stored) that nothing
was lost.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.crawlstate.keys import ShardKeys
from crawler.frontier.codec import stored_url
from crawler.urls import normalize_url
from support.mockweb import WebSpec, host_index, parse_page_path, politeness
from tests.conftest import RedisServer, RunningCrawl, url_record
from tests.netcut import NetCut
from tests.test_crawl_e2e import fetched_pages, wait_for_log

SPEC = WebSpec(hosts=30, sizes="uniform:10", fanout=3, nav=2, cross=2, latency_ms=(20, 40))
SEED_HOSTS = range(0, 30, 2)
MIN_GAP = 0.1


def page_of(url: str) -> tuple[int, int]:
    rest = url.split("://", 1)[1]
    hostport, _, path = rest.partition("/")
    return host_index(hostport.split(":")[0]), parse_page_path("/" + path)


def stored_pages(warc_dir: Path) -> dict[tuple[int, int], list[str]]:
    """(host, page) -> WARC record types stored for it, from every file (open ones too, to their last whole record)."""
    found: dict[tuple[int, int], list[str]] = {}
    for path in sorted(warc_dir.glob("*.warc.gz*")):
        with open(path, "rb") as handle:
            try:
                for record in ArchiveIterator(handle):
                    if record.rec_type in ("response", "revisit"):
                        key = page_of(record.rec_headers.get_header("WARC-Target-URI"))
                        if key[1] >= 0:
                            found.setdefault(key, []).append(record.rec_type)
            except Exception:  # a torn last record of a killed writer's file
                pass
    return found


def leased_pages(server: RedisServer, crawl_id: str) -> set[tuple[int, int]]:
    """Pages under a lease now (a live worker may ack one meanwhile: skipped; a dead one cannot)."""
    keys = ShardKeys(crawl_id)
    client = server.client()
    pages = set()
    for member in client.zrangebyscore(keys.leases, "-inf", "(inf"):  # not the anchor (schema.ZSET_ANCHOR)
        leaseno, _level, _id, host = member.decode().split(" ", 3)
        blob = client.hget(keys.leased, leaseno)
        if blob is not None and not blob.startswith(b"@"):
            pages.add(page_of(stored_url(blob, host)))
    return pages


def settings_for(redis_url: str, crawl_id: str, data: Path, **extra: object) -> dict[str, object]:
    return {
        "REDIS_URL": redis_url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": MIN_GAP,
        "FRONTIER_DELAY_FACTOR": 1, "CONCURRENT_REQUESTS": 8, "FRONTIER_IDLE_POLL": 0.2,
        "FRONTIER_LEASE_TIMEOUT": 3, "CRAWL_DATA_DIR": data, **extra,
    }


def start_workers(count: int, seeds: str, settings: dict[str, object]) -> list[subprocess.Popen[str]]:
    crawls = [RunningCrawl("-a", f"urls={seeds}", settings=settings) for _ in range(count)]
    _running.update((crawl.process, crawl) for crawl in crawls)
    return [crawl.process for crawl in crawls]


#: The background crawl of each worker process (its stats file).
_running: dict[subprocess.Popen[str], RunningCrawl] = {}


def finish(workers: list[subprocess.Popen[str]], timeout: float = 180) -> list[str]:
    outputs = []
    for worker in workers:
        result = _running.pop(worker).finish(timeout=timeout)
        assert result.returncode == 0, result.stderr[-3000:]
        assert result.stats["finish_reason"] == "finished", result.stderr[-3000:]
        outputs.append(result.stderr)
    return outputs


def assert_recorded_once(server: RedisServer, crawl_id: str, web: Any, pages: set[tuple[int, int]]) -> None:
    """The URL metadata store holds each page as one observation, however often it was fetched and stored."""
    client = server.client()
    for host, page in pages:
        url, _ = normalize_url(web.url(host, page))
        record = url_record(client, crawl_id, url)
        assert record is not None, url
        assert (record.observations, record.changes) == (1, 0), (url, record)


def assert_complete(web: Any, warc_dir: Path) -> dict[tuple[int, int], int]:
    """Every reachable page fetched and stored; politeness held throughout. Returns fetch counts."""
    expected = SPEC.reachable((h, 0) for h in SEED_HOSTS)
    fetched = fetched_pages(web)
    assert set(fetched) == expected
    stored = stored_pages(warc_dir)
    assert expected <= set(stored), sorted(expected - set(stored))[:10]
    report = politeness(web.entries(), min_gap=MIN_GAP)
    assert (report.overlaps, report.short_gaps) == (0, 0), report
    return dict(fetched)


def test_sigkill_one_worker_the_others_take_its_leases(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    web = mockweb_factory(SPEC)
    seeds = ",".join(web.url(h) for h in SEED_HOSTS)
    settings = settings_for(redis_server.url, crawl_id, tmp_path / "data")
    # The worker to kill starts first and is in full swing (holding leases)
    # when the others join and when it dies.
    workers = start_workers(1, seeds, settings)
    wait_for_log(web, 40, workers[0])
    workers += start_workers(2, seeds, settings)
    wait_for_log(web, 120, workers[0])
    workers[0].send_signal(signal.SIGKILL)
    workers[0].wait()
    leased_at_kill = leased_pages(redis_server, crawl_id)
    outputs = finish(workers[1:])
    fetched = assert_complete(web, tmp_path / "data" / crawl_id / "warc")
    again = {page for page, count in fetched.items() if count > 1}
    # Fetched twice: only URLs that were leased when the worker died (its own,
    # fetched again after the lease expired).
    assert again <= leased_at_kill
    assert max(fetched.values()) <= 2
    # Storing a page twice is storing it once.
    assert_recorded_once(redis_server, crawl_id, web, set(fetched))
    # The dead worker's leases expired and a survivor took their URLs.
    assert any("'frontier/lease_expired': " in out for out in outputs)


def test_sigkill_every_worker_then_restart_completes(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    web = mockweb_factory(SPEC)
    seeds = ",".join(web.url(h) for h in SEED_HOSTS)
    settings = settings_for(redis_server.url, crawl_id, tmp_path / "data")
    workers = start_workers(2, seeds, settings)
    wait_for_log(web, 100, workers[0])
    for worker in workers:
        worker.send_signal(signal.SIGKILL)
    for worker in workers:
        worker.wait()
    leased_at_kill = leased_pages(redis_server, crawl_id)
    outputs = finish(start_workers(2, seeds, settings))
    fetched = assert_complete(web, tmp_path / "data" / crawl_id / "warc")
    assert {page for page, count in fetched.items() if count > 1} <= leased_at_kill
    assert_recorded_once(redis_server, crawl_id, web, set(fetched))
    # The killed writers' unfinished files were recovered by the new workers.
    warc_dir = tmp_path / "data" / crawl_id / "warc"
    assert not list(warc_dir.glob("*.open"))
    assert any("Recovered" in out and "unfinished WARC files" in out for out in outputs)


def test_redis_restart_workers_wait_and_continue(
    mockweb_factory: Any, crawl_id: str, tmp_path: Path
) -> None:
    server = RedisServer(tmp_path / "redis")
    server.start()
    try:
        web = mockweb_factory(SPEC)
        seeds = ",".join(web.url(h) for h in SEED_HOSTS)
        settings = settings_for(server.url, crawl_id, tmp_path / "data")
        workers = start_workers(2, seeds, settings)
        wait_for_log(web, 80, workers[0])
        server.stop()  # SIGTERM: the AOF is written out
        down_at = len(web.entries())
        time.sleep(3)
        for worker in workers:
            if worker.poll() is not None:
                died = _running.pop(worker).finish(timeout=30)
                pytest.fail(f"a worker died while Redis was down:\n{died.stderr[-6000:]}")
        server.start()
        outputs = finish(workers)
        assert len(web.entries()) > down_at
        fetched = assert_complete(web, tmp_path / "data" / crawl_id / "warc")
        assert max(fetched.values()) <= 2
        assert_recorded_once(server, crawl_id, web, set(fetched))
        assert any("Redis unreachable" in out for out in outputs)
        # Nothing was given up on or skipped for want of Redis.
        for out in outputs:
            for lost in ("dead_lettered", "/unavailable", "retry/redis_unavailable"):
                assert lost not in out, out[-3000:]
    finally:
        server.stop()


def test_a_buffered_lease_that_may_have_lapsed_is_given_back_not_fetched(
    redis_server: RedisServer, crawl_id: str
) -> None:
    """Claimed requests wait in the worker's buffer while the engine is busy (its pipelines waiting for
    a Redis that is down). Once their lease may have expired (two thirds of FRONTIER_LEASE_TIMEOUT
    without a renewal), another worker may hold their hosts: the worker does not hand them out but
    gives them back with its next step, and claims afresh."""
    import asyncio

    from scrapy import Request, Spider
    from scrapy.utils.test import get_crawler

    from crawler.frontier.codec import RequestCodec
    from crawler.frontier.scheduler import FrontierScheduler

    class WebSpider(Spider):
        name = "web"

    crawler = get_crawler(WebSpider, settings_dict={
        "ADDONS": {"crawler.addon.CrawlerAddon": 0}, "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id,
        "FRONTIER_LEASE_TIMEOUT": 1.0, "FRONTIER_MIN_DELAY": 0, "ROBOTSTXT_OBEY": False,
    })
    spider = WebSpider()
    scheduler = FrontierScheduler.from_crawler(crawler)
    stats = scheduler.stats

    async def main() -> None:
        client = await scheduler.provider.client()
        _sizes, frontiers = await scheduler._open_shards(client)
        codec = RequestCodec(spider, 1 << 20)
        scheduler.intake.bind(codec, frontiers)
        pump = scheduler.pump
        pump.frontiers, pump.codec = frontiers, codec
        for n in range(3):
            assert scheduler.enqueue_request(Request(f"http://127.0.0.{n + 1}:9/"))
        await pump.cycle()  # enqueued and claimed: one lease per host, in the buffer
        members = [handout.lease.member for _, handout in scheduler.inhand.buffer]
        assert len(members) == 3
        await asyncio.sleep(0.8)  # no step meanwhile: no renewal
        assert scheduler.next_request() is None
        assert not scheduler.inhand.buffer and not scheduler.inhand.handed
        sent_at = time.time()
        await pump.cycle()  # given back (released), then claimed again under new leases
        assert stats.get_value("frontier/lease_lapsed") == 3
        assert stats.get_value("frontier/released") == 3
        again = [handout for _, handout in scheduler.inhand.buffer]
        assert len(again) == 3 and not {handout.lease.member for handout in again} & set(members)
        assert set(await client.zrangebyscore(scheduler.keys.leases, "-inf", "(inf")) == {
            handout.lease.member for handout in again}
        assert all(handout.confirmed_at >= sent_at for handout in again)  # the new leases run from their claim
        await scheduler.provider.close()

    asyncio.run(main())


def test_redis_lost_while_a_worker_opens_is_waited_out(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    """The command's preflight reaches Redis; then, as the worker's components open (the frontier's
    checks and scripts, the pipelines' indexes), the network drops every connection and refuses new
    ones for 2 s. The worker waits it out, saying why, and crawls everything."""
    web = mockweb_factory(SPEC)
    seeds = ",".join(web.url(h) for h in SEED_HOSTS)
    handshake = {b"PING", b"INFO", b"CLIENT", b"HELLO", b"SELECT", b"AUTH"}
    cut = NetCut(("127.0.0.1", redis_server.port), allowed=handshake, outage=2.0)
    try:
        settings = settings_for(cut.url, crawl_id, tmp_path / "data")
        (output,) = finish(start_workers(1, seeds, settings))
    finally:
        cut.close()
    assert cut.cut_at is not None
    assert "open: Redis unreachable" in output or "Redis at redis://" in output, output[-3000:]
    assert_complete(web, tmp_path / "data" / crawl_id / "warc")


def test_the_first_connection_waits_for_redis_then_names_the_setting(tmp_path: Path) -> None:
    """A worker's first connection (after the command's preflight) meets a Redis that is down: it waits
    and connects when the server is back; past REDIS_OUTAGE_TIMEOUT the error names REDIS_URL."""
    import asyncio

    from crawler.exceptions import FrontierUnavailableError
    from crawler.redisconn.config import RedisConfig
    from crawler.redisconn.outage import OutagePolicy
    from crawler.redisconn.provider import RedisProvider

    server = RedisServer(tmp_path / "redis")
    config = RedisConfig(server.url, Path("unused"), "redis-server", 2.0)

    async def connect_while_it_starts() -> bytes:
        provider = RedisProvider(config, OutagePolicy(timeout=60, base_delay=0.1, max_delay=0.5))
        opening = asyncio.ensure_future(provider.client())
        await asyncio.sleep(1.0)
        assert not opening.done()
        server.start()
        client = await opening
        await client.set("back", "yes")
        value: bytes = await client.get("back")
        await provider.close()
        return value

    async def give_up() -> None:
        provider = RedisProvider(config, OutagePolicy(timeout=0.5, base_delay=0.1, max_delay=0.2))
        errors = []
        for _ in range(2):  # the components closing after it are told without a second wait
            try:
                await provider.client()
            except FrontierUnavailableError as exc:
                errors.append(exc)
        assert len(errors) == 2 and errors[0] is errors[1]
        raise errors[0]

    try:
        assert asyncio.run(connect_while_it_starts()) == b"yes"
    finally:
        server.stop()
    with pytest.raises(FrontierUnavailableError, match=r"\(REDIS_URL\) after waiting REDIS_OUTAGE_TIMEOUT = 0.5 s"):
        asyncio.run(give_up())


def test_hundreds_of_concurrent_redis_calls_wait_for_a_connection_instead_of_failing(
    redis_server: RedisServer,
) -> None:
    """A worker has hundreds of requests in flight; their Redis calls share a bounded pool
    (``REDIS_MAX_CONNECTIONS``): past it they wait for a connection, never "Too many connections"."""
    import asyncio

    from crawler.redisconn.config import RedisConfig
    from crawler.redisconn.provider import RedisProvider

    watcher = redis_server.client()
    before = len(watcher.client_list())

    async def burst() -> tuple[int, int]:
        config = RedisConfig(redis_server.url, Path("unused"), "redis-server", 10.0, max_connections=8)
        provider = RedisProvider(config)
        client = await provider.client()
        await client.delete("burst")
        # BLPOP holds its connection for a moment: 300 of them at once need far more than 8.
        await asyncio.gather(*(client.blpop([f"burst-none-{i}"], timeout=0.05) for i in range(300)))
        await asyncio.gather(*(client.incr("burst") for _ in range(300)))
        count = int(await client.get("burst"))
        # The server's view: the connections this provider opened (nothing else runs meanwhile).
        opened = len(watcher.client_list()) - before
        await provider.close()
        return count, opened

    count, opened = asyncio.run(burst())
    assert count == 300
    assert 1 <= opened <= 8


def test_batched_replies_keep_errors_in_place_and_time_out_as_a_whole(redis_server: RedisServer) -> None:
    """read_replies (frontier steps, batched scripts): an error reply takes its place and the replies after it
    are still read; a server that never answers is a Redis TimeoutError after the connection's socket_timeout
    (one timeout for the batch), and the connection is dropped."""
    import asyncio
    import socket
    import time

    from redis.asyncio import Redis
    from redis.exceptions import ResponseError
    from redis.exceptions import TimeoutError as RedisTimeoutError

    from crawler.redisconn.link import read_replies
    from crawler.redisconn.resp import command

    async def in_step() -> list[object]:
        client = Redis.from_url(redis_server.url, socket_timeout=5)
        connection = await client.connection_pool.get_connection()
        await connection.send_packed_command(
            command("SET", "rr", "1") + command("INCR", "rr", "x") + command("GET", "rr") + command("LPUSH", "rr", "v"),
            check_health=False)
        replies = await read_replies(connection, 4)
        await client.connection_pool.release(connection)
        await client.aclose()
        return replies

    replies = asyncio.run(in_step())
    assert replies[0] is True or replies[0] == b"OK"
    assert isinstance(replies[1], ResponseError)  # INCR with two arguments
    assert replies[2] == b"1"
    assert isinstance(replies[3], ResponseError)  # WRONGTYPE
    assert "WRONGTYPE" in str(replies[3])

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]

    async def no_answer() -> tuple[float, bool]:
        client = Redis(host="127.0.0.1", port=port, socket_timeout=0.5, protocol=2, driver_info=None)  # no SETINFO
        connection = client.connection_pool.make_connection()
        await connection.connect_check_health(check_health=False)
        await connection.send_packed_command(command("PING") + command("PING"), check_health=False)
        started = time.monotonic()
        with pytest.raises(RedisTimeoutError):
            await read_replies(connection, 2)
        return time.monotonic() - started, connection.is_connected

    try:
        waited, connected = asyncio.run(no_answer())
    finally:
        silent.close()
    assert waited >= 0.4
    assert not connected


def test_plain_commands_and_scripts_queued_together_go_in_one_batch(redis_server: RedisServer) -> None:
    """The shared batcher (robots.txt records, render marks): commands and function calls queued in one turn of
    the event loop are one write; each gets its own reply, an error only its own; flushed functions are
    loaded again and the batch sent again."""
    import asyncio

    from redis.asyncio import Redis
    from redis.exceptions import ResponseError

    from crawler.redisconn.batch import BatchedScripts
    from crawler.redisconn.functions import FunctionLibrary

    class Counted(BatchedScripts):
        writes = 0

        async def _send(self, link, batch):  # type: ignore[no-untyped-def]
            Counted.writes += 1
            return await super()._send(link, batch)

    async def run() -> tuple[list[object], object, int]:
        client = Redis.from_url(redis_server.url)
        await client.delete("bc:list", *(f"bc:{i}" for i in range(40)))
        await client.rpush("bc:list", "x")
        batch = Counted(client, FunctionLibrary("bctest", {"double": "#!lua\nreturn tonumber(ARGV[1]) * 2"},
                                                common=False))
        await client.function_flush()
        sets = [batch.command(b"SET", f"bc:{i}", i) for i in range(40)]
        wrong = batch.command(b"INCR", "bc:list")  # WRONGTYPE: its own error
        doubled = batch.call("double", ["bc:0"], [21])
        gets = [batch.command(b"GET", f"bc:{i}") for i in range(40)]
        replies = await asyncio.gather(*sets, doubled, *gets)
        error = await asyncio.gather(wrong, return_exceptions=True)
        await batch.close()
        await client.aclose()
        return replies, error[0], Counted.writes

    replies, error, writes = asyncio.run(run())
    assert replies[:40] == [b"OK"] * 40
    assert replies[40] == 42
    assert replies[41:] == [str(i).encode() for i in range(40)]
    assert isinstance(error, ResponseError) and "WRONGTYPE" in str(error)
    assert writes == 2  # one batch, sent again once after the function was found missing


def test_calls_of_a_script_with_a_many_form_go_as_one_call(redis_server: RedisServer) -> None:
    """Item pipelines' scripts (duplicate check, URL record, schedule) have a form that runs many calls in one:
    the calls of one turn with the same keys are one FCALL; each still gets its own reply (nil, a list, an
    error raised by the script or by a command it ran: only its own); other keys are a call of their own; the
    library is loaded again when the server's functions were flushed."""
    import asyncio

    from redis.asyncio import Redis
    from redis.exceptions import ResponseError

    from crawler.redisconn.batch import BatchedScripts
    from crawler.redisconn.functions import FunctionLibrary

    body = """#!lua
if ARGV[1] == 'fail' then error('failed on purpose') end
if ARGV[1] == 'wrong' then return redis.call('INCR', KEYS[1]) end
if ARGV[1] == 'nil' then return nil end
redis.call('RPUSH', KEYS[1] .. ':seen', ARGV[1])
return {ARGV[1], #ARGV}"""
    library = FunctionLibrary("mctest", {"echo": body}, many=("echo",), common=False)

    async def fcalls(client: Redis) -> int:
        stats = await client.info("commandstats")
        return int(stats.get("cmdstat_fcall", {}).get("calls", 0))

    async def run() -> tuple[list[Any], int, list[bytes], list[Any], int]:
        client = Redis.from_url(redis_server.url)
        await client.delete("mc:a", "mc:a:seen", "mc:b:seen")
        await client.rpush("mc:a", "x")  # INCR on a list: WRONGTYPE
        scripts = BatchedScripts(client, library)
        await scripts.load()
        before = await fcalls(client)
        args = ["x0", "fail", "x1", "nil", "wrong", "x2"]
        calls = [scripts.call("echo", ["mc:a"], [arg, "extra"]) for arg in args]
        other = scripts.call("echo", ["mc:b"], ["y"])
        replies = await asyncio.gather(*calls, other, return_exceptions=True)
        after = await fcalls(client)
        seen = await client.lrange("mc:a:seen", 0, -1)
        await client.function_flush()
        again = await asyncio.gather(*(scripts.call("echo", ["mc:a"], [f"z{i}"]) for i in range(3)))
        last = await fcalls(client)
        await scripts.close()
        await client.aclose()
        return replies, after - before, seen, again, last - after

    replies, sent, seen, again, resent = asyncio.run(run())
    assert sent == 2  # six calls on mc:a as one, the call on mc:b alone
    assert replies[0] == [b"x0", 2] and replies[2] == [b"x1", 2] and replies[5] == [b"x2", 2]
    assert isinstance(replies[1], ResponseError) and "failed on purpose" in str(replies[1])
    assert replies[3] is None
    assert isinstance(replies[4], ResponseError) and "WRONGTYPE" in str(replies[4])
    assert replies[6] == [b"y", 1]
    assert seen == [b"x0", b"x1", b"x2"]  # each call's writes, in order, the failed ones' none
    assert again == [[b"z0", 1], [b"z1", 1], [b"z2", 1]]
    assert resent == 3  # refused (no function), the version asked, loaded, sent again: still one call


def test_components_opening_together_share_one_batcher(redis_server: RedisServer) -> None:
    """The robots.txt and render middlewares ask for the batcher in the same spider_opened: one batcher (one
    connection), not one each with the first never closed."""
    import asyncio

    from crawler.redisconn.config import RedisConfig
    from crawler.redisconn.provider import RedisProvider

    async def run() -> bool:
        provider = RedisProvider(RedisConfig(redis_server.url, Path("unused"), "redis-server", 10.0))
        first, second = await asyncio.gather(provider.batched(), provider.batched())
        await provider.close()
        return first is second

    assert asyncio.run(run())
