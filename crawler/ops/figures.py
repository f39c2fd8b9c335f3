"""The figures of a crawl's progress, from a worker's stats and the shared frontier (pure).

:func:`totals_from_stats` turns Scrapy stats into the counters the crawl
shares (pages, bytes, status codes, latency buckets, errors by class,
duplicates, robots.txt drops); :func:`delta` gives what changed since the
last look; :func:`progress_line` formats the log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from crawler.frontier import FrontierCounts
from crawler.middlewares.stats import LATENCY_BOUNDS

STATUS_PREFIX = "downloader/response_status_count/"
EXCEPTION_PREFIX = "downloader/exception_type_count/"
LATENCY_PREFIX = "downloader/latency_le/"
ROBOTS_STATUS_PREFIX = "robots/status/"

#: Exceptions that end a request on purpose (a URL sent back to the frontier,
#: a URL refused by a rule): counted elsewhere, not errors.
NOT_ERRORS = frozenset({"Rescheduled", "IgnoreRequest"})

#: Shared counter name <- stats key, for the plain ones.
_PLAIN = {
    "pages": "downloader/response_count",
    "bytes": "downloader/response_bytes",
    "latency_sum": "downloader/latency_sum",
    "dedup:exact": "dedup/exact",
    "dedup:near": "dedup/near",
    "robots:disallowed": "robots/disallowed",
    "dead_letters": "frontier/dead_lettered",
    "enqueued": "frontier/enqueued",
}


def totals_from_stats(stats: Mapping[str, object]) -> dict[str, float]:
    """The shared counters in a worker's stats: pages, bytes, ``status:<code>``,
    ``latency:<bound>``, ``error:<class>`` (HTTP 4xx/5xx of pages, not of robots.txt, and exception
    classes), duplicates..."""
    out: dict[str, float] = {}
    for name, key in _PLAIN.items():
        value = stats.get(key)
        if isinstance(value, int | float):
            out[name] = value
    for key, value in stats.items():
        if not isinstance(value, int | float):
            continue
        if key.startswith(STATUS_PREFIX):
            status = key[len(STATUS_PREFIX):]
            out[f"status:{status}"] = value
            if status[:1] in ("4", "5"):
                # robots.txt answers (a 404 is the usual "no rules") are not page errors.
                robots = stats.get(f"{ROBOTS_STATUS_PREFIX}{status}")
                value -= robots if isinstance(robots, int | float) else 0
                if value:
                    name = f"error:http_{status[0]}xx"
                    out[name] = out.get(name, 0) + value
        elif key.startswith(EXCEPTION_PREFIX):
            short = key[len(EXCEPTION_PREFIX):].rsplit(".", 1)[-1]
            if short in NOT_ERRORS:
                continue
            name = f"error:{short}"
            out[name] = out.get(name, 0) + value
        elif key.startswith(LATENCY_PREFIX):
            out[f"latency:{key[len(LATENCY_PREFIX):]}"] = value
    return out


def delta(now: Mapping[str, float], before: Mapping[str, float]) -> dict[str, float]:
    """What grew since ``before`` (counters only grow; zero changes are left out)."""
    return {key: value - before.get(key, 0) for key, value in now.items() if value != before.get(key, 0)}


#: URL records before which the time to the memory limit is not told: at the start of a crawl its
#: queues and hosts dwarf its records, and bytes per record say nothing yet of what a page costs.
MIN_RECORDS_FOR_TIME = 10_000


@dataclass(frozen=True)
class ServerFigures:
    """One server (one cluster primary) holding some of the crawl's shards."""

    server: str
    used: int
    #: REDIS_MEMORY_LIMIT or the server's maxmemory (0: none).
    limit: int
    #: URL records in its shards, and the bytes its shards hold whatever the crawl's size (Bloom
    #: filters, in-link sketches).
    records: int
    fixed: int

    @property
    def share(self) -> float:
        return self.used / self.limit if self.limit else 0.0

    def seconds_to_limit(self, rate: float, records: int) -> float | None:
        """Seconds until this server reaches its limit at ``rate`` pages per second over the whole
        crawl (of ``records`` so far), if its shards keep their share of the pages and their bytes
        per page (fixed costs apart); None without a limit or a rate, or before MIN_RECORDS_FOR_TIME
        records."""
        growing = self.used - self.fixed
        if not self.limit or rate <= 0 or records < MIN_RECORDS_FOR_TIME or growing <= 0:
            return None
        return max(0.0, (self.limit - self.used) / (growing / records * rate))

    def as_dict(self, rate: float, records: int) -> dict[str, object]:
        seconds = self.seconds_to_limit(rate, records)
        return {"server": self.server, "used": self.used, "limit": self.limit or None,
                "share": round(self.share, 4) if self.limit else None, "records": self.records,
                "bytes_per_page": round((self.used - self.fixed) / self.records, 1) if self.records else None,
                "hours_to_limit": round(seconds / 3600, 2) if seconds is not None else None}


@dataclass(frozen=True)
class FrontierFigures(FrontierCounts):
    """The shared frontier: its counts summed over its shards, and the memory of the Redis holding it."""

    #: Redis memory of the servers holding the crawl (summed over a cluster's primaries), their limits
    #: (0: none), and the fullest server's share of its limit.
    memory_used: int = 0
    memory_limit: int = 0
    memory_share: float = 0.0
    #: Each server's figures (one for a single Redis; one per primary of a cluster).
    servers: tuple[ServerFigures, ...] = ()
    #: Seconds until the parked host that waits longest may be contacted again (of a sample).
    longest_park: float = 0.0
    #: When they were read (Unix time), and URL records added per second since the look before
    #: (every worker's: the rate the crawl's memory grows with; 0 on a first look).
    read_at: float = 0.0
    growth: float = 0.0

    @property
    def bytes_per_record(self) -> float:
        """Redis bytes per URL record: all of the crawl's state (fixed costs included) over its pages."""
        return self.memory_used / self.records if self.records else 0.0

    def hours_to_limit(self, rate: float | None = None) -> float | None:
        """Hours until the first server reaches its limit at ``rate`` new URL records per second (default:
        the growth seen since the look before); None when it cannot be told (no limit, no growth)."""
        rate = self.growth if rate is None else rate
        times = [t for t in (server.seconds_to_limit(rate, self.records) for server in self.servers) if t is not None]
        return min(times) / 3600 if times else None

    def memory_text(self) -> str:
        """``Redis 512.0 MiB of 12.0 GiB (4%), 2,345 B/page, 31.5 h to the limit at this rate``."""
        text = f"Redis {_size(self.memory_used)}"
        if self.memory_limit:
            text += f" of {_size(self.memory_limit)} ({self.memory_share:.0%})"
        if self.records:
            text += f", {self.bytes_per_record:,.0f} B/page"
        hours = self.hours_to_limit()
        if hours is not None:
            text += f", {hours:,.1f} h to the limit at this rate"
        return text


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


@dataclass(frozen=True)
class Progress:
    """One look at a worker: its counters now and then, and the shared frontier."""

    totals: Mapping[str, float]
    recent: Mapping[str, float]
    interval: float
    elapsed: float
    frontier: FrontierFigures | None
    #: Why this worker admits fewer new URLs ("" when it admits every one).
    admission: str = ""

    @property
    def pages(self) -> int:
        return int(self.totals.get("pages", 0))

    @property
    def recent_rate(self) -> float:
        return self.recent.get("pages", 0) / self.interval if self.interval > 0 else 0.0

    @property
    def overall_rate(self) -> float:
        return self.pages / self.elapsed if self.elapsed > 0 else 0.0

    def errors(self) -> dict[str, int]:
        return {key[6:]: int(value) for key, value in self.totals.items() if key.startswith("error:") and value}


def progress_line(progress: Progress) -> str:
    """``Progress: 12,345 pages (41.2/s now, 38.0/s overall) | frontier ... | errors ... | ...``"""
    parts = [
        f"{progress.pages:,} pages ({progress.recent_rate:.1f}/s now, {progress.overall_rate:.1f}/s overall)"
    ]
    frontier = progress.frontier
    if frontier is not None:
        parts.append(
            f"queued {frontier.queued:,}, in flight {frontier.leased:,}, hosts {frontier.awake_hosts:,} active "
            f"/ {frontier.ready_hosts:,} ready / {frontier.sleeping:,} sleeping ({frontier.parked:,} parked), "
            f"dead letters {frontier.dead_letters:,}, due {frontier.due:,}"
        )
        parts.append(frontier.memory_text())
    if progress.admission:
        parts.append(f"admitting less: {progress.admission}")
    errors = progress.errors()
    parts.append(
        "errors " + (", ".join(f"{name} {count:,}" for name, count in sorted(errors.items())) if errors else "none")
    )
    totals = progress.totals
    parts.append(
        f"duplicates {int(totals.get('dedup:exact', 0)):,} exact / {int(totals.get('dedup:near', 0)):,} near"
    )
    parts.append(f"robots.txt drops {int(totals.get('robots:disallowed', 0)):,}")
    return "Progress: " + " | ".join(parts)


def latency_buckets(totals: Mapping[str, float]) -> list[tuple[str, int]]:
    """(upper bound, count) per latency bucket, in order, from shared counters."""
    names = [f"{bound:g}" for bound in LATENCY_BOUNDS] + ["+Inf"]
    return [(name, int(totals.get(f"latency:{name}", 0))) for name in names]
