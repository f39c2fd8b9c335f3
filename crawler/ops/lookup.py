"""What happened to one URL, to one host: the operator's two questions, read from a crawl's Redis.

This module holds what both answers share (:class:`Lookup`, the statuses, the front-queue scan);
:mod:`crawler.ops.urlanswer` answers for a URL, :mod:`crawler.ops.hostanswer` for a host.

The answers read (never write) the shard that
holds the URL or host, a bounded amount each: the back queues of one host (at
most ``scan_limit`` entries per level), the leases in flight, the dead
letters (an ``HSCAN`` walk, at most ``scan_limit``), the CDXJ indexes of the
crawl's WARC files (local or S3). Their answers are plain data (JSON-ready
dicts): ``scrapy frontier url|host`` prints them as text or, with
``--json``, as they are. The schema is in docs/operating.md.

What the frontier does not keep is said, not guessed: a lease's worker is
known once the worker has renewed it (workers name the leases they hold at
each renewal), and a URL record keeps the last fetch only (with the counts of
all of them). A URL that was refused is not stored
either: the rule that refuses it is found by applying the crawl's rules now
(its filters, its host's robots.txt record, its budgets, the memory
admission).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.settings import BaseSettings

from crawler import defaults
from crawler.frontier import (
    MAX_LEVELS,
    DeadLetter,
    FrontierConfig,
)
from crawler.robots.policy import (
    RobotsConfig,
)

if TYPE_CHECKING:
    from crawler.crawlstate.keys import ShardKeys
    from crawler.crawlstate.shards import ShardRouter
    from crawler.redisconn.link import AnyRedis

#: Entries read at most per back-queue level, dead letters at most.
SCAN_LIMIT = 10_000


class UrlStatus(StrEnum):
    #: Not in the seen set: the crawl never admitted it.
    NOT_SEEN = "not seen"
    #: The crawl's rules refuse it now (``refused_by`` says which).
    REFUSED = "refused"
    QUEUED = "queued"
    LEASED = "leased"
    FETCHED = "fetched"
    FAILED = "failed"
    DEAD_LETTER = "dead letter"
    #: In the seen set but in no queue, lease or record read here: a worker's hands, or past the scan limit.
    SEEN = "seen"


class HostStatus(StrEnum):
    #: In flight: a request of it is leased to a worker.
    ACTIVE = "active"
    #: Has URLs queued and may be contacted at ``next_allowed``.
    READY = "ready"
    SLEEPING = "sleeping"
    PARKED = "parked"
    #: Its URLs wait in a front queue: it gets a back queue when one comes free.
    WAITING = "waiting"
    #: Has no URL queued (``next_allowed`` still holds for a new one).
    IDLE = "idle"
    #: Its robots.txt failed ``ROBOTS_MAX_FAILURES`` times: its URLs went to the dead letters.
    DEAD = "dead"
    #: Never seen by this crawl.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Lookup:
    """What the answers need besides Redis: the crawl's settings and where its data lives."""

    settings: BaseSettings
    router: ShardRouter
    config: FrontierConfig
    job_dir: Path
    #: ``REDIS_MEMORY_LIMIT`` (bytes, 0: the server's maxmemory) and ``FRONTIER_PAGE_BYTES``: the memory admission.
    memory_limit: int = 0
    page_bytes: int = defaults.FRONTIER_PAGE_BYTES
    scan_limit: int = SCAN_LIMIT

    @property
    def token(self) -> str:
        return RobotsConfig.from_settings(self.settings).user_agent_token


def iso(epoch: float | None) -> str | None:
    if not epoch:
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))




def raw_bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def letter_answer(letter: DeadLetter) -> dict[str, Any]:
    return {"id": letter.request_id, "level": letter.level, "at": iso(letter.died_at), "error": letter.error,
            "message": letter.message}


async def front_entries(client: AnyRedis, lookup: Lookup, keys: ShardKeys,
                         host: str) -> list[tuple[int, int, bytes]]:
    """``host``'s entries in the front queues: (level, entries ahead of it, entry without the host), of
    the last ``scan_limit`` entries of each level."""
    prefix = host.encode() + b" "
    found = []
    for level in range(min(lookup.config.levels, MAX_LEVELS)):
        entries = await client.lrange(keys.front(level), -lookup.scan_limit, -1)
        for position, entry in enumerate(reversed(entries)):
            entry = raw_bytes(entry)
            if entry.startswith(prefix):
                found.append((level, position, entry[len(prefix):]))
    return found
