"""robots.txt, enforced before every fetch (RFC 9309). Replaces Scrapy's RobotsTxtMiddleware.

**A host's robots.txt is its first request.** The frontier hands out a host
whose robots.txt decision is missing or expired as a *robots.txt lease*
(:attr:`~crawler.frontier.redisfrontier.Lease.robots`): the scheduler turns it into a
request for ``<origin>/robots.txt`` (:func:`~crawler.robots.request.robots_lease_request`), claimed,
leased and paced like any request, while the host's pages stay queued. This
middleware judges the answer (:meth:`process_response`,
:meth:`process_exception`), shares the decision (which tells the frontier the
host's pages may go out) and ends the lease: the host's next request is its
first page, after the politeness delay. No page waits in a download slot
while robots.txt is fetched.

For each page (``process_request``):

1. The origin's decision: the local cache, else Redis (:class:`~crawler.robots.cache.RobotsStore`).
2. If there is none (another origin of the same host, say ``https`` after
   ``http``), a page served by the frontier goes back to it untouched (stat
   ``robots/missing``) with a signal that makes the host's robots.txt its next
   request. A request the frontier did not serve (``scrapy fetch``, requests
   downloaded directly) gets robots.txt fetched first, nested, as Scrapy's own
   middleware does.
3. An unreachable robots.txt (5xx, timeout, network error) disallows the host
   until its retry time (it sleeps in the frontier); after
   ``ROBOTS_MAX_FAILURES`` in a row its pages go to the dead letters.
4. A disallowed URL is dropped (``IgnoreRequest``, ``robots/disallowed``), never fetched.

A connection-level failure signals the host like any fetch (:class:`~crawler.frontier.outcome.HostSignal`).
Redirects are followed here (up to 5, any host); only ``ROBOTS_MAX_BYTES`` are kept.
Stats: ``robots/*``, and Scrapy's ``robotstxt/*`` keys as its middleware writes them.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from scrapy import Request, signals
from scrapy.exceptions import CannotResolveHostError, IgnoreRequest, NotConfigured

from crawler.archiving import Archive, archive_answer
from crawler.bounded import BoundedSet
from crawler.downloader.errors import ServerSilentError, TlsError
from crawler.downloader.netguard import BlockedAddressError
from crawler.frontier import (
    FrontierConfig,
    FrontierContext,
    HostSignal,
    Rescheduled,
    complete,
    dead_letter,
    handout_of,
    reschedule,
    waits,
)
from crawler.policy.backoff import parse_retry_after
from crawler.policy.politeness import PolitenessPolicy
from crawler.redisconn.provider import RedisProvider
from crawler.requestmeta import BODY_LIMIT_META, ROBOTS_META
from crawler.robots.cache import RobotsStore, origin_host
from crawler.robots.policy import (
    MAX_REDIRECTS,
    ROBOTS_PATH,
    RobotsConfig,
    RobotsRecord,
    RobotsRules,
    RobotsState,
    is_rfc_token,
    origin_of,
    product_token,
    record_for_failure,
    record_for_response,
    record_for_too_many_redirects,
)
from crawler.robots.request import robots_request
from crawler.settings_parsing import get_bool
from crawler.sitemaps import SitemapSettings, sitemap_meta
from crawler.urls import clean_reference

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

#: A robots.txt lease's failure that parks the host at once.
_SILENT_ERRORS = (ServerSilentError, CannotResolveHostError)


class RobotsTxtMiddleware:
    def __init__(
        self, crawler: Crawler, config: RobotsConfig, provider: RedisProvider, stats: StatsCollector,
        politeness: PolitenessPolicy,
    ) -> None:
        self.crawler = crawler
        self.config = config
        #: Paces the hops of a robots.txt redirect chain like any requests to a host.
        self.politeness = politeness
        self.provider = provider
        self.stats = stats
        self.router = RedisProvider.for_crawler(crawler).router
        self.sitemaps = SitemapSettings.from_settings(crawler.settings)
        self.store: RobotsStore | None = None
        #: Robots.txt downloads under way (id of the request) and the shared record before each (a lease's).
        self._under_way: dict[int, RobotsRecord | None] = {}
        #: Origins whose robots.txt lease met the address guard: their pages are
        #: dropped here, uncontacted (at most 10,000, oldest forgotten first).
        self._refused = BoundedSet(10_000)
        #: Where every answer to robots.txt is archived (ARCHIVE_RESPONSES), as an exchange only.
        self.archive = Archive.for_crawler(crawler) if get_bool(crawler.settings, "ARCHIVE_RESPONSES") else None
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = RobotsConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured
        sent = product_token(str(crawler.settings.get("USER_AGENT") or ""))
        token = config.user_agent_token
        if not is_rfc_token(token):
            cut = re.match(r"[A-Za-z_-]*", token).group(0)  # type: ignore[union-attr]
            logger.warning(
                "robots.txt product token %r has characters RFC 9309 does not allow in one (letters, '-' and '_' "
                "only): robots.txt groups for %r are obeyed, matched whole; parsers that cut it at the first "
                "such character, as Google's does, would read %r. Set ROBOTS_USER_AGENT_TOKEN to a token of "
                "letters to match what every parser reads", token, token, cut or "(nothing)")
        if sent and sent.lower() != token.lower():
            logger.warning(
                "robots.txt groups are looked up for %r (ROBOTSTXT_USER_AGENT / ROBOTS_USER_AGENT_TOKEN), but the "
                "User-Agent header we send names %r: sites that write rules for %r are not obeyed by them",
                config.user_agent_token, sent, sent)
        assert crawler.stats is not None
        frontier = FrontierConfig.for_crawler(crawler)
        politeness = frontier.politeness()
        return cls(crawler, config, RedisProvider.for_crawler(crawler), crawler.stats, politeness)

    async def _spider_opened(self) -> None:
        self.store = RobotsStore(await self.provider.batched(), self.router, self.config)

    async def process_request(self, request: Request) -> Request | None:
        meta = request.meta
        if ROBOTS_META in meta:
            if handout_of(request) is not None:
                await self._open_lease(request)
            return None
        try:
            await self._page(request)
        except Rescheduled:
            if waits(request):
                return request  # back to the frontier until robots.txt is decided (no errback)
            raise
        return None

    async def _page(self, request: Request) -> None:
        """A page's request: allowed by its origin's robots.txt, or refused, or sent to wait for it."""
        url = request.url
        origin = origin_of(url)
        if url.startswith(ROBOTS_PATH, len(origin)) and len(url) == len(origin) + len(ROBOTS_PATH):
            return
        assert self.store is not None, "robots middleware used before spider_opened"
        if origin in self._refused:
            # (Counted once per origin, in fetch/blocked_address, when its robots.txt was refused.)
            raise BlockedAddressError(f"{origin} resolves only to refused addresses")
        now = time.time()
        rules = self.store.local(origin, now)
        if rules is None:
            rules = await self._rules(request, origin, now)
        if rules.record.state is RobotsState.UNREACHABLE:
            self._wait_for_robots(request, rules.record)
        if not rules.allowed(url):
            self.stats.inc_value("robots/disallowed")
            self.stats.inc_value("robotstxt/forbidden")
            logger.debug("Disallowed by robots.txt: %s", url)
            raise IgnoreRequest(f"disallowed by robots.txt: {url}")

    async def _shared(self, origin: str) -> RobotsRecord | None:
        """The shared record of an origin, expired or not."""
        assert self.store is not None
        store = self.store
        return await self.provider.outage.call("robots.txt cache", lambda: store.get(origin), self.stats)

    async def _rules(self, request: Request, origin: str, now: float) -> RobotsRules:
        assert self.store is not None
        record = await self._shared(origin)
        if record is not None and not record.expired(now):
            self.stats.inc_value("robots/cache/shared")
            return self.store.use(origin, record)
        if reschedule(request, not_before=0.0, host_signal=HostSignal.ROBOTS_MISSING,
                      reason="robots.txt of this origin first"):
            # Served by the frontier: the host's robots.txt becomes its next request.
            self.stats.inc_value("robots/missing")
            raise Rescheduled(f"robots.txt of {origin} first")
        # Not from the frontier: fetch it now, nested (Scrapy's own way).
        record = await self._fetch(origin, record)
        return await self._share(origin, record)

    async def _share(self, origin: str, record: RobotsRecord) -> RobotsRules:
        """Store a new decision for every worker (and the frontier); its rules."""
        assert self.store is not None
        store = self.store
        rules, capped = await self.provider.outage.call(
            "robots.txt cache", lambda: store.put(origin, origin_host(origin), record, time.time()), self.stats
        )
        self._enqueue_sitemaps(origin, rules)
        if capped:
            self.stats.inc_value("robots/crawl_delay_capped")
            logger.info("%s asks for a Crawl-delay above ROBOTS_MAX_CRAWL_DELAY; using %.0f s",
                        origin, self.config.max_crawl_delay)
        return rules

    # -- robots.txt leases: a host's first request --------------------------------------

    async def _open_lease(self, request: Request) -> None:
        """A robots.txt lease about to be downloaded: unless another worker decided meanwhile."""
        assert self.store is not None
        origin = origin_of(request.url)
        now = time.time()
        rules = self.store.local(origin, now)
        record = None
        if rules is None:
            record = await self._shared(origin)
            if record is not None and not record.expired(now):
                rules = self.store.use(origin, record)
        if rules is not None:
            store = self.store
            until = rules.record.expires_at
            await self.provider.outage.call("robots.txt cache", lambda: store.decided(origin_host(origin), until),
                                            self.stats)
            self.stats.inc_value("robots/cache/shared")
            complete(request, host_signal=HostSignal.NEUTRAL, reason="robots.txt decided already")
            raise Rescheduled(f"robots.txt of {origin} decided already")
        self.stats.inc_value("robots/fetched")
        self.stats.inc_value("robotstxt/request_count")
        # The lease is ours until it ends: the shared record read now is still the previous one then.
        self._track(request, record)

    async def process_response(self, request: Request, response: Response) -> Response:
        if ROBOTS_META not in request.meta:
            return response
        previous = self._untrack(request)
        if handout_of(request) is None:
            return response  # a nested fetch: _fetch judges it
        origin = origin_of(request.url)
        if response.request is None:
            response.request = request  # (the engine sets it after the downloader middlewares)
        record = await self._judge(origin, response, previous, 0, request.meta.get("download_latency") or 0.0)
        # "Too many requests" for robots.txt itself: the host backs off like any throttled host.
        signal = HostSignal.THROTTLED if record.status == 429 else HostSignal.OK
        await self._close_lease(request, origin, record, signal)
        raise AssertionError("unreachable")  # pragma: no cover

    async def process_exception(self, request: Request, exception: Exception) -> None:
        if ROBOTS_META not in request.meta:
            return
        previous = self._untrack(request)
        if handout_of(request) is None or isinstance(exception, Rescheduled):
            return
        origin = origin_of(request.url)
        if isinstance(exception, IgnoreRequest):
            if isinstance(exception, BlockedAddressError):
                # Every page of the origin would be refused too: they come and are dropped.
                self._refused.add(origin)
                assert self.store is not None
                store = self.store
                until = time.time() + self.config.cache_ttl
                await self.provider.outage.call("robots.txt cache", lambda: store.decided(origin_host(origin), until),
                                                self.stats)
                complete(request, host_signal=HostSignal.NEUTRAL, reason="address refused")
                raise Rescheduled(f"{origin}: address refused")
            return
        if isinstance(exception, _SILENT_ERRORS):
            signal = HostSignal.SILENT
        elif isinstance(exception, TlsError):
            signal = HostSignal.NEUTRAL  # the host answered: not a reason to park it
        else:
            signal = HostSignal.FAILED
        record = self._failed(origin, exception, previous)
        await self._close_lease(request, origin, record, signal)

    async def _close_lease(self, request: Request, origin: str, record: RobotsRecord, signal: HostSignal) -> None:
        """Share the decision and end the robots.txt lease; the host's pages come next (or after the retry)."""
        await self._share(origin, record)
        if record.state is RobotsState.UNREACHABLE:
            if record.failures >= self.config.max_failures:
                # Given up on: the host's queued pages go to the dead letters.
                self.stats.inc_value("robots/dead_lettered")
                dead_letter(request, error="robots_unreachable", host_signal=signal,
                            message=f"robots.txt unreachable {record.failures} times: {record.error}")
                raise Rescheduled(f"robots.txt of {origin} unreachable")
            # Nothing of the host is allowed until robots.txt is tried again: the host sleeps.
            self.stats.inc_value("robots/waiting")
            complete(request, not_before=record.expires_at, host_signal=signal, reason="robots.txt unreachable")
        else:
            complete(request, host_signal=signal, reason="robots.txt")
        raise Rescheduled(f"robots.txt of {origin}")

    # -- judging an answer ------------------------------------------------------------------

    def _failed(self, origin: str, exception: BaseException, previous: RobotsRecord | None) -> RobotsRecord:
        name = type(exception).__name__
        self.stats.inc_value("robots/unreachable")
        self.stats.inc_value(f"robots/error/{name}")
        self.stats.inc_value(f"robotstxt/exception_count/{type(exception)}")  # (Scrapy's key, as it writes it)
        logger.info("robots.txt of %s unreachable: %s: %s", origin, name, exception)
        return record_for_failure(self.config, name, time.time(), previous)

    async def _judge(
        self, origin: str, response: Response, previous: RobotsRecord | None, hop: int, latency: float
    ) -> RobotsRecord:
        """The decision for an answer to robots.txt, following its redirects (nested) up to 5 hops,
        each after the politeness delay that the previous one's fetch time gives (the host is in
        flight meanwhile: nothing else is asked of it)."""
        url = response.url
        while True:
            await self._archive(response)
            status = response.status
            self.stats.inc_value(f"robots/status/{status}")
            location = response.headers.get(b"Location")
            if 300 <= status < 400 and location and hop < MAX_REDIRECTS:
                self.stats.inc_value("robots/redirects")
                url = urljoin(url, clean_reference(location.decode("latin-1")))
                hop += 1
                await asyncio.sleep(self.politeness.delay(latency))
                fetch = robots_request(url)
                self.stats.inc_value("robots/fetched")
                try:
                    response = await self._download(fetch)
                except BlockedAddressError:
                    raise
                except IgnoreRequest as exc:
                    self.stats.inc_value("robots/unreachable")
                    return record_for_failure(self.config, type(exc).__name__, time.time(), previous)
                except Exception as exc:
                    return self._failed(origin, exc, previous)
                latency = fetch.meta.get("download_latency") or 0.0
                continue
            # The answer Scrapy's middleware would judge (its redirects followed), in Scrapy's keys.
            self.stats.inc_value("robotstxt/response_count")
            self.stats.inc_value(f"robotstxt/response_status_count/{status}")
            if 300 <= status < 400 and location:
                self.stats.inc_value("robots/too_many_redirects")
                return record_for_too_many_redirects(self.config, time.time(), status)
            now = time.time()
            retry_after = None
            if status == 429:
                self.stats.inc_value("robots/throttled")
                retry_after = parse_retry_after(response.headers.get(b"Retry-After"), now)
            record = record_for_response(self.config, status, response.body, now, previous, retry_after)
            if record.truncated:
                self.stats.inc_value("robots/truncated")
            if record.state is RobotsState.UNREACHABLE:
                self.stats.inc_value("robots/unreachable")
            elif record.state is RobotsState.ALLOW_ALL:
                self.stats.inc_value("robots/allow_all")
            return record

    async def _archive(self, response: Response) -> None:
        """Every answer to robots.txt (each redirect hop too) into the archive, as an exchange only."""
        if self.archive is not None and response.request is not None:
            await archive_answer(self.archive, response, response.request, "robots", record_only=True)
            self.stats.inc_value("archive/robots")

    def _enqueue_sitemaps(self, origin: str, rules: RobotsRules) -> None:
        """Send the sitemaps robots.txt lists (or ``/sitemap.xml``) to the frontier, once per fetch."""
        if not self.sitemaps.enabled or rules.record.state is RobotsState.UNREACHABLE:
            return
        spider = self.crawler.spider
        intake = FrontierContext.for_crawler(self.crawler).intake
        if intake is None or not callable(getattr(spider, "parse_sitemap", None)):
            return
        urls = rules.sitemaps(self.config.max_sitemaps)
        if not urls and self.sitemaps.fallback:
            urls = [origin + "/sitemap.xml"]
        if urls:
            self.stats.inc_value("sitemaps/listed", len(urls))
            intake.urls(urls, depth=0, callback="parse_sitemap", priority=self.sitemaps.priority,
                        meta=sitemap_meta(self.sitemaps.max_bytes), exact_seen=True)

    def _wait_for_robots(self, request: Request, record: RobotsRecord) -> None:
        """A page of a host whose robots.txt is unreachable: wait, or give up."""
        if record.failures >= self.config.max_failures:
            if dead_letter(request, error="robots_unreachable",
                           message=f"robots.txt unreachable {record.failures} times: {record.error}"):
                self.stats.inc_value("robots/dead_lettered")
                raise Rescheduled("robots.txt unreachable")
        elif reschedule(request, not_before=record.expires_at, host_signal=HostSignal.NEUTRAL,
                        reason="robots.txt unreachable"):
            self.stats.inc_value("robots/waiting")
            raise Rescheduled("robots.txt unreachable; waiting for its retry")
        self.stats.inc_value("robots/disallowed")
        self.stats.inc_value("robotstxt/forbidden")
        raise IgnoreRequest(f"robots.txt unreachable: {request.url}")

    def _track(self, request: Request, previous: RobotsRecord | None = None) -> None:
        """A robots.txt download under way, with the origin's shared record before it (a lease's).

        Its body is cut at ``ROBOTS_MAX_BYTES`` by the download handler (what came is kept, as
        RFC 9309 asks: rules past the limit are not read).
        """
        request.meta[BODY_LIMIT_META] = self.config.max_bytes
        self._under_way[id(request)] = previous

    def _untrack(self, request: Request) -> RobotsRecord | None:
        """The download is over: the shared record :meth:`_track` was given."""
        if id(request) not in self._under_way:
            return None
        return self._under_way.pop(id(request))

    async def _download(self, fetch: Request) -> Response:
        """A nested robots.txt download through the engine (redirect hops, requests the frontier did not serve)."""
        engine = self.crawler.engine
        assert engine is not None
        self._track(fetch)
        try:
            return await engine.download_async(fetch)
        finally:
            self._untrack(fetch)

    async def _fetch(self, origin: str, previous: RobotsRecord | None) -> RobotsRecord:
        """Fetch (nested) and judge one origin's robots.txt, following up to 5 redirects."""
        fetch = robots_request(origin + ROBOTS_PATH)
        self.stats.inc_value("robots/fetched")
        self.stats.inc_value("robotstxt/request_count")
        try:
            response: Response = await self._download(fetch)
        except BlockedAddressError:
            raise  # the page's own host is refused: the page is dropped with it
        except IgnoreRequest as exc:
            self.stats.inc_value("robots/unreachable")
            return record_for_failure(self.config, type(exc).__name__, time.time(), previous)
        except Exception as exc:
            return self._failed(origin, exc, previous)
        return await self._judge(origin, response, previous, 0, fetch.meta.get("download_latency") or 0.0)
