"""docs/fleet.md, run as written: every shell block of the page, in order, on loopback addresses: three
"worker machines" (a directory and a Scrapyd port each) with four crawl jobs each, Redis under Sentinel,
Debian's prometheus on the "monitoring machine" with the shipped config. Blocks that say ``# on: each
worker machine`` run once per machine, ``# on: every machine`` in every machine's directory; the page's
``fleet.env`` is then pointed at loopback (lines appended to it)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import psutil

from support.mockweb import WebSpec, free_port, politeness
from tests.conftest import ROOT, _wait_for_port
from tests.test_addon_e2e import copy_tracked
from tests.test_sentinel_e2e import SentinelSet, sentinel_set  # noqa: F401 - the fixture

PAGE = ROOT / "docs" / "fleet.md"
JOBS = 4


def blocks() -> list[tuple[str, str]]:
    """The page's shell blocks, in order: (where it runs: its "# on:" line, the script)."""
    found = []
    for code in re.findall(r"```sh\n(.*?)```", PAGE.read_text(), re.DOTALL):
        first = code.split("\n", 1)[0]
        assert first.startswith("# on: "), f"a block of {PAGE.name} does not say where it runs: {first!r}"
        found.append((first[len("# on: "):], code))
    return found


def run(script: str, cwd: Path, env: dict[str, str]) -> str:
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=600, check=False)
    assert result.returncode == 0, f"in {cwd}:\n{script}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return json.loads(reply.read())


def test_the_fleet_page_runs_as_written(
    sentinel_set: SentinelSet, mockweb_factory: Any, tmp_path: Path  # noqa: F811
) -> None:
    web = mockweb_factory(WebSpec(hosts=24, sizes="uniform:8", fanout=2, nav=1, cross=1, latency_ms=(30,)))
    build = copy_tracked(tmp_path / "build")
    (build / "deploy" / "prometheus" / "prometheus.yml").write_text(
        (build / "deploy" / "prometheus" / "prometheus.yml").read_text().replace("scrape_interval: 15s",
                                                                             "scrape_interval: 1s"))
    (build / "seeds.txt").write_text("".join(web.url(h) + "\n" for h in range(24)))
    machines = [tmp_path / f"w{i}" for i in range(1, 4)]
    ports = [free_port() for _ in machines]
    prometheus = f"127.0.0.1:{free_port()}"
    loopback = {
        "WORKERS": " ".join(f"127.0.0.1:{port}" for port in ports), "PROMETHEUS": prometheus,
        "REDIS_URL": sentinel_set.url, "TARGETS": str(tmp_path / "targets"), "DIST": str(tmp_path / "dist"),
        "VENV": str(tmp_path / "venv"), "USER_AGENT": "fleetbot/1.0 (+https://example.org/fleetbot)",
        "EXTRA_SETTINGS": " ".join(f"-d setting={name}={value}" for name, value in {
            "ALLOW_PRIVATE_NETWORKS": True, "FRONTIER_MIN_DELAY": 0.2, "FRONTIER_DELAY_FACTOR": 0,
            "CRAWL_DATA_DIR": tmp_path / "data", "METRICS_REFRESH_INTERVAL": 1, "CONCURRENT_REQUESTS": 4,
            "FRONTIER_IDLE_BEFORE_CLOSE": 600,
            # (the three "machines" share one address: their twelve jobs need a wider range than one's four)
            "METRICS_PORT": "9410-9449"}.items()),
    }
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REDIS_URL", "VIRTUAL_ENV")}
    env["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"  # python3 -m venv, curl, promtool...
    env["MAKEFLAGS"] = f"VENV={ROOT / '.venv'}"  # the build machine's make uses this repository's venv
    try:
        for where, script in blocks():
            if where.startswith("every machine"):
                for place in (build, *machines):
                    place.mkdir(exist_ok=True)
                    run(script, place, env)
                    with (place / "fleet.env").open("a") as handle:
                        handle.write("".join(f"{name}={json.dumps(value)}\n" for name, value in loopback.items()))
            elif where.startswith("each worker machine"):
                for place, port in zip(machines, ports):
                    run(script, place, {**env, "SCRAPYD_BIND": "127.0.0.1", "SCRAPYD_PORT": str(port)})
                    _wait_for_port(port, timeout=60)
            elif where.startswith("the monitoring machine"):
                run(script, build, {**env, "METRICS_HOST": "127.0.0.1"})
            elif where.startswith("anywhere that reaches Redis and Prometheus"):
                # (the watch block: once every worker is scraped)
                deadline = time.monotonic() + 180
                up = 0.0
                while up < len(machines) * JOBS:
                    assert time.monotonic() < deadline, f"Prometheus sees {up} workers up"
                    time.sleep(1)
                    with contextlib.suppress(OSError, KeyError, IndexError, ValueError):
                        query = urllib.parse.urlencode({"query": 'count(up{job="crawler"} == 1)'})
                        up = float(get(f"http://{prometheus}/api/v1/query?{query}")["data"]["result"][0]["value"][1])
                out = run(script, build, env)
                assert '"status":"success"' in out.replace(" ", "") and "queued URLs" in out
            elif where.startswith("anywhere that reaches Redis"):
                # (the drain: once the crawl has pages to show)
                run(script, build, env)
            else:
                run(script, build, {**env, "METRICS_HOST": "127.0.0.1"})
        # Every job drained and finished normally; the crawl fetched its web once, politely.
        deadline = time.monotonic() + 300
        while True:
            listings = [get(f"http://127.0.0.1:{port}/listjobs.json?project=crawler") for port in ports]
            if all(not listing["running"] and not listing["pending"] and len(listing["finished"]) == JOBS
                   for listing in listings):
                break
            assert time.monotonic() < deadline, listings
            time.sleep(1)
        logs = list((tmp_path).glob("w*/scrapyd/logs/crawler/web/*.log"))
        assert len(logs) == len(machines) * JOBS
        for log in logs:
            text = log.read_text()
            assert "'finish_reason': 'finished'" in text and "Traceback" not in text, text[-3000:]
        assert list(Path(loopback["TARGETS"]).glob("*.json")) == [], "every worker removed its target"
        report = politeness(web.entries(), min_gap=0.2)
        assert report.overlaps == 0 and report.short_gaps == 0, report
    finally:
        # Whatever the page started here: by its arguments, or by where it runs (the page starts
        # prometheus with paths relative to the build directory).
        for process in psutil.process_iter(["cmdline", "cwd"]):
            with contextlib.suppress(psutil.Error):
                if any(str(tmp_path) in part for part in process.info["cmdline"] or []) \
                        or str(process.info["cwd"] or "").startswith(str(tmp_path)):
                    process.kill()
