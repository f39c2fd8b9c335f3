"""The crawl report: one self-contained HTML file (inline SVG, inline CSS, no script, no link).

Plots: pages/s over time, frontier size over time, duplicate rate over time,
status codes, fetch latency distribution, top hosts; the key totals; and the
hosts to look at (the most errors, the longest queues) with the answers of
``scrapy frontier host`` (:mod:`crawler.ops.lookup`): their state and why,
their delay and why, their robots.txt. Data: the crawl's shared totals and
timeline (:mod:`crawler.ops.timeline`) and the frontier itself
(:mod:`crawler.ops.view`), so the report covers every worker, whichever
worker (or ``scrapy frontier report``) writes it.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crawler.crawlstate.shards import ShardRouter
from crawler.ops.figures import FrontierFigures, latency_buckets
from crawler.ops.hostanswer import host_answer
from crawler.ops.lookup import Lookup
from crawler.ops.timeline import Sample, Timeline
from crawler.ops.view import HostOrder, HostRow, frontier_figures, longest_queues, top_hosts
from crawler.report.svg import bar_chart, line_chart

if TYPE_CHECKING:
    from crawler.redisconn.link import AnyRedis

#: Points per time series, at most (samples are bucketed).
MAX_POINTS = 120
#: Hosts answered in full: this many with the most errors, and this many with the longest queues.
WATCHED_HOSTS = 5


@dataclass(frozen=True)
class ReportData:
    crawl_id: str
    generated: float
    totals: dict[str, float]
    samples: list[Sample]
    frontier: FrontierFigures
    hosts: list[HostRow]
    #: ``scrapy frontier host`` answers of the hosts to look at, each with why it is listed.
    watched: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass(frozen=True)
class Series:
    minutes: list[float]
    pages_per_second: list[float]
    queued: list[float]
    in_flight: list[float]
    duplicate_rate: list[float]


def bucket(samples: Sequence[Sample], max_points: int = MAX_POINTS) -> Series:
    """Time series from every worker's samples, in at most ``max_points`` buckets."""
    if not samples:
        return Series([], [], [], [], [])
    ordered = sorted(samples, key=lambda s: s.time)
    start, end = ordered[0].time, ordered[-1].time
    # A whole number of progress intervals per bucket (the interval: the
    # median gap between a worker's consecutive samples), so that every
    # bucket holds the same number of samples of each worker.
    by_worker: dict[str, list[float]] = {}
    for sample in ordered:
        by_worker.setdefault(sample.worker, []).append(sample.time)
    gaps = sorted(b - a for times in by_worker.values() for a, b in itertools.pairwise(times) if b > a)
    interval = gaps[len(gaps) // 2] if gaps else 1.0
    width = interval * max(1, math.ceil((end - start) / max_points / interval))
    buckets: dict[int, list[Sample]] = {}
    for sample in ordered:
        buckets.setdefault(int((sample.time - start) / width), []).append(sample)
    series = Series([], [], [], [], [])
    for index in sorted(buckets):
        group = buckets[index]
        pages = sum(s.pages for s in group)
        last = group[-1]
        series.minutes.append(index * width / 60)
        series.pages_per_second.append(pages / width)
        series.queued.append(last.queued)
        series.in_flight.append(last.leased)
        series.duplicate_rate.append(sum(s.duplicates for s in group) / pages if pages else 0.0)
    return series


def _table(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return f"<table>{body}</table>"


def _watched_table(watched: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The hosts to look at: state and why, delay and why, robots.txt, counts, the last dead letter."""
    if not watched:
        return "<p>No host with errors or a queue.</p>"
    rows = []
    for listed, answer in watched:
        robots = answer.get("robots") or {}
        robots_text = (f"{robots['state']}, HTTP {robots.get('status')}" + (f": {robots['error']}"
                       if robots.get("error") else "")) if robots.get("state") else "not fetched yet"
        letters = answer.get("dead_letters") or []
        last = f"{letters[0]['error']} {letters[0]['message']}".strip() if letters else "-"
        cells = [
            answer["host"], listed, f"{answer['status']}: {answer['why']}",
            answer["politeness"]["delay_reason"], robots_text, f"{answer['queued']['total']:,}",
            f"{answer['pages']:,}", f"{answer['errors']:,}", last[:160],
        ]
        rows.append("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{name}</th>" for name in ("host", "listed for", "state", "delay", "robots.txt", "queued",
                                                    "pages", "errors", "last dead letter"))
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def render(data: ReportData) -> str:
    totals = data.totals
    pages = int(totals.get("pages", 0))
    series = bucket(data.samples)
    span = (max(s.time for s in data.samples) - min(s.time for s in data.samples)) if data.samples else 0.0
    exact, near = int(totals.get("dedup:exact", 0)), int(totals.get("dedup:near", 0))
    errors = sorted(((k[6:], int(v)) for k, v in totals.items() if k.startswith("error:") and v),
                    key=lambda kv: -kv[1])
    workers = sorted({s.worker for s in data.samples})
    key_figures = [
        ("Crawl", data.crawl_id),
        ("Report written", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(data.generated))),
        ("Pages fetched", f"{pages:,}"),
        ("Bytes received", f"{int(totals.get('bytes', 0)):,}"),
        ("Time covered by the timeline", f"{span / 60:.1f} min"),
        ("Average pages/s", f"{pages / span:.1f}" if span > 0 else "-"),
        ("Workers seen", f"{len(workers)}"),
        ("URLs discovered (seen set)", f"{data.frontier.seen:,}"),
        ("URLs queued now", f"{data.frontier.queued:,}"),
        ("Revisits scheduled", f"{data.frontier.due:,}"),
        ("Exact duplicates", f"{exact:,}"),
        ("Near duplicates", f"{near:,}"),
        ("Duplicate rate", f"{(exact + near) / pages:.1%}" if pages else "-"),
        ("robots.txt drops", f"{int(totals.get('robots:disallowed', 0)):,}"),
        ("Dead letters", f"{int(totals.get('dead_letters', 0)):,}"),
        ("Errors", ", ".join(f"{name} {count:,}" for name, count in errors) or "none"),
    ]
    statuses = sorted(((k[7:], v) for k, v in totals.items() if k.startswith("status:")), key=lambda kv: kv[0])
    latency = [(f"≤{bound} s" if bound != "+Inf" else "more", float(n)) for bound, n in latency_buckets(totals)]
    host_rows = "".join(
        f"<tr><td>{escape(h.host)}</td><td>{h.pages:,}</td><td>{h.queued:,}</td>"
        f"<td>{h.error_rate:.1%}</td><td>{h.near_duplicate_rate:.1%}</td>"
        f"<td>{'-' if h.delay is None else f'{h.delay:g} s'}</td></tr>"
        for h in data.hosts
    )
    charts = [
        ("Pages per second", line_chart("Pages per second", series.minutes,
                                        [("pages/s, all workers", series.pages_per_second)])),
        ("Frontier size", line_chart("Frontier size", series.minutes,
                                     [("queued URLs", series.queued), ("in flight", series.in_flight)])),
        ("Duplicate rate", line_chart("Duplicate rate", series.minutes,
                                      [("duplicates / pages", series.duplicate_rate)])),
        ("Status codes", bar_chart("Status codes", [(code, value) for code, value in statuses])),
        ("Fetch latency (time to headers)", bar_chart("Fetch latency", latency)),
        ("Top hosts by pages", bar_chart("Top hosts", [(h.host, float(h.pages)) for h in data.hosts[:12]])),
    ]
    sections = "".join(f"<section><h2>{escape(title)}</h2>{svg}</section>" for title, svg in charts)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>Crawl report: {escape(data.crawl_id)}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; background: #fafafa; }}
h1 {{ font-size: 22px; }} h2 {{ font-size: 16px; margin: 8px 0; }}
section {{ display: inline-block; vertical-align: top; margin: 8px; padding: 8px; background: #fff;
           border: 1px solid #ddd; }}
table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ text-align: left; padding: 3px 10px; border-bottom: 1px solid #eee; }}
</style></head>
<body>
<h1>Crawl report: {escape(data.crawl_id)}</h1>
<section><h2>Key figures</h2>{_table(key_figures)}</section>
{sections}
<section><h2>Top hosts</h2><table><tr><th>host</th><th>pages</th><th>queued</th><th>errors</th>
<th>near duplicates</th><th>delay floor</th></tr>{host_rows}</table></section>
<section><h2>Hosts to look at (the most errors, the longest queues)</h2>{_watched_table(data.watched)}</section>
</body></html>
"""


async def gather(timeline: Timeline, client: AnyRedis, router: ShardRouter, crawl_id: str,
                 lookup: Lookup | None = None, top: int = 20) -> ReportData:
    hosts = await top_hosts(client, router, top)
    watched: list[tuple[str, dict[str, Any]]] = []
    if lookup is not None:
        listed: dict[str, list[str]] = {}
        for row in await top_hosts(client, router, WATCHED_HOSTS, HostOrder.ERRORS):
            listed.setdefault(row.host, []).append(f"{row.errors:,} errors")
        for host, queued in await longest_queues(client, router, WATCHED_HOSTS, lookup.config.levels):
            listed.setdefault(host, []).append(f"{queued:,} queued")
        for host, why in listed.items():
            watched.append((", ".join(why), await host_answer(client, lookup, host)))
    return ReportData(
        crawl_id, time.time(), await timeline.totals(), await timeline.samples(),
        await frontier_figures(client, router), hosts, watched,
    )


async def write_report(timeline: Timeline, client: AnyRedis, router: ShardRouter, crawl_id: str,
                       path: Path, lookup: Lookup | None = None) -> Path:
    """Gather the crawl's data from Redis and write the report to ``path`` (atomically); with ``lookup``,
    the hosts to look at are answered in full."""
    html = render(await gather(timeline, client, router, crawl_id, lookup))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(html, encoding="utf-8")
    partial.replace(path)
    return path
