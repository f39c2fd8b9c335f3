"""Scrapyd end to end: a real Scrapyd, the egg built and uploaded by scrapyd-deploy, N jobs on one frontier.

The Scrapyd process runs outside the repository with no ``PYTHONPATH``: the
jobs import the crawler (and load its Lua scripts) from the deployed egg only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.mockweb import WebSpec, free_port, politeness
from tests.conftest import ROOT, TEST_SETTINGS, RedisServer, _wait_for_port
from tests.test_crawl_e2e import fetched_pages

BIN = Path(sys.executable).parent


@dataclass
class Scrapyd:
    directory: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def get(self, endpoint: str, **params: str) -> dict[str, Any]:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{endpoint}?{query}", timeout=10) as reply:
            return json.loads(reply.read())  # type: ignore[no-any-return]

    def post(self, endpoint: str, fields: list[tuple[str, str]]) -> dict[str, Any]:
        data = urllib.parse.urlencode(fields).encode()
        with urllib.request.urlopen(f"{self.url}{endpoint}", data=data, timeout=10) as reply:
            return json.loads(reply.read())  # type: ignore[no-any-return]


@contextlib.contextmanager
def scrapyd_server(tmp_path: Path) -> Iterator[Scrapyd]:
    """A real Scrapyd on a free port, its directories under ``tmp_path``."""
    directory = tmp_path / "scrapyd"
    directory.mkdir()
    port = free_port()
    (directory / "scrapyd.conf").write_text(
        "[scrapyd]\n"
        f"bind_address = 127.0.0.1\nhttp_port = {port}\npoll_interval = 0.2\nmax_proc = 4\n"
        f"eggs_dir = {directory / 'eggs'}\nlogs_dir = {directory / 'logs'}\ndbs_dir = {directory / 'dbs'}\n"
        "items_dir =\n"
    )
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("REDIS_URL", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "scrapyd"], cwd=directory, env=env,
        stdout=open(directory / "scrapyd.out", "wb"), stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_port(port, timeout=30)
        yield Scrapyd(directory, port, process)
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture
def scrapyd(tmp_path: Path) -> Iterator[Scrapyd]:
    with scrapyd_server(tmp_path) as server:
        yield server


def deploy(scrapyd: Scrapyd, tmp_path: Path) -> str:
    """Build and upload the egg with scrapyd-deploy from a copy of the project."""
    project = tmp_path / "project"
    project.mkdir()
    for name in ("setup.py", "pyproject.toml", "scrapy.cfg"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "crawler", project / "crawler", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, SCRAPYD_URL=scrapyd.url)
    env.pop("PYTHONPATH", None)
    result = subprocess.run(
        [str(BIN / "scrapyd-deploy"), "env", "-p", "crawler", "--version", "t1"],
        cwd=project, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"status": "ok"' in result.stdout, result.stdout + result.stderr
    return "t1"


def test_jobs_scheduled_on_scrapyd_share_one_frontier(
    scrapyd: Scrapyd, mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    version = deploy(scrapyd, tmp_path)
    assert scrapyd.get("listversions.json", project="crawler")["versions"] == [version]
    assert scrapyd.get("listspiders.json", project="crawler")["spiders"] == ["web"]

    spec = WebSpec(hosts=30, sizes="uniform:6", fanout=3, nav=2, cross=2, latency_ms=(10, 30))
    web = mockweb_factory(spec)
    settings = {
        **TEST_SETTINGS, "REDIS_URL": redis_server.url, "FRONTIER_MIN_DELAY": 0.1, "FRONTIER_DELAY_FACTOR": 1,
        "CONCURRENT_REQUESTS": 8, "FRONTIER_IDLE_POLL": 0.2, "CRAWL_DATA_DIR": tmp_path / "data",
    }
    seeds = ",".join(web.url(h) for h in range(0, 30, 2))
    jobs = []
    for _ in range(3):
        fields = [("project", "crawler"), ("spider", "web"), ("urls", seeds), ("crawl_id", crawl_id)]
        fields += [("setting", f"{name}={value}") for name, value in settings.items()]
        reply = scrapyd.post("schedule.json", fields)
        assert reply["status"] == "ok", reply
        jobs.append(reply["jobid"])

    deadline = time.monotonic() + 180
    while True:
        listing = scrapyd.get("listjobs.json", project="crawler")
        finished = {job["id"] for job in listing["finished"]}
        if finished >= set(jobs):
            break
        assert time.monotonic() < deadline, listing
        time.sleep(0.5)

    logs = [(scrapyd.directory / "logs" / "crawler" / "web" / f"{job}.log").read_text() for job in jobs]
    for log in logs:
        assert "'finish_reason': 'finished'" in log, log[-3000:]
        assert "Traceback" not in log, log
    # Every job worked: the frontier handed each of them pages.
    assert all("'frontier/acked': " in log for log in logs)
    fetched = fetched_pages(web)
    assert set(fetched) == spec.reachable((h, 0) for h in range(0, 30, 2))
    assert max(fetched.values()) == 1
    report = politeness(web.entries(), min_gap=0.1)
    assert (report.overlaps, report.short_gaps) == (0, 0)
