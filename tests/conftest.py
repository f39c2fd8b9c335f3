"""Fixtures: a real redis-server and the multi-host mock web, both as subprocesses.

Tests never flush a database: each one works in its own crawl id (its own key
namespace), the way two crawls share one Redis in production.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from support.mockweb import WebSpec, free_port, host_ip, read_log, spec_arguments

ROOT = Path(__file__).resolve().parent.parent


def _wait_for_port(port: int, host: str = "127.0.0.1", timeout: float = 10.0, *,
                   process: subprocess.Popen[bytes] | None = None, log: Path | None = None) -> None:
    """Wait until ``host:port`` accepts; fail at once, with the server's log, if ``process`` has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            if process is not None and process.poll() is not None:
                raise RuntimeError(f"the server for {host}:{port} exited ({process.returncode}) before it listened"
                                   f"{_log_tail(log)}") from None
            time.sleep(0.02)
    raise RuntimeError(f"nothing listens on {host}:{port} after {timeout} s{_log_tail(log)}")


def _log_tail(log: Path | None, lines: int = 5) -> str:
    if log is None or not log.exists():
        return ""
    return "; its log ends: " + " | ".join(log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class RedisServer:
    """A redis-server subprocess on a loopback TCP port, with AOF persistence."""

    directory: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    #: More redis-server options (``("--maxmemory", "64mb")``).
    options: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (make test installs it)")
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.directory),
                "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
                "--daemonize", "no", "--logfile", str(self.directory / "redis.log"), *self.options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, process=self.process, log=self.directory / "redis.log")
        client = self.client()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port)


#: Fixtures that start real components as subprocesses: a test using one is end to end.
_SERVICE_FIXTURES = frozenset({"redis_server", "contract_redis", "mockweb_factory", "moto", "redis_cluster"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark end-to-end tests (``-m e2e``; ``make unit`` runs the others): every test of an
    ``*_e2e.py`` module, and every test that uses a fixture starting a real component."""
    for item in items:
        if item.path.name.endswith("_e2e.py") or _SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def crawl_id() -> str:
    return f"t{uuid.uuid4().hex[:12]}"


@dataclass
class MockWeb:
    spec: WebSpec
    port: int
    log_path: Path
    process: subprocess.Popen[bytes]

    def url(self, host: int, page: int = 0) -> str:
        path = "/" if page == 0 else f"/p/{page}"
        return f"http://{host_ip(host)}:{self.port}{path}"

    def entries(self) -> list:  # type: ignore[type-arg]
        return read_log(str(self.log_path))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=10)


def start_mockweb(spec: WebSpec, log_path: Path, silent_port: int = 0) -> MockWeb:
    """The mock web in its own process; ``silent_port``: also accept connections there, never answering."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "support.mockweb", "--port", str(port), "--log", str(log_path),
         *(["--silent-port", str(silent_port)] if silent_port else []), *spec_arguments(spec)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_for_port(port, host_ip(0))
    return MockWeb(spec, port, log_path, process)


@pytest.fixture
def mockweb_factory(tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    started: list[MockWeb] = []

    def factory(spec: WebSpec) -> MockWeb:
        web = start_mockweb(spec, tmp_path / f"mockweb-{len(started)}.log")
        started.append(web)
        return web

    yield factory
    for web in started:
        web.stop()


#: The mock web is on loopback addresses, which the crawler refuses by default.
#: A seen set sized for a test, not for 100 million URLs (~125 MiB of Bloom
#: filter); crawl data (WARC files, embedded Redis) outside the repository.
TEST_SETTINGS: dict[str, object] = {
    "ALLOW_PRIVATE_NETWORKS": True,
    "SEEN_EXPECTED_URLS": 100_000,
    "CRAWL_DATA_DIR": tempfile.mkdtemp(prefix="crawl-tests-"),
}


def crawl_command(*args: str, settings: dict[str, object] | None = None) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", "web", *args]
    for name, value in {**TEST_SETTINGS, **(settings or {})}.items():
        command += ["-s", f"{name}={value}"]
    return command


def crawl_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


class CrawlResult(subprocess.CompletedProcess[str]):
    """A finished crawl: its exit code and output, and its final stats as data (``STATS_JSON_FILE``)."""

    stats: dict[str, Any]


def run_crawl(
    *args: str, settings: dict[str, object] | None = None, timeout: float = 120, cwd: Path = ROOT,
    env: dict[str, str] | None = None,
) -> CrawlResult:
    """``scrapy crawl web`` with the test settings; the stats are read from the JSON file it writes."""
    stats_file = Path(tempfile.mkstemp(prefix="crawl-stats-", suffix=".json")[1])
    settings = {"STATS_JSON_FILE": str(stats_file), **(settings or {})}
    try:
        done = subprocess.run(
            crawl_command(*args, settings=settings), cwd=cwd, env=env or crawl_env(), capture_output=True,
            text=True, timeout=timeout, check=False,
        )
        text = stats_file.read_text(encoding="utf-8")
    finally:
        stats_file.unlink(missing_ok=True)
    result = CrawlResult(done.args, done.returncode, done.stdout, done.stderr)
    result.stats = json.loads(text) if text else {}
    return result


class RunningCrawl:
    """``scrapy crawl web`` started in the background (several workers, a crawl to interrupt)."""

    def __init__(self, *args: str, settings: dict[str, object] | None = None, stdout: Any = subprocess.DEVNULL) -> None:
        self.stats_file = Path(tempfile.mkstemp(prefix="crawl-stats-", suffix=".json")[1])
        command = crawl_command(*args, settings={"STATS_JSON_FILE": str(self.stats_file), **(settings or {})})
        self.process = subprocess.Popen(command, cwd=ROOT, env=crawl_env(), stdout=stdout, stderr=subprocess.PIPE,
                                        text=True)

    def finish(self, timeout: float = 180) -> CrawlResult:
        """Wait for the crawl to end; its output and final stats."""
        stdout, stderr = self.process.communicate(timeout=timeout)
        try:
            text = self.stats_file.read_text(encoding="utf-8")
        finally:
            self.stats_file.unlink(missing_ok=True)
        result = CrawlResult(self.process.args, self.process.returncode, stdout, stderr)
        result.stats = json.loads(text) if text else {}
        return result


def stat(result: CrawlResult, key: str) -> int:
    """A counter of a crawl's final stats (0 if it never counted)."""
    return int(result.stats.get(key, 0))


def load_library(client: Any) -> None:
    """The crawler's Lua function library on the server of ``client`` (a synchronous client), loaded if it
    is not (a test reading what a crawl left, after the crawl's server restarted without it)."""
    from crawler.redisconn.functions import crawler_library

    library = crawler_library()
    try:
        if client.fcall("crawler_version", 0) == library.version.encode():
            return
    except redis.exceptions.ResponseError:
        pass
    client.function_load(library.source, replace=True)


def url_record(client: Any, crawl_id: str, url: str, shards: int = 1) -> Any:
    """The stored record (:class:`crawler.metadata.record.UrlRecord`) of a normalized URL of a
    crawl of ``shards`` shards, read with the crawler's own record script; None when it has none."""
    from urllib.parse import urlsplit

    from crawler.crawlstate.shards import ShardRouter
    from crawler.metadata.record import UrlRecord
    from crawler.urls import url_fingerprint, url_key

    keys = ShardRouter(crawl_id, shards).keys_for(urlsplit(url).hostname or "")
    load_library(client)
    (packed,) = client.fcall("crawler_record", 1, keys.lh("url"), keys.prefix, url_key(url_fingerprint(url)))
    return UrlRecord.unpack(packed) if packed else None


def due_time(client: Any, crawl_id: str, url: str, shard: int = 0) -> float | None:
    """When a normalized URL is due for a recrawl (crawl-clock seconds), from the recrawl schedule's
    buckets; None when it is not scheduled."""
    from crawler.crawlstate.keys import ShardKeys
    from crawler.crawlstate.schema import due_entry_time
    from crawler.urls import url_fingerprint, url_key

    keys = ShardKeys(crawl_id, shard)
    member = str(url_key(url_fingerprint(url)))
    for bucket, bound in client.zrange(keys.due, 0, -1, withscores=True):
        score = client.zscore(keys.due_bucket(int(bucket)), member)
        if score is not None:
            return float(due_entry_time(bound, score))
    return None


@dataclass
class MotoServer:
    """A real S3-compatible HTTP server (moto_server) in its own process."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = Path(sys.executable).parent / "moto_server"
        self.process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _wait_for_port(self.port, timeout=30)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=30)
        self.process = None

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
            region_name="us-east-1",
        )

    def objects(self, bucket: str) -> dict[str, bytes]:
        client = self.client()
        out = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for entry in page.get("Contents", []):
                out[entry["Key"]] = client.get_object(Bucket=bucket, Key=entry["Key"])["Body"].read()
        return out


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}


@pytest.fixture
def moto() -> Iterator[MotoServer]:
    server = MotoServer()
    server.start()
    yield server
    server.stop()


@dataclass
class RedisClusterServers:
    """A real Redis Cluster: three primaries on loopback, created with ``redis-cli --cluster create``."""

    directory: Path
    ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def nodes(self) -> str:
        return ",".join(f"127.0.0.1:{port}" for port in self.ports)

    def start(self) -> None:
        binary = shutil.which("redis-server")
        cli = shutil.which("redis-cli")
        if binary is None or cli is None:
            raise RuntimeError("redis-server and redis-cli are not installed (make test installs them)")
        for port in self.ports:
            node_dir = self.directory / str(port)
            node_dir.mkdir(parents=True, exist_ok=True)
            self.processes.append(subprocess.Popen(
                [
                    binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir),
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    # The bus port, given: port + 10000 (the default) may be past 65535.
                    "--cluster-port", str(free_port()),
                    "--cluster-node-timeout", "5000", "--appendonly", "yes", "--save", "",
                    "--daemonize", "no", "--logfile", str(node_dir / "redis.log"),
                ],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            ))
        for port, process in zip(self.ports, self.processes):
            _wait_for_port(port, process=process, log=self.directory / str(port) / "redis.log")
        subprocess.run(
            [cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.ports),
             "--cluster-replicas", "0", "--cluster-yes"],
            check=True, capture_output=True, timeout=60,
        )
        deadline = time.monotonic() + 30
        while True:
            states = [redis.Redis(port=port).cluster("info")["cluster_state"] for port in self.ports]
            if all(state == "ok" for state in states):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"cluster not ready: {states}")
            time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            process.wait(timeout=30)
        self.processes = []


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterServers]:
    cluster = RedisClusterServers(tmp_path_factory.mktemp("cluster"))
    cluster.start()
    yield cluster
    cluster.stop()
