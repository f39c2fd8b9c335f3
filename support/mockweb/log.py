"""The mock web's request log, read back, and politeness judged from the server's side."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class LogEntry:
    host: str
    method: str
    path: str
    start: float
    end: float
    status: int


def read_log(path: str) -> list[LogEntry]:
    entries = []
    with open(path) as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) == 6:
                entries.append(
                    LogEntry(parts[0], parts[1], parts[2], float(parts[3]), float(parts[4]), int(parts[5]))
                )
    return entries


@dataclass
class PolitenessReport:
    overlaps: int
    short_gaps: int
    requests: int

    @property
    def violations(self) -> int:
        return self.overlaps + self.short_gaps


def politeness(entries: list[LogEntry], min_gap: float, tolerance: float = 0.002) -> PolitenessReport:
    """Count overlapping requests to one host and gaps shorter than ``min_gap``."""
    by_host: dict[str, list[LogEntry]] = {}
    for entry in entries:
        by_host.setdefault(entry.host, []).append(entry)
    overlaps = short = 0
    for host_entries in by_host.values():
        host_entries.sort(key=lambda e: e.start)
        for before, after in itertools.pairwise(host_entries):
            if after.start < before.end:
                overlaps += 1
            elif after.start - before.end < min_gap - tolerance:
                short += 1
    return PolitenessReport(overlaps, short, len(entries))


@dataclass
class DelayAudit:
    overlaps: int = 0
    short_gaps: int = 0
    checked: int = 0

    @property
    def violations(self) -> int:
        return self.overlaps + self.short_gaps


def delay_audit(entries: list[LogEntry], min_delay: float, factor: float,
                floor: Callable[[str], float] = lambda host: 0.0, tolerance: float = 0.002) -> DelayAudit:
    """Politeness from the server's log against the crawler's delay policy.

    One request at a time per host, and start-to-start gaps of at least the
    delay in force: ``max(min_delay, floor(host), factor x the previous
    answer's time on the server)`` (a lower bound of the crawler's delay: the
    server's own answer time stands for the fetch time the crawler measured,
    which is never shorter). ``floor`` gives a host's ``Crawl-delay``.
    """
    by_host: dict[str, list[LogEntry]] = {}
    for entry in entries:
        by_host.setdefault(entry.host, []).append(entry)
    result = DelayAudit()
    for host, host_entries in by_host.items():
        host_entries.sort(key=lambda e: e.start)
        lowest = floor(host)
        for before, after in itertools.pairwise(host_entries):
            result.checked += 1
            if after.start < before.end - tolerance:
                result.overlaps += 1
                continue
            delay = max(min_delay, lowest, min(factor * (before.end - before.start), 300.0))
            if after.start - before.start < delay - tolerance:
                result.short_gaps += 1
    return result
