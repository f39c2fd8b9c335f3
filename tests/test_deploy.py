"""What deploy/ ships names only what exists: every metric and label a dashboard query or a rule uses is
one the crawler exports (or a recording rule of deploy/prometheus/rules/, or Prometheus' own `up`).
(promtool and a real Prometheus check the same files in tests/test_metrics_e2e.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry, generate_latest

from crawler.ops.figures import FrontierFigures, ServerFigures
from crawler.ops.metrics import CrawlCollector

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
#: Labels a query may group or match by: the metrics' own, and the targets' (file_sd: crawl, worker).
LABELS = {"crawl", "worker", "instance", "job", "status", "class", "kind", "reason", "server", "le"}
FUNCTIONS = {"sum", "max", "min", "avg", "rate", "irate", "increase", "histogram_quantile", "by", "without",
             "offset", "and", "or", "unless", "on", "ignoring", "bool", "count", "topk", "bottomk", "abs",
             "clamp_min", "clamp_max", "delta", "deriv", "predict_linear", "time", "vector", "scalar", "humanize"}


def exported_names() -> set[str]:
    """Every series name a worker exports, the crawl-wide gauges included."""
    class Stats:
        def get_stats(self) -> dict[str, object]:
            return {"downloader/response_count": 5, "downloader/response_status_count/200": 5,
                    "downloader/exception_type_count/builtins.TimeoutError": 1, "frontier/refused/memory": 2}

    collector = CrawlCollector("c", Stats())
    collector.frontier = FrontierFigures(1, 1, 1, 1, 1, 1, records=100_000, memory_used=10**6, memory_limit=10**7,
                                         memory_share=0.1, servers=(ServerFigures("r:6379", 10**6, 10**7, 100_000, 0),),
                                         growth=1.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    names = set()
    for line in generate_latest(registry).decode().splitlines():
        if line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names


def rules() -> list[dict[str, str]]:
    out = []
    for path in sorted((DEPLOY / "prometheus" / "rules").glob("*.yml")):
        for group in yaml.safe_load(path.read_text())["groups"]:
            out += group["rules"]
    return out


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads((DEPLOY / "grafana" / "crawler-fleet.json").read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def problems(expr: str, known: set[str]) -> list[str]:
    """The names an expression uses that are not known series, and the labels it groups by that none has."""
    body = re.sub(r'"[^"]*"', '""', expr)
    found = []
    for labels in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", body):
        found += [f"label {label}" for label in (part.strip() for part in labels.split(",")) if label
                  and label not in LABELS]
    body = re.sub(r"\b(?:by|without|on|ignoring)\s*\([^)]*\)", "", body)
    body = re.sub(r"\{[^}]*\}", "", body)
    body = re.sub(r"\[[^\]]*\]", "", body)
    body = re.sub(r"\b\d+(?:\.\d+)?[smhdwy]?\b", "", body)  # numbers and durations (offset 1h)
    for name in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", body):
        if name in FUNCTIONS or name in known:
            continue
        found.append(name)
    return found


def test_every_dashboard_query_and_rule_names_exported_metrics_or_recording_rules() -> None:
    recorded = {rule["record"] for rule in rules() if "record" in rule}
    known = exported_names() | recorded | {"up"}
    queries = dashboard_queries()
    assert len(queries) >= 15
    wrong = {title: bad for title, expr in queries if (bad := problems(expr, known))}
    wrong |= {rule.get("record") or rule["alert"]: bad for rule in rules() if (bad := problems(rule["expr"], known))}
    assert not wrong, wrong
    # Every recording rule is shown somewhere, and every alert has a summary.
    used = " ".join(expr for _, expr in queries) + " ".join(rule["expr"] for rule in rules())
    assert all(name in used for name in recorded), recorded
    assert all(rule["annotations"]["summary"] for rule in rules() if "alert" in rule)


def test_the_check_catches_an_unknown_metric_and_label() -> None:
    known = exported_names()
    assert problems("sum by (crawl) (rate(crawler_pages_total[5m]))", known) == []
    assert problems("sum by (host) (crawler_pages_per_minute)", known) == ["label host", "crawler_pages_per_minute"]
    # The alerts an operator needs are all there.
    alerts = {rule["alert"] for rule in rules() if "alert" in rule}
    assert alerts == {"CrawlerWorkerDown", "CrawlerPagesPerSecondFallen", "CrawlerRedisMemoryHigh",
                      "CrawlerRedisMemorySoonFull", "CrawlerDeadLettersRising", "CrawlerHostParkedLong",
                      "CrawlerRefusingUrlsForMemory"}
