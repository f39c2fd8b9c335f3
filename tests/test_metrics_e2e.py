"""A fleet as an operator runs it: two workers of one crawl on one machine, each on the first free port
of a range, each writing its target for Prometheus' file-based discovery; the shipped Prometheus config,
rules and their unit tests under Debian's promtool; Debian's prometheus scraping the workers through the
discovery files; every dashboard query run through its HTTP API."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from support.mockweb import WebSpec, free_port
from tests.conftest import ROOT, RedisServer, RunningCrawl, _wait_for_port
from tests.test_deploy import dashboard_queries

DEPLOY = ROOT / "deploy" / "prometheus"


def tool(name: str) -> str:
    path = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if path is None:
        pytest.fail(f"{name} is missing: make test installs Debian's prometheus package")
    return path


def test_the_shipped_config_and_rules_pass_promtool_and_their_unit_tests() -> None:
    promtool = tool("promtool")
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", *sorted(str(p.relative_to(DEPLOY))
                 for p in (DEPLOY / "rules").glob("*.yml"))], ["test", "rules", "tests/crawler-rules-test.yml"]):
        result = subprocess.run([promtool, *args], cwd=DEPLOY, capture_output=True, text=True, timeout=120,
                                check=False)
        assert result.returncode == 0, result.stdout + result.stderr
    # The unit tests fire every alert once (and keep it quiet for other series).
    tests = (DEPLOY / "tests" / "crawler-rules-test.yml").read_text()
    alerts = re.findall(r"^\s+- alert: (\w+)", (DEPLOY / "rules" / "crawler-alerts.yml").read_text(), re.MULTILINE)
    assert alerts and all(f"alertname: {alert}" in tests for alert in alerts)


def scrape(target: str) -> dict[str, float]:
    """A worker's metrics: series (name and labels, as exposed) -> value."""
    with urllib.request.urlopen(f"http://{target}/metrics", timeout=5) as reply:
        text = reply.read().decode()
    series = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            series[name] = float(value)
    return series


def query(port: int, expr: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return dict(json.loads(reply.read()))
    except urllib.error.HTTPError as error:  # 503 while it starts; 400 for a query it refuses
        return {"status": f"http {error.code}", "body": error.read().decode(errors="replace")}


def total(series: dict[str, float], name: str) -> float:
    return sum(value for key, value in series.items() if key == name or key.startswith(name + "{"))


def test_two_workers_export_on_one_machine_and_prometheus_scrapes_the_crawl(
    mockweb_factory: Any, redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    web = mockweb_factory(WebSpec(hosts=12, sizes="uniform:6", fanout=2, nav=1, cross=1, latency_ms=(20,)))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(12)))
    config = tmp_path / "prometheus"
    shutil.copytree(DEPLOY, config)
    # The shipped config, scraping every second here instead of every 15 s.
    (config / "prometheus.yml").write_text((config / "prometheus.yml").read_text()
                                           .replace("scrape_interval: 15s", "scrape_interval: 1s"))
    targets = config / "targets"
    taken = socket.socket()  # the range's first port is taken: each worker finds a free one after it
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    first = taken.getsockname()[1]
    settings = {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": 0.05,
        "FRONTIER_DELAY_FACTOR": 0, "METRICS_PORT": f"{first}-{first + 20}", "METRICS_TARGETS_FILE": f"{targets}/",
        "METRICS_REFRESH_INTERVAL": 0.5, "FRONTIER_IDLE_BEFORE_CLOSE": 25, "CONCURRENT_REQUESTS": 4,
    }
    workers = [RunningCrawl("-a", f"seeds={seeds}", settings=settings) for _ in range(2)]
    prometheus = None
    try:
        # Both workers write their targets, each on its own port of the range (not the taken one).
        deadline = time.monotonic() + 90
        while len(list(targets.glob("crawler-*.json"))) < 2:
            assert time.monotonic() < deadline, "the workers did not both write their targets"
            time.sleep(0.2)
        documents = [json.loads(path.read_text()) for path in sorted(targets.glob("crawler-*.json"))]
        addresses = [document[0]["targets"][0] for document in documents]
        assert len(set(addresses)) == 2 and all(int(a.rsplit(":", 1)[1]) != first for a in addresses)
        assert {document[0]["labels"]["crawl"] for document in documents} == {crawl_id}
        # The crawl drains (every page of the web fetched), the workers wait FRONTIER_IDLE_BEFORE_CLOSE.
        expected = len(web.spec.reachable((h, 0) for h in range(12))) + 12  # pages and robots.txt
        deadline = time.monotonic() + 120
        while len(web.entries()) < expected:
            assert time.monotonic() < deadline, f"{len(web.entries())} of {expected} fetched"
            time.sleep(0.2)
        time.sleep(2)  # a refresh of the crawl-wide figures after the last page
        scraped = [scrape(address) for address in addresses]
        # The crawl-wide gauges come from one worker only: the fleet's sum is the crawl's figure.
        exporting = [s for s in scraped if any(k.startswith("crawler_frontier_seen_urls") for k in s)]
        assert len(exporting) == 1
        records = sum(total(s, "crawler_frontier_url_records") for s in scraped)
        seen = sum(total(s, "crawler_frontier_seen_urls") for s in scraped)
        stats = subprocess.run([*[str(x) for x in workers[0].process.args[:3]], "frontier", "stats", "--json",
                                "-s", f"REDIS_URL={redis_server.url}", "-s", f"FRONTIER_CRAWL_ID={crawl_id}"],
                               cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert stats.returncode == 0, stats.stderr[-2000:]
        figures = json.loads(stats.stdout)
        assert (records, seen) == (figures["url_records"], figures["seen"]), figures
        pages = sum(total(s, "crawler_pages_total") for s in scraped)
        assert pages == expected
        # Debian's prometheus with the shipped config finds both through the discovery files.
        port = free_port()
        prometheus = subprocess.Popen(
            [tool("prometheus"), f"--config.file={config / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _wait_for_port(port, timeout=60)
        deadline = time.monotonic() + 60
        answer: dict[str, Any] = {}
        while time.monotonic() < deadline:
            answer = query(port, f'sum(crawler_pages_total{{crawl="{crawl_id}"}})')
            result = answer.get("data", {}).get("result", [])
            if result and float(result[0]["value"][1]) == expected:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"Prometheus never saw the crawl's {expected} pages: {answer}")
        assert float(query(port, f'count(up{{job="crawler",crawl="{crawl_id}"}} == 1)')["data"]["result"][0]
                     ["value"][1]) == 2
        # Every dashboard query is PromQL Prometheus runs.
        for title, expr in dashboard_queries():
            assert query(port, expr)["status"] == "success", title
    finally:
        taken.close()
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        results = [worker.finish(timeout=120) for worker in workers]
    for result in results:
        assert result.returncode == 0, result.stderr[-3000:]
    # A worker that stops removes its target.
    assert list(targets.glob("crawler-*.json")) == []
