"""The Redis Mercator frontier: the Scrapy scheduler, the one path into it, its shards' store.

What other packages use is named here and imported from here; every other module of the package is
internal to it. The scheduler (:class:`FrontierScheduler`) and how the spider and the pipelines reach
it (:class:`FrontierContext`, :class:`Intake`); what a downloader middleware tells it about a
request's outcome (:mod:`.outcome`: :class:`HostSignal`, :func:`reschedule`, :func:`dead_letter`...);
its configuration (:class:`FrontierConfig`, :class:`SeenConfig`, :class:`PriorityLevels`); and, for
``scrapy frontier`` and the operators' views, the store's read API (:class:`RedisFrontier`,
:func:`read_counts`, :func:`read_dead_letters`), seeding, sizing and reset. The crawl's Redis state it
shares with the other packages (keys, shards, Lua library, step protocol) is :mod:`crawler.crawlstate`.
"""

from crawler.frontier.admission import server_fills
from crawler.frontier.codec import RequestCodec, stored_url, without_meta
from crawler.frontier.config import MAX_LEVELS, FrontierConfig
from crawler.frontier.context import FrontierContext
from crawler.frontier.intake import Intake
from crawler.frontier.levels import PriorityLevels
from crawler.frontier.outcome import (
    Handout,
    HostSignal,
    LeaseAction,
    Rescheduled,
    complete,
    dead_letter,
    handout_of,
    reschedule,
    signal_host,
    waits,
)
from crawler.frontier.redisfrontier import (
    Completion,
    DeadLetter,
    EnqueueEntry,
    FrontierCounts,
    RedisFrontier,
    Step,
    StepResult,
    read_counts,
    read_dead_letters,
    shard_frontiers,
)
from crawler.frontier.reset import crawl_keys, delete_keys
from crawler.frontier.scheduler import FrontierScheduler
from crawler.frontier.seeding import SeedReport, seed, seed_lines, terminal_progress
from crawler.frontier.seen import SeenConfig
from crawler.frontier.sizing import CrawlSizes, check_fits, crawl_sizes, planned_sizes, shard_fixed_bytes

__all__ = [
    "MAX_LEVELS",
    "Completion",
    "CrawlSizes",
    "DeadLetter",
    "EnqueueEntry",
    "FrontierConfig",
    "FrontierContext",
    "FrontierCounts",
    "FrontierScheduler",
    "Handout",
    "HostSignal",
    "Intake",
    "LeaseAction",
    "PriorityLevels",
    "RedisFrontier",
    "RequestCodec",
    "Rescheduled",
    "SeedReport",
    "SeenConfig",
    "Step",
    "StepResult",
    "check_fits",
    "complete",
    "crawl_keys",
    "crawl_sizes",
    "dead_letter",
    "delete_keys",
    "handout_of",
    "planned_sizes",
    "read_counts",
    "read_dead_letters",
    "reschedule",
    "seed",
    "seed_lines",
    "server_fills",
    "shard_fixed_bytes",
    "shard_frontiers",
    "signal_host",
    "stored_url",
    "terminal_progress",
    "waits",
    "without_meta",
]
