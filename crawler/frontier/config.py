"""The frontier's settings, parsed once into a frozen dataclass."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scrapy.settings import BaseSettings

from crawler import defaults
from crawler.exceptions import ConfigurationError
from crawler.percrawler import PerCrawler
from crawler.policy.politeness import PolitenessKey, PolitenessPolicy, SlotOverride, parse_slot_overrides
from crawler.settings_parsing import get_bool, get_float, get_int, get_int_list

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

#: The robots.txt middleware, which fetches what a robots.txt lease asks for.
ROBOTS_MIDDLEWARE = "crawler.middlewares.robots.RobotsTxtMiddleware"


def robots_first(settings: BaseSettings) -> bool:
    """Whether the frontier hands out a host's robots.txt before its pages: robots.txt is
    enforced (``ROBOTS_ENABLED``) by the crawler's middleware, which is in ``DOWNLOADER_MIDDLEWARES``."""
    if not get_bool(settings, "ROBOTS_ENABLED"):
        return False
    middlewares = settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    return any(
        (name if isinstance(name, str) else f"{name.__module__}.{name.__qualname__}") == ROBOTS_MIDDLEWARE
        and order is not None
        for name, order in middlewares.items()
    )

#: Priority levels (front queues) at most.
MAX_LEVELS = 16

_CRAWL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")


@dataclass(frozen=True)
class FrontierConfig:
    crawl_id: str
    #: Seconds between two requests to one host, at least.
    min_delay: float
    #: The politeness delay is this multiple of the last fetch's duration.
    delay_factor: float
    #: Cap on the duration-derived delay (a 60 s fetch must not park a host for 10 min).
    max_delay: float
    #: Weights of the front queues, highest priority first.
    queue_weights: tuple[int, ...]
    #: Awake hosts (with a back queue, not asleep) at most: a memory bound. How
    #: many are awake is decided by need (see ``lua/claim.lua``).
    active_hosts: int
    #: Seconds a claimed URL stays leased without renewal.
    lease_timeout: float
    #: Seconds an idle worker waits before looking at the shared frontier again.
    idle_poll: float
    #: Front-queue entries moved to back queues per claim call, at most.
    refill_batch: int
    #: Requests sent to Redis per enqueue call, at most.
    enqueue_batch: int
    #: Fingerprints remembered in-process to skip sending known duplicates to Redis.
    local_seen_size: int
    #: URLs handed to the downloader at once (Scrapy's CONCURRENT_REQUESTS).
    concurrency: int
    #: URLs enqueued per host / per registered domain, at most (0: no limit).
    host_page_budget: int = 0
    domain_page_budget: int = 0
    #: Cells of the in-link sketch (0: in-links not counted).
    inlink_cells: int = 0
    #: Due revisits moved into the frontier per drain call, at most.
    due_batch: int = defaults.RECRAWL_DRAIN_BATCH
    #: A host whose next allowed time is more than this many seconds away sleeps.
    sleep_horizon: float = defaults.FRONTIER_SLEEP_HORIZON
    #: A host's robots.txt is its first request (the robots.txt middleware is on).
    robots_first: bool = False
    #: What one request at a time and one clock are kept for.
    politeness_key: PolitenessKey = PolitenessKey.HOST
    #: Requests in flight at once per politeness key, across every worker.
    per_key: int = 1
    #: Delete the crawl's keys when the worker opens (start over).
    reset_on_start: bool = False
    #: Requests with callbacks the frontier cannot store, kept in this process at most.
    local_requests: int = defaults.FRONTIER_LOCAL_REQUESTS
    #: A host's minimum delay drawn from 0.5x to 1.5x of ``min_delay`` (Scrapy's RANDOMIZE_DOWNLOAD_DELAY).
    randomize_delay: bool = False
    #: Per-key delay, concurrency and randomization (Scrapy's DOWNLOAD_SLOTS), this worker's; the
    #: scheduler shares them through the frontier and applies every worker's.
    slot_overrides: tuple[tuple[str, SlotOverride], ...] = ()
    #: Seconds a drained frontier keeps a batch-mode worker open (scrapy-redis's SCHEDULER_IDLE_BEFORE_CLOSE).
    idle_before_close: float = 0.0
    #: Some politeness keys of the crawl have a concurrency of their own (DOWNLOAD_SLOTS, any worker's):
    #: the scripts read them (set when the scheduler opens).
    slot_limited: bool = False

    @property
    def levels(self) -> int:
        return len(self.queue_weights)

    def politeness(self, overrides: dict[str, SlotOverride] | None = None) -> PolitenessPolicy:
        """The politeness policy of this configuration; ``overrides``: the crawl's shared DOWNLOAD_SLOTS
        (default: this worker's own)."""
        return PolitenessPolicy(self.min_delay, self.delay_factor, self.max_delay, self.randomize_delay,
                                dict(self.slot_overrides) if overrides is None else overrides)

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> FrontierConfig:
        """The crawl's configuration as its settings give it, parsed once per crawler."""
        return _configs(crawler)

    @classmethod
    def from_settings(cls, settings: BaseSettings, spider_name: str) -> FrontierConfig:
        crawl_id = str(settings.get("FRONTIER_CRAWL_ID") or spider_name)
        if not _CRAWL_ID.match(crawl_id):
            raise ConfigurationError(
                "FRONTIER_CRAWL_ID",
                f"{crawl_id!r} is not a valid crawl id (letters, digits, '_', '.', '-'; at most 100)",
            )
        concurrency = get_int(settings, "CONCURRENT_REQUESTS", minimum=1)
        weights = get_int_list(settings, "FRONTIER_QUEUE_WEIGHTS", minimum=1)
        if len(weights) < 3:
            raise ConfigurationError("FRONTIER_QUEUE_WEIGHTS", f"needs at least 3 priority levels, got {weights!r}")
        if len(weights) > MAX_LEVELS:
            raise ConfigurationError("FRONTIER_QUEUE_WEIGHTS",
                                     f"at most {MAX_LEVELS} priority levels, got {len(weights)}")
        politeness_key = PolitenessKey.from_settings(settings)
        per_key = get_int(settings, "FRONTIER_CONCURRENCY_PER_KEY", minimum=1)
        active = get_int(settings, "FRONTIER_ACTIVE_HOSTS", minimum=1)
        lease = get_float(settings, "FRONTIER_LEASE_TIMEOUT", minimum=1.0)
        return cls(
            crawl_id=crawl_id,
            min_delay=get_float(settings, "FRONTIER_MIN_DELAY", minimum=0.0),
            delay_factor=get_float(settings, "FRONTIER_DELAY_FACTOR", minimum=0.0),
            max_delay=get_float(settings, "FRONTIER_MAX_DELAY", minimum=0.0),
            queue_weights=weights,
            active_hosts=active,
            lease_timeout=lease,
            idle_poll=get_float(settings, "FRONTIER_IDLE_POLL", minimum=0.01),
            refill_batch=get_int(settings, "FRONTIER_REFILL_BATCH", minimum=1),
            enqueue_batch=get_int(settings, "FRONTIER_ENQUEUE_BATCH", minimum=1),
            local_seen_size=get_int(settings, "FRONTIER_LOCAL_SEEN_SIZE", minimum=0),
            concurrency=concurrency,
            host_page_budget=get_int(settings, "HOST_PAGE_BUDGET", minimum=0),
            domain_page_budget=get_int(settings, "DOMAIN_PAGE_BUDGET", minimum=0),
            inlink_cells=get_int(settings, "PRIORITY_INLINK_CELLS", minimum=0),
            due_batch=get_int(settings, "RECRAWL_DRAIN_BATCH", minimum=1),
            sleep_horizon=get_float(settings, "FRONTIER_SLEEP_HORIZON", minimum=0.0),
            robots_first=robots_first(settings),
            politeness_key=politeness_key,
            per_key=per_key,
            reset_on_start=get_bool(settings, "FRONTIER_RESET_ON_START"),
            local_requests=get_int(settings, "FRONTIER_LOCAL_REQUESTS", minimum=0),
            randomize_delay=get_bool(settings, "FRONTIER_RANDOMIZE_DELAY"),
            slot_overrides=tuple(sorted(parse_slot_overrides(settings.get("DOWNLOAD_SLOTS")).items())),
            idle_before_close=get_float(settings, "FRONTIER_IDLE_BEFORE_CLOSE", minimum=0.0),
        )


def _config_of(crawler: Crawler) -> FrontierConfig:
    from crawler.redisconn.provider import crawl_id_for

    return FrontierConfig.from_settings(crawler.settings, crawl_id_for(crawler))


_configs: PerCrawler[FrontierConfig] = PerCrawler(_config_of)
