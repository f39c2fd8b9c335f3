"""robots.txt, enforced before every fetch (RFC 9309). Replaces Scrapy's RobotsTxtMiddleware.

For each request (``process_request``):

1. ``/robots.txt`` itself always passes.
2. The decision for the URL's origin comes from the local cache, else from the
   shared cache in Redis (:class:`~crawler.robots.store.RobotsStore`).
3. If there is none (or it expired), robots.txt is fetched *now*, under the
   page's own lease: the host is already in flight for this worker, so the
   fetch counts against the host's politeness like any request. The decision
   is shared, and the page goes back to the frontier (it is fetched after the
   host's delay, like any next request to the host). A URL is therefore never
   fetched before its host's decision exists.
4. An unreachable robots.txt (5xx, timeout, network error) disallows the whole
   host until its retry time: the page waits in the frontier until then (the
   host rests); after ``ROBOTS_MAX_FAILURES`` failures in a row the page goes
   to the dead-letter queue instead.
5. A disallowed URL is dropped (``IgnoreRequest``), counted in
   ``robots/disallowed``, and never fetched.

Redirects of robots.txt are followed here (up to 5, to any host), since
Scrapy's redirect middleware is off; only the first ``ROBOTS_MAX_BYTES`` of
the body are kept (the download stops there).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy import Request, signals
from scrapy.exceptions import IgnoreRequest, NotConfigured, StopDownload

from crawler.frontier.outcome import HostSignal, Rescheduled, dead_letter, handout_of, reschedule
from crawler.frontier.shards import ShardRouter
from crawler.netguard import BlockedAddressError
from crawler.redisconn.provider import RedisProvider, crawl_id_for
from crawler.robots.policy import (
    MAX_REDIRECTS,
    ROBOTS_PATH,
    RobotsConfig,
    RobotsRecord,
    RobotsRules,
    RobotsState,
    origin_of,
    record_for_failure,
    record_for_response,
    record_for_too_many_redirects,
)
from crawler.robots.store import RobotsStore
from crawler.sitemaps import SitemapSettings, sitemap_meta
from crawler.urls import UrlError, host_of

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

#: ``Request.meta`` key marking the robots.txt fetches this middleware makes.
ROBOTS_META = "robots_txt_fetch"


class RobotsTxtMiddleware:
    def __init__(self, crawler: Crawler, config: RobotsConfig, provider: RedisProvider, stats: StatsCollector) -> None:
        self.crawler = crawler
        self.config = config
        self.provider = provider
        self.stats = stats
        self.router = ShardRouter.from_settings(crawler.settings, crawl_id_for(crawler))
        self.sitemaps = SitemapSettings.from_settings(crawler.settings)
        self.store: RobotsStore | None = None
        # The body cap needs a look at every chunk, but only of robots.txt
        # fetches: the handler is connected only while one is under way.
        self._fetches_under_way = 0
        crawler.signals.connect(self._spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = RobotsConfig.from_settings(crawler.settings)
        if not config.enabled:
            raise NotConfigured
        assert crawler.stats is not None
        return cls(crawler, config, RedisProvider.for_crawler(crawler), crawler.stats)

    async def _spider_opened(self) -> None:
        self.store = RobotsStore(await self.provider.client(), self.router, self.config)

    def _bytes_received(self, data: bytes, request: Request, spider: Any = None) -> None:
        if ROBOTS_META not in request.meta:
            return
        received = request.meta.get("robots_bytes", 0) + len(data)
        request.meta["robots_bytes"] = received
        if received > self.config.max_bytes:
            raise StopDownload(fail=False)

    async def process_request(self, request: Request) -> None:
        if ROBOTS_META in request.meta:
            return
        url = request.url
        origin = origin_of(url)
        if url.startswith(ROBOTS_PATH, len(origin)) and len(url) == len(origin) + len(ROBOTS_PATH):
            return
        assert self.store is not None, "robots middleware used before spider_opened"
        now = time.time()
        rules = self.store.local(origin, now)
        if rules is None:
            rules = await self._rules(request, origin, now)
        if rules.record.state is RobotsState.UNREACHABLE:
            self._wait_for_robots(request, rules.record)
        if not rules.allowed(url):
            self.stats.inc_value("robots/disallowed")
            logger.debug("Disallowed by robots.txt: %s", url)
            raise IgnoreRequest(f"disallowed by robots.txt: {url}")

    async def _rules(self, request: Request, origin: str, now: float) -> RobotsRules:
        assert self.store is not None
        store = self.store
        outage = self.provider.outage
        record = await outage.call("robots.txt cache", lambda: store.get(origin), self.stats)
        if record is not None and not record.expired(now):
            self.stats.inc_value("robots/cache/shared")
            return self.store.use(origin, record)
        record = await self._fetch(origin, record)
        try:
            host = host_of(origin + "/")
        except UrlError:
            host = origin
        fetched = record
        rules, capped = await outage.call(
            "robots.txt cache", lambda: store.put(origin, host, fetched, time.time()), self.stats
        )
        self._enqueue_sitemaps(origin, rules)
        if capped:
            self.stats.inc_value("robots/crawl_delay_capped")
            logger.info("%s asks for a Crawl-delay above ROBOTS_MAX_CRAWL_DELAY; using %.0f s",
                        origin, self.config.max_crawl_delay)
        if handout_of(request) is not None:
            # The fetch used this request's turn at the host: the page waits for
            # the host's next turn (or, if robots.txt is unreachable, its retry).
            not_before = record.expires_at if record.state is RobotsState.UNREACHABLE else 0.0
            if record.state is RobotsState.UNREACHABLE and record.failures >= self.config.max_failures:
                self._wait_for_robots(request, record)
            reschedule(request, not_before=not_before, host_signal=HostSignal.NEUTRAL,
                       reason="robots.txt fetched first")
            raise Rescheduled(f"robots.txt of {origin} fetched first")
        return rules

    def _enqueue_sitemaps(self, origin: str, rules: RobotsRules) -> None:
        """Send the sitemaps robots.txt lists (or ``/sitemap.xml``) to the frontier, once per fetch."""
        if not self.sitemaps.enabled or rules.record.state is RobotsState.UNREACHABLE:
            return
        spider = self.crawler.spider
        engine = self.crawler.engine
        enqueue_urls = getattr(engine.scheduler if engine else None, "enqueue_urls", None)
        if enqueue_urls is None or not callable(getattr(spider, "parse_sitemap", None)):
            return
        urls = rules.sitemaps(self.config.max_sitemaps)
        if not urls and self.sitemaps.fallback:
            urls = [origin + "/sitemap.xml"]
        if urls:
            self.stats.inc_value("sitemaps/listed", len(urls))
            enqueue_urls(urls, depth=0, callback="parse_sitemap", priority=self.sitemaps.priority,
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
        raise IgnoreRequest(f"robots.txt unreachable: {request.url}")

    async def _download(self, fetch: Request) -> Response:
        engine = self.crawler.engine
        assert engine is not None
        signals_ = self.crawler.signals
        if self._fetches_under_way == 0:
            signals_.connect(self._bytes_received, signal=signals.bytes_received)
        self._fetches_under_way += 1
        try:
            return await engine.download_async(fetch)
        finally:
            self._fetches_under_way -= 1
            if self._fetches_under_way == 0:
                signals_.disconnect(self._bytes_received, signal=signals.bytes_received)

    async def _fetch(self, origin: str, previous: RobotsRecord | None) -> RobotsRecord:
        """Fetch and judge one origin's robots.txt, following up to 5 redirects."""
        url = origin + ROBOTS_PATH
        status = 0
        for hop in range(MAX_REDIRECTS + 1):
            fetch = Request(url, meta={ROBOTS_META: True, "handle_httpstatus_all": True}, dont_filter=True)
            self.stats.inc_value("robots/fetched")
            try:
                response: Response = await self._download(fetch)
            except BlockedAddressError:
                raise  # the page's own host is refused: the page is dropped with it
            except IgnoreRequest as exc:
                self.stats.inc_value("robots/unreachable")
                return record_for_failure(self.config, type(exc).__name__, time.time(), previous)
            except Exception as exc:
                self.stats.inc_value("robots/unreachable")
                self.stats.inc_value(f"robots/error/{type(exc).__name__}")
                logger.info("robots.txt of %s unreachable: %s: %s", origin, type(exc).__name__, exc)
                return record_for_failure(self.config, type(exc).__name__, time.time(), previous)
            status = response.status
            self.stats.inc_value(f"robots/status/{status}")
            location = response.headers.get(b"Location")
            if 300 <= status < 400 and location and hop < MAX_REDIRECTS:
                self.stats.inc_value("robots/redirects")
                url = urljoin(url, location.decode("latin-1").strip())
                continue
            if 300 <= status < 400 and location:
                self.stats.inc_value("robots/too_many_redirects")
                return record_for_too_many_redirects(self.config, time.time(), status)
            record = record_for_response(self.config, status, response.body, time.time(), previous)
            if record.truncated:
                self.stats.inc_value("robots/truncated")
            if record.state is RobotsState.UNREACHABLE:
                self.stats.inc_value("robots/unreachable")
            elif record.state is RobotsState.ALLOW_ALL:
                self.stats.inc_value("robots/allow_all")
            return record
        raise AssertionError("unreachable")  # pragma: no cover
