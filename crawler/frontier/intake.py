"""The one path by which a URL enters the frontier: filter, fingerprint, score, level, encode, shard.

:class:`Intake` turns requests (:meth:`Intake.request`) and bulk links
(:meth:`Intake.urls`) into the enqueue entries the frontier's scripts take,
per shard, and keeps them until the scheduler's pump sends them
(:meth:`Intake.take`; what a failed step could not send goes back with
:meth:`Intake.put_back`). The frontier scheduler, ``scrapy frontier seed``
and the tests all use it, so a URL is normalized, filtered, deduplicated
in-process, scored and routed the same way whoever enqueues it.

With ``FRONTIER_POLITENESS_KEY = "ip"`` the entries get their host's address
as their politeness group before they are sent (:meth:`Intake.resolve_groups`).

A request whose callback cannot be stored by name (a lambda, a closure: what
``scrapy fetch``, ``parse`` and ``shell`` use) is kept in this process
(:attr:`Intake.local`) and fetched by it, outside the frontier, with one
warning per callback and the stat ``frontier/local``: never dropped in
silence.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest

from crawler import defaults
from crawler.bounded import BoundedSet
from crawler.downloader.netguard import parse_ip
from crawler.exceptions import CodecError, UnstorableCallbackError
from crawler.frontier.levels import PriorityLevels
from crawler.frontier.redisfrontier import DONT_FILTER, EXACT_ONLY, EnqueueEntry, Touch
from crawler.policy.clock import CrawlClock
from crawler.policy.hostquality import HostQualityCache
from crawler.policy.priority import PriorityPolicy, PrioritySignals
from crawler.policy.recrawl import lastmod_epoch
from crawler.requestmeta import (
    EXACT_SEEN_META,
    EXPECTED_TYPES_META,
    FROM_SITEMAP_META,
    SITEMAP_LASTMOD_META,
    SITEMAP_META,
    VERBATIM_URL_META,
)
from crawler.urls import url_fingerprint, url_key
from crawler.urls.domains import RegisteredDomains
from crawler.urls.filters import Dropped, UrlFilter

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

    from crawler.crawlstate.shards import ShardRouter
    from crawler.downloader.dns import CachingGuardedResolver
    from crawler.frontier.codec import RequestCodec
    from crawler.frontier.redisfrontier import RedisFrontier

logger = logging.getLogger(__name__)

#: Seconds a new host's address may take to resolve (``FRONTIER_POLITENESS_KEY = "ip"``).
_RESOLVE_TIMEOUT = 10.0


class Intake:
    """URLs on their way into the frontier, per shard, until the next step sends them."""

    def __init__(
        self,
        router: ShardRouter,
        url_filter: UrlFilter,
        levels: PriorityLevels,
        stats: StatsCollector,
        *,
        local_seen_size: int,
        local_requests: int = defaults.FRONTIER_LOCAL_REQUESTS,
        priority: PriorityPolicy | None = None,
        host_quality: HostQualityCache | None = None,
        clock: CrawlClock | None = None,
        resolver: CachingGuardedResolver | None = None,
        notify: Callable[[], None] = lambda: None,
    ) -> None:
        self.router = router
        self.url_filter = url_filter
        self.levels = levels
        self.stats = stats
        self.priority = priority or PriorityPolicy()
        self.host_quality = host_quality or HostQualityCache()
        self.clock = clock or CrawlClock()
        #: ``FRONTIER_POLITENESS_KEY = "ip"``: new hosts' addresses, their politeness group.
        self.resolver = resolver
        #: Called when the first entry arrives since the last take (the pump wakes up).
        self.notify = notify
        self.domains = RegisteredDomains.shared()
        self._local_seen = BoundedSet(local_seen_size)
        self.codec: RequestCodec | None = None
        self.frontiers: list[RedisFrontier] = []
        #: Per shard (only shards with something to send): enqueue entries, sitemap touches.
        self.enqueues: dict[int, list[EnqueueEntry]] = {}
        self.touches: dict[int, list[Touch]] = {}
        #: Requests whose callback the frontier cannot store (a lambda, a function outside the spider):
        #: kept and fetched by this process, at most ``local_requests`` of them.
        self.local: deque[Request] = deque()
        self.local_requests = local_requests
        self._warned_callbacks = BoundedSet(1000)
        #: An interactive session (``scrapy shell``): every request is this process's own.
        self.interactive = False

    def bind(self, codec: RequestCodec, frontiers: list[RedisFrontier]) -> None:
        """The spider's codec and the shards' frontiers (known once the crawl opens)."""
        self.codec = codec
        self.frontiers = frontiers

    def pending(self) -> int:
        """URLs waiting to be sent (what a producer of many, the seeds, waits on)."""
        return sum(len(entries) for entries in self.enqueues.values())

    def take(self) -> tuple[dict[int, list[EnqueueEntry]], dict[int, list[Touch]]]:
        """What arrived since the last take, per shard."""
        enqueues, touches = self.enqueues, self.touches
        self.enqueues, self.touches = {}, {}
        return enqueues, touches

    def put_back(self, shard: int, enqueues: dict[int, list[EnqueueEntry]], touches: dict[int, list[Touch]]) -> None:
        """A shard's unsent entries go back in front of what came since."""
        if shard in enqueues:
            self.enqueues[shard] = enqueues[shard] + self.enqueues.get(shard, [])
        if shard in touches:
            self.touches[shard] = touches[shard] + self.touches.get(shard, [])

    def _keep_local(self, request: Request, problem: Exception) -> bool:
        """A request the frontier cannot store: fetched by this process (no lease, no politeness across workers)."""
        if len(self.local) >= self.local_requests:
            self.stats.inc_value("frontier/dropped/local_overflow")
            logger.error("Frontier dropped %s: more than FRONTIER_LOCAL_REQUESTS (%d) requests with callbacks "
                         "it cannot store wait in this process", request.url, self.local_requests)
            return False
        self.stats.inc_value("frontier/local")
        callback = repr(request.callback or request.errback)
        if callback not in self._warned_callbacks:
            self._warned_callbacks.add(callback)
            logger.warning(
                "%s. Its requests are fetched by this worker, outside the frontier: not shared with other "
                "workers, not paced per host across them, lost if the worker stops. Make it a method of the "
                "spider to crawl them through the frontier.", problem)
        self.local.append(request)
        self.notify()
        return True

    def request(self, request: Request) -> bool:
        """Take a request; ``False`` if it is dropped here.

        The URL is normalized and filtered first (:class:`~crawler.urls.filters.UrlFilter`;
        drops counted in ``urls/dropped/<reason>``); the request is stored with
        the normalized URL. Duplicates found by the shared seen set, and URLs
        over a page budget, are counted when Redis answers, not here.
        """
        try:
            meta = request.meta
            normalized, host = self.url_filter.check(
                request.url, meta.get("depth", 0),
                by_extension=not (meta.get(SITEMAP_META) or meta.get(EXPECTED_TYPES_META)),
            )
        except Dropped as dropped:
            self.stats.inc_value(f"urls/dropped/{dropped.reason}")
            logger.debug("Dropped %s: %s", request.url, dropped)
            return False
        fingerprint = url_fingerprint(normalized, request.method, request.body)
        if not request.dont_filter and fingerprint in self._local_seen:
            self.stats.inc_value("frontier/duplicate/local")
            return False
        assert self.codec is not None and self.frontiers, "Intake.request() before bind()"
        if self.interactive:
            self.local.append(request)
            self.notify()
            return True
        if normalized != request.url:
            request = request.replace(url=normalized, meta={**request.meta, VERBATIM_URL_META: True})
        try:
            encoded = self.codec.encode(request)
        except UnstorableCallbackError as exc:
            return self._keep_local(request, exc)
        except CodecError as exc:
            self.stats.inc_value("frontier/dropped/unserializable")
            logger.warning("Frontier dropped %s: %s", request.url, exc)
            return False
        if encoded.dropped_keys:
            self.stats.inc_value("frontier/meta_dropped", len(encoded.dropped_keys))
            logger.debug("Frontier stored %s without non-plain meta %s", request.url, encoded.dropped_keys)
        self._local_seen.add(fingerprint)
        flags = (DONT_FILTER if request.dont_filter else 0) | (EXACT_ONLY if request.meta.get(EXACT_SEEN_META) else 0)
        score = self.score(host, meta.get("depth", 0), meta)
        if not self.enqueues:
            self.notify()
        shard = self.router.shard_of(host)
        self.enqueues.setdefault(shard, []).append(
            self.frontiers[shard].entry(
                fingerprint, host, self.domains(host), self.levels.level(request.priority + score), encoded.blob,
                flags,
            )
        )
        return True

    def urls(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        callback: str | None = None,
        priority: int = 0,
        meta: dict[str, Any] | None = None,
        exact_seen: bool = False,
    ) -> int:
        """Take plain GET requests for many URLs at once; returns how many were taken.

        The bulk path for discovered links: the same normalization, filters,
        seen check and routing as :meth:`request`, without building a
        ``Request`` per link. ``callback`` names a spider method; the request's
        ``meta`` is ``{"depth": depth}`` plus ``meta``. ``exact_seen`` skips the
        Bloom filter (sitemap URLs: the exact store alone decides). A sitemap
        ``lastmod`` in ``meta`` also makes a known URL's revisit due (a touch).
        """
        assert self.codec is not None and self.frontiers, "Intake.urls() before bind()"
        local_seen = self._local_seen
        inc = self.stats.inc_value
        check = self.url_filter.check
        entry = self.frontiers[0].entry  # the same for every shard but for the seen set's size
        sharded = self.router.count > 1
        shard_of = self.router.shard_of
        enqueues = self.enqueues
        touches = self.touches
        request_meta = {"depth": depth, **(meta or {})}
        flags = EXACT_ONLY if exact_seen else 0
        by_extension = not (request_meta.get(SITEMAP_META) or request_meta.get(EXPECTED_TYPES_META))
        lastmod = lastmod_epoch(request_meta.get(SITEMAP_LASTMOD_META))
        levels: dict[str, int] = {}  # host -> level, for this batch of links
        sent = 0
        for url in urls:
            try:
                normalized, host = check(url, depth, by_extension=by_extension)
            except Dropped as dropped:
                inc(f"urls/dropped/{dropped.reason}")
                continue
            fingerprint = url_fingerprint(normalized)
            shard = shard_of(host) if sharded else 0
            if lastmod is not None:
                # Known and fetched before the lastmod: the revisit becomes due (lua/touch.lua).
                touches.setdefault(shard, []).append(Touch(url_key(fingerprint), int(lastmod)))
            if fingerprint in local_seen:
                inc("frontier/duplicate/local")
                continue
            local_seen.add(fingerprint)
            level = levels.get(host)
            if level is None:
                level = levels[host] = self.levels.level(priority + self.score(host, depth, request_meta))
            blob = self.codec.encode_link(normalized, host, callback, request_meta, priority)
            if sharded:
                entry = self.frontiers[shard].entry
            enqueues.setdefault(shard, []).append(entry(fingerprint, host, self.domains(host), level, blob, flags))
            sent += 1
        if sent or touches:
            self.notify()
        return sent

    def score(self, host: str, depth: int, meta: dict[str, Any]) -> int:
        """The priority policy's part of a new URL's priority (see :mod:`crawler.policy.priority`)."""
        policy = self.priority
        in_sitemap = bool(meta.get(FROM_SITEMAP_META))
        fresh = in_sitemap and policy.is_fresh(lastmod_epoch(meta.get(SITEMAP_LASTMOD_META)), self.clock.now())
        return policy.priority(
            PrioritySignals(
                depth=depth,
                in_sitemap=in_sitemap,
                sitemap_fresh=fresh,
                host_importance=policy.importance_of(host),
                host=self.host_quality.get(host),
            )
        )

    async def resolve_groups(self, enqueues: dict[int, list[EnqueueEntry]]) -> None:
        """Give each entry its host's address as its politeness group (``FRONTIER_POLITENESS_KEY = "ip"``).

        The resolver caches answers (``DNS_CACHE_TTL``); a host that does not
        resolve in time, or only to refused addresses, is a group of its own
        (its fetch will fail, and park it, anyway).
        """
        resolver = self.resolver
        if resolver is None or not enqueues:
            return
        hosts = {entry.host for entries in enqueues.values() for entry in entries if not entry.group}
        addresses: dict[str, str] = {}

        async def resolve(host: str) -> None:
            if parse_ip(host) is not None:
                addresses[host] = host
                return
            try:
                async with asyncio.timeout(_RESOLVE_TIMEOUT):
                    answer = await resolver.resolve(host, 0, socket.AF_UNSPEC)
            except (OSError, TimeoutError, IgnoreRequest):
                self.stats.inc_value("frontier/group_unresolved")
                return
            if answer:
                addresses[host] = str(answer[0]["host"])

        await asyncio.gather(*(resolve(host) for host in hosts))
        for shard, entries in enqueues.items():
            enqueues[shard] = [
                entry if entry.group else entry._replace(group=addresses.get(entry.host, entry.host))
                for entry in entries
            ]
