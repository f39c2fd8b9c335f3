"""Seed lists of any size into the frontier: streamed, in bounded batches (``scrapy frontier seed``).

A seed list of millions of URLs (a domain list, a previous crawl's URLs) is
read a line at a time and sent in batches of :data:`BATCH` URLs: the
crawl's own intake (the same filters, scoring, routing as a worker's) turns
each batch into enqueue entries, and each shard's entries go to Redis in
script calls of ``FRONTIER_ENQUEUE_BATCH`` URLs at most, so no call runs
long and no other worker's step waits long behind it. Memory holds one batch.

Seeding is idempotent: the crawl's seen set knows every URL it has taken,
so running the same command again after an interruption adds only the URLs
the first run did not reach (the others are counted as known). A line that
is not a URL, or a URL a filter or a budget refuses, is counted as dropped,
by reason; the report ends with added / known / dropped.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from crawler.frontier.redisfrontier import Step

if TYPE_CHECKING:
    from crawler.frontier.intake import Intake
    from crawler.frontier.redisfrontier import RedisFrontier

#: URLs read, filtered and sent per batch (what memory holds at once).
BATCH = 10_000


@dataclass
class SeedReport:
    """What a seeding did so far."""

    #: Lines read (blank and ``#`` lines included) and bytes of the files read.
    lines: int = 0
    bytes_read: int = 0
    added: int = 0
    known: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    #: Seconds of the longest batch sent to one shard (its script calls, pipelined).
    longest_send: float = 0.0
    started: float = field(default_factory=time.monotonic)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started

    def summary(self, crawl_id: str) -> str:
        reasons = ", ".join(f"{count:,} {reason}" for reason, count in sorted(self.dropped.items()))
        return (f"crawl {crawl_id!r}: {self.added:,} seeds added, {self.known:,} already known, "
                f"{sum(self.dropped.values()):,} dropped{f' ({reasons})' if reasons else ''}; "
                f"{self.lines:,} lines in {self.seconds:.1f} s")


def seed_lines(sources: Iterable[str], report: SeedReport) -> Iterator[str]:
    """The URLs of ``sources`` (files, one URL per line, ``#`` comments; or URLs and comma lists), read
    a line at a time; lines and bytes counted in ``report``."""
    for source in sources:
        path = Path(source)
        if path.is_file():
            with path.open("rb") as handle:
                for raw in handle:
                    report.lines += 1
                    report.bytes_read += len(raw)
                    line = raw.decode("utf-8", "replace").strip()
                    if line and not line.startswith("#"):
                        yield line
        else:
            for url in source.replace(",", " ").split():
                report.lines += 1
                yield url


async def seed(intake: Intake, counts: Mapping[str, int], frontiers: list[RedisFrontier], urls: Iterable[str],
               report: SeedReport, progress: Callable[[SeedReport], None] | None = None,
               batch: int = BATCH) -> SeedReport:
    """Send ``urls`` through ``intake`` (whose counters are ``counts``) into ``frontiers`` in batches of
    ``batch``; ``report`` counts, ``progress`` hears after each batch."""
    pending: list[str] = []
    for url in urls:
        pending.append(url)
        if len(pending) >= batch:
            await _send(intake, counts, frontiers, pending, report)
            pending = []
            if progress is not None:
                progress(report)
    if pending:
        await _send(intake, counts, frontiers, pending, report)
    if progress is not None:
        progress(report)
    return report


def _dropped(counts: Mapping[str, int]) -> Counter[str]:
    return Counter({key.rsplit("/", 1)[-1]: value for key, value in counts.items() if key.startswith("urls/dropped/")})


async def _send(intake: Intake, counts: Mapping[str, int], frontiers: list[RedisFrontier], urls: list[str],
                report: SeedReport) -> None:
    before = _dropped(counts)
    intake.urls(urls, depth=0)
    report.dropped.update(_dropped(counts) - before)
    by_shard, _ = intake.take()
    await intake.resolve_groups(by_shard)
    for shard, entries in by_shard.items():
        started = time.monotonic()
        result = await frontiers[shard].step(Step(enqueues=entries))
        report.longest_send = max(report.longest_send, time.monotonic() - started)
        report.added += result.added
        report.known += result.duplicates
        for reason, count in (("host_budget", result.over_host_budget), ("domain_budget", result.over_domain_budget),
                              ("memory", result.refused_memory)):
            if count:
                report.dropped[reason] += count


def terminal_progress(stream: TextIO, every: float = 1.0) -> Callable[[SeedReport], None] | None:
    """A progress line rewritten in place at most every ``every`` s, if ``stream`` is a terminal."""
    if not stream.isatty():
        return None
    last = [0.0]

    def show(report: SeedReport) -> None:
        now = time.monotonic()
        if now - last[0] < every:
            return
        last[0] = now
        rate = report.lines / report.seconds if report.seconds else 0.0
        stream.write(f"\r{report.lines:,} lines, {report.bytes_read / 2**20:,.1f} MiB: {report.added:,} added, "
                     f"{report.known:,} known, {sum(report.dropped.values()):,} dropped ({rate:,.0f} lines/s) ")
        stream.flush()

    return show
