"""The crawl's Lua as one Redis function library (crawler/redisconn/functions.py), on real redis-servers:
loaded once with each script's flags, versioned (another version replaced, or refused while its workers run),
found again after the server lost it, refused before its first write over maxmemory, loaded on every primary of
a Redis Cluster and present on a replica promoted there."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.asyncio import Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster

from crawler.crawlstate.keys import ShardKeys
from crawler.crawlstate.library import LIBRARY_MANY, LIBRARY_NAME, LIBRARY_SCRIPTS, library_scripts
from crawler.exceptions import FrontierUnavailableError
from crawler.frontier.redisfrontier import RedisFrontier
from crawler.frontier.seen import SeenConfig
from crawler.redisconn.functions import USERS_KEY, FunctionLibrary, LibraryConflictError, crawler_library
from support.mockweb import free_port
from tests.conftest import RedisClusterServers, RedisServer, _wait_for_port
from tests.test_frontier_contract import make_config


def _library_of(client: redis.Redis) -> dict[str, Any]:
    """FUNCTION LIST's entry of the crawler's library: its functions by name, each with its flags."""
    for library in client.function_list(library=LIBRARY_NAME):
        fields = dict(zip(library[::2], library[1::2]))
        functions = {}
        for function in fields[b"functions"]:
            entry = dict(zip(function[::2], function[1::2]))
            functions[entry[b"name"].decode()] = {flag.decode() for flag in entry[b"flags"]}
        return functions
    return {}


def _other_version() -> FunctionLibrary:
    """The crawler's library under another version number (a worker of another release)."""
    mine = crawler_library()
    return FunctionLibrary(LIBRARY_NAME, library_scripts(), LIBRARY_MANY, version=mine.version + "-other")


def _ensure(server: RedisServer, library: FunctionLibrary, worker: str | None = None) -> None:
    """``library.ensure`` on the server, from a client of its own (a worker starting)."""
    async def run() -> None:
        client = Redis.from_url(server.url)
        try:
            await library.ensure(client, worker)
        finally:
            await client.aclose()

    asyncio.run(run())


def test_the_library_is_loaded_once_with_each_scripts_flags(redis_server: RedisServer) -> None:
    client = redis_server.client()
    client.function_flush()
    client.config_resetstat()
    library = crawler_library()

    _ensure(redis_server, library)
    _ensure(redis_server, library)  # the same version loaded: nothing to do
    functions = _library_of(client)
    expected = {f"crawler_{name}" for names in LIBRARY_SCRIPTS.values() for name in names}
    expected |= {f"crawler_{name}_many" for name in LIBRARY_MANY} | {"crawler_version"}
    assert set(functions) == expected
    # A script's #!lua flags are its function's: the readers write nothing (they run over maxmemory
    # and on replicas), every other function has none (it may write: refused before it starts when full).
    assert functions["crawler_backlog"] == functions["crawler_record"] == {"no-writes"}
    assert functions["crawler_version"] == {"no-writes"}
    assert all(not flags for name, flags in functions.items()
               if name not in ("crawler_backlog", "crawler_record", "crawler_version"))
    assert client.fcall("crawler_version", 0) == library.version.encode()
    assert client.info("commandstats").get("cmdstat_function|load", {}).get("calls", 0) == 1


def test_another_version_is_replaced_unless_its_workers_run(redis_server: RedisServer) -> None:
    client = redis_server.client()
    client.function_flush()
    client.delete(USERS_KEY)
    other, mine = _other_version(), crawler_library()

    async def run() -> str:
        async_client = Redis.from_url(redis_server.url)
        try:
            await other.ensure(async_client, "old-host-1")  # a worker of the other release, running
            with pytest.raises(LibraryConflictError) as refused:
                await mine.ensure(async_client)
            assert client.fcall("crawler_version", 0) == other.version.encode()  # left as it was
            await other.leave(async_client, "old-host-1")  # that worker stopped
            await mine.ensure(async_client, "new-host-1")
            await mine.leave(async_client, "new-host-1")
            return str(refused.value)
        finally:
            await async_client.aclose()

    message = asyncio.run(run())
    assert other.version in message and mine.version in message and "old-host-1" in message
    assert "\n" not in message
    assert client.fcall("crawler_version", 0) == mine.version.encode()
    assert client.zcard(USERS_KEY) == 0  # each worker's word removed as it left


def test_a_worker_whose_word_lapsed_does_not_hold_its_version(redis_server: RedisServer) -> None:
    client = redis_server.client()
    client.function_flush()
    client.delete(USERS_KEY)
    other, mine = _other_version(), crawler_library()

    _ensure(redis_server, other)
    # A worker of the other version that died without leaving: its word lapsed a minute ago.
    client.zadd(USERS_KEY, {f"{other.version} dead-host-9": int(time.time() * 1000) - 60_000})
    _ensure(redis_server, mine)
    assert client.fcall("crawler_version", 0) == mine.version.encode()


def test_a_frontier_step_finds_a_lost_library_again(redis_server: RedisServer, crawl_id: str) -> None:
    """A server that lost its functions (a restart without persistence, FUNCTION FLUSH): the next step is
    refused ("Function not found"), the library loaded again and the step sent again."""
    keys = ShardKeys(crawl_id)
    config = make_config(crawl_id)

    async def run() -> tuple[int, int]:
        client = Redis.from_url(redis_server.url)
        frontier = RedisFrontier(client, keys, config, seen=SeenConfig.sized(10_000, 0.01))
        await frontier.prepare()
        first = frontier.entry(b"\x01" * 16, "a.example", "a.example", 0, b"blob-1")
        await frontier.enqueue([first])
        await client.function_flush()
        second = frontier.entry(b"\x02" * 16, "a.example", "a.example", 0, b"blob-2")
        added, duplicates = await frontier.enqueue([second, first])
        await frontier.close()
        await client.aclose()
        return added, duplicates

    assert asyncio.run(run()) == (1, 1)
    assert redis_server.client().fcall("crawler_version", 0) == crawler_library().version.encode()


def test_a_function_that_may_write_is_refused_before_its_first_write_when_redis_is_full(tmp_path: Path) -> None:
    """No flag but no-writes on a function that writes: over maxmemory Redis refuses it before it runs (never
    halfway, its writes so far kept); the readers (no-writes) still run."""
    server = RedisServer(tmp_path / "full")
    server.start()
    try:
        client = server.client()
        half_done = FunctionLibrary("fulltest", {
            "both": "#!lua\nredis.call('DEL', KEYS[1]) redis.call('SET', KEYS[2], '1') return 1"}, common=False)

        _ensure(server, crawler_library())
        _ensure(server, half_done)
        client.set("victim", "v")
        client.config_set("maxmemory", "2mb")
        client.config_set("maxmemory-policy", "noeviction")
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            for i in range(100_000):
                client.set(f"fill:{i}", "x" * 1000)
        before = client.dbsize()
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.fcall("fulltest_both", 2, "victim", "first")
        with pytest.raises(redis.exceptions.OutOfMemoryError):
            client.fcall("crawler_lead", 1, "some:lease", "w1", 1000)
        assert client.dbsize() == before and client.exists("victim") and not client.exists("first")
        keys = ShardKeys("full")
        assert client.fcall("crawler_record", 1, keys.lh("url"), keys.prefix, 1) == [b""]
    finally:
        server.stop()


def test_every_primary_of_a_cluster_has_the_library_and_a_promoted_replica_too(tmp_path: Path) -> None:
    cluster = RedisClusterServers(tmp_path / "cluster")
    cluster.start()
    replica: subprocess.Popen[bytes] | None = None
    try:
        async def ensure() -> None:
            client = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", port) for port in cluster.ports])
            await client.initialize()
            await crawler_library().ensure(client, "cluster-worker")
            await crawler_library().leave(client, "cluster-worker")
            await client.aclose()

        asyncio.run(ensure())
        version = crawler_library().version.encode()
        for port in cluster.ports:
            assert redis.Redis(port=port).fcall("crawler_version", 0) == version
        # A replica of the first primary, attached after the library was loaded, then promoted.
        port = free_port()
        directory = tmp_path / "replica"
        directory.mkdir()
        replica = subprocess.Popen(
            [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
             "--dir", str(directory), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
             "--cluster-port", str(free_port()), "--cluster-node-timeout", "5000", "--save", "",
             "--appendonly", "no", "--logfile", str(directory / "redis.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(port, process=replica, log=directory / "redis.log")
        primary = redis.Redis(port=cluster.ports[0], decode_responses=True)
        subprocess.run([shutil.which("redis-cli") or "redis-cli", "--cluster", "add-node", f"127.0.0.1:{port}",
                        f"127.0.0.1:{cluster.ports[0]}", "--cluster-slave", "--cluster-master-id",
                        primary.execute_command("CLUSTER", "MYID")],
                       check=True, capture_output=True, timeout=60)
        node = redis.Redis(port=port)
        deadline = time.monotonic() + 60
        while node.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica never synced"
            time.sleep(0.1)
        node.execute_command("CLUSTER", "FAILOVER")
        while node.info("replication").get("role") != "master":
            assert time.monotonic() < deadline, "the replica was never promoted"
            time.sleep(0.1)
        # Nothing loaded it there: it came with the primary's data.
        assert "cmdstat_function|load" not in node.info("commandstats")
        assert node.fcall("crawler_version", 0) == version
        assert set(_library_of(node)) == set(_library_of(redis.Redis(port=cluster.ports[0])))
    finally:
        if replica is not None:
            replica.terminate()
            replica.wait(timeout=30)
        cluster.stop()


def test_a_server_without_function_libraries_is_refused_with_one_line(tmp_path: Path) -> None:
    """A Redis older than 7.0 has no FCALL: stood in for by a redis-server with the command renamed away."""
    server = RedisServer(tmp_path / "old", options=("--rename-command", "FCALL", ""))
    server.start()
    try:
        with pytest.raises(FrontierUnavailableError) as refused:
            _ensure(server, crawler_library())
    finally:
        server.stop()
    message = str(refused.value)
    assert "Redis 7.0 or later" in message and "\n" not in message
