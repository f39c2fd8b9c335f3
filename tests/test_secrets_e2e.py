"""No secret leaves the process: a Redis password, AWS keys and a proxy password, set every way we support.

Real crawls at ``LOG_LEVEL=DEBUG`` against a redis-server that requires a
password, with an S3 store that cannot be reached (every upload fails) and,
in the second crawl, a proxy that refuses every connection (every fetch
fails); then the log, the stats dump, the report, the metrics page, the WARC
and CDXJ files, ``scrapy frontier`` output and a Scrapyd job's log served
over HTTP are searched for each secret.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.mockweb import WebSpec, free_port
from tests.conftest import ROOT, TEST_SETTINGS, _wait_for_port, crawl_command, crawl_env, run_crawl, start_mockweb
from tests.test_ops import frontier_command

pytestmark = pytest.mark.e2e

REDIS_PW = "Rp-5ecret-0a9f3c"
FILE_PW = REDIS_PW  # the same server, its password given through REDIS_PASSWORD_FILE
AWS_KEY_ID = "AKIAEXAMPLE7Q2W"
AWS_SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYsecret"
AWS_ENV_SECRET = "env-Aws-Secret-5d1e8b7c"
PROXY_PW = "Px-5ecret-77b1e2"
SECRETS = (REDIS_PW, AWS_SECRET, AWS_ENV_SECRET, PROXY_PW)


@pytest.fixture(scope="module")
def locked_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A redis-server that answers only with the password."""
    directory = tmp_path_factory.mktemp("locked-redis")
    port = free_port()
    process = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--requirepass", REDIS_PW, "--save", "",
         "--appendonly", "no", "--dir", str(directory)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_port(port, timeout=30)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=30)


def leaks(text: str | bytes) -> list[str]:
    data = text.encode("utf-8", "replace") if isinstance(text, str) else text
    return [secret for secret in SECRETS if secret.encode() in data]


def files_text(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory``, gzip members decompressed (WARC files), by name."""
    out = {}
    for path in directory.rglob("*"):
        if not path.is_file() or path.suffix in (".rdb", ".aof") or "redis" in path.parts:
            continue
        data = path.read_bytes()
        if path.name.endswith(".gz") or path.name.endswith(".gz.open"):
            with contextlib.suppress(OSError, EOFError):
                data = gzip.decompress(data)
        out[str(path)] = data
    return out


@pytest.fixture(scope="module")
def crawls(tmp_path_factory: pytest.TempPathFactory, locked_redis: int) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("secrets")
    spec = WebSpec(hosts=3, sizes="uniform:4", fanout=2, nav=1, cross=1)
    web = start_mockweb(spec, tmp / "mockweb.log")
    seeds = tmp / "seeds.txt"
    seeds.write_text("".join(web.url(host) + "\n" for host in range(spec.hosts)))
    data = tmp / "crawl-data"
    refused = free_port()  # nothing listens: the S3 store and the proxy refuse every connection
    metrics_port = free_port()
    redis_url = f"redis://:{REDIS_PW}@127.0.0.1:{locked_redis}/0"
    common = {
        "CRAWL_DATA_DIR": str(data), "LOG_LEVEL": "DEBUG", "FRONTIER_MIN_DELAY": 0.05, "FRONTIER_DELAY_FACTOR": 0,
        "WARC_STORE": "s3://bucket/warcs", "WARC_S3_ENDPOINT_URL": f"http://127.0.0.1:{refused}",
        "WARC_UPLOAD_CLOSE_TIMEOUT": 2, "CLOSESPIDER_TIMEOUT": 20,
    }
    try:
        # 1: the Redis URL with its password and the AWS keys as settings; metrics on; fetches work.
        first = run_crawl("-a", f"seeds={seeds}", settings={
            **common, "REDIS_URL": redis_url, "FRONTIER_CRAWL_ID": "secrets",
            "AWS_ACCESS_KEY_ID": AWS_KEY_ID, "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
            "METRICS_PORT": metrics_port, "METRICS_REFRESH_INTERVAL": 1,
        }, timeout=180)
        # 2: the Redis URL from the environment with the password from a file, the AWS secret from the
        # environment, and a proxy with a password that refuses every connection.
        password_file = tmp / "redis-password"
        password_file.write_text(FILE_PW + "\n")
        env = crawl_env(
            REDIS_URL=f"redis://127.0.0.1:{locked_redis}/0", AWS_ACCESS_KEY_ID=AWS_KEY_ID,
            AWS_SECRET_ACCESS_KEY=AWS_ENV_SECRET,
            http_proxy=f"http://crawler:{PROXY_PW}@127.0.0.1:{refused}",
            https_proxy=f"http://crawler:{PROXY_PW}@127.0.0.1:{refused}",
        )
        second = run_crawl("-a", f"seeds={seeds}", settings={
            **common, "FRONTIER_CRAWL_ID": "secrets-env", "REDIS_PASSWORD_FILE": str(password_file),
            "DOWNLOAD_TIMEOUT": 3, "RETRY_TIMES": 0,
        }, env=env, timeout=180)
    finally:
        web.stop()
    settings = {"REDIS_URL": redis_url, "FRONTIER_CRAWL_ID": "secrets", "LOG_LEVEL": "DEBUG",
                "CRAWL_DATA_DIR": str(data)}
    commands = [frontier_command(name, settings=settings) for name in ("stats", "hosts", "dead-letters")]
    commands.append(frontier_command("stats", settings={**settings, "FRONTIER_CRAWL_ID": "no-such-crawl"}))
    wrong = f"redis://:{REDIS_PW}x@127.0.0.1:{locked_redis}/0"
    commands.append(frontier_command("stats", settings={**settings, "REDIS_URL": wrong}))
    return {"first": first, "second": second, "commands": commands, "data": data, "metrics_port": metrics_port}


def test_the_crawls_ran(crawls: dict[str, Any]) -> None:
    first, second = crawls["first"], crawls["second"]
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stats.get("response_received_count", 0) >= 12
    assert first.stats.get("warc/upload_errors", 0) + first.stats.get("warc/upload_failures", 0) >= 0
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stats.get("response_received_count", 0) == 0, "every fetch went to the refusing proxy"
    # The secrets were used: the password-protected Redis was reached both ways.
    assert "Frontier Redis: redis://:***@127.0.0.1" in first.stderr
    assert "Frontier Redis: redis://127.0.0.1" in second.stderr


def test_no_secret_in_logs_or_stats(crawls: dict[str, Any]) -> None:
    for name in ("first", "second"):
        result = crawls[name]
        assert leaks(result.stderr) == [], name
        assert leaks(result.stdout) == [], name
        assert leaks(json.dumps(result.stats)) == [], name
    # Scrapy's own "Overridden settings" line is there, with the secrets masked.
    assert "'AWS_SECRET_ACCESS_KEY': '***'" in crawls["first"].stderr


def test_no_secret_in_reports_archives_or_indexes(crawls: dict[str, Any]) -> None:
    found = {path: leaks(data) for path, data in files_text(crawls["data"]).items()}
    assert {path: hits for path, hits in found.items() if hits} == {}
    names = " ".join(found)
    assert ".warc.gz" in names and ".cdxj" in names and "report" in names


def test_no_secret_in_frontier_command_output(crawls: dict[str, Any]) -> None:
    for result in crawls["commands"]:
        assert leaks(result.stdout + result.stderr) == [], result.args
    stats, hosts, letters, missing, wrong = crawls["commands"]
    assert stats.returncode == 0 and hosts.returncode == 0 and letters.returncode == 0
    assert missing.returncode == 2 and "redis://:***@127.0.0.1" in missing.stderr
    assert wrong.returncode == 2


def test_no_secret_on_the_metrics_page(tmp_path: Path, locked_redis: int) -> None:
    """The metrics page while a crawl runs (the first crawl's page is gone with it)."""
    spec = WebSpec(hosts=2, sizes="uniform:30", fanout=2, nav=1, cross=1, latency_ms=(20.0,))
    web = start_mockweb(spec, tmp_path / "mockweb.log")
    port = free_port()
    settings = {**TEST_SETTINGS, "REDIS_URL": f"redis://:{REDIS_PW}@127.0.0.1:{locked_redis}/0",
                "FRONTIER_CRAWL_ID": "secrets-metrics", "METRICS_PORT": port, "METRICS_REFRESH_INTERVAL": 1,
                "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "FRONTIER_MIN_DELAY": 0.3, "CLOSESPIDER_TIMEOUT": 30,
                "CRAWL_DATA_DIR": str(tmp_path / "data")}
    command = crawl_command("-a", f"urls={web.url(0)},{web.url(1)}", settings=settings)
    process = subprocess.Popen(command, cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, timeout=60)
        time.sleep(2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            page = reply.read()
    finally:
        process.terminate()
        process.wait(timeout=60)
        web.stop()
    assert b"crawler_" in page
    assert leaks(page) == []


def test_no_secret_in_a_scrapyd_job_log(tmp_path: Path, locked_redis: int, mockweb_factory: Any) -> None:
    """A job scheduled with secrets as settings (as the README once showed): its log, served over HTTP."""
    from tests.test_scrapyd_e2e import deploy, scrapyd_server

    web = mockweb_factory(WebSpec(hosts=2, sizes="uniform:3", fanout=2, nav=1, cross=0))
    with scrapyd_server(tmp_path) as scrapyd:
        deploy(scrapyd, tmp_path)
        settings = {**TEST_SETTINGS, "REDIS_URL": f"redis://:{REDIS_PW}@127.0.0.1:{locked_redis}/0",
                    "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "LOG_LEVEL": "DEBUG", "FRONTIER_MIN_DELAY": 0.05,
                    "CRAWL_DATA_DIR": str(tmp_path / "data")}
        fields = [("project", "crawler"), ("spider", "web"), ("urls", web.url(0)), ("crawl_id", "secrets-scrapyd")]
        fields += [("setting", f"{name}={value}") for name, value in settings.items()]
        job = scrapyd.post("schedule.json", fields)["jobid"]
        deadline = time.monotonic() + 180
        while job not in {j["id"] for j in scrapyd.get("listjobs.json", project="crawler")["finished"]}:
            assert time.monotonic() < deadline
            time.sleep(0.5)
        with urllib.request.urlopen(f"{scrapyd.url}logs/crawler/web/{job}.log", timeout=10) as reply:
            log = reply.read()
    assert b"'finish_reason': 'finished'" in log, log[-3000:]
    assert b"Overridden settings" in log
    assert leaks(log) == []
    assert os.environ.get("AWS_SECRET_ACCESS_KEY") != AWS_SECRET
