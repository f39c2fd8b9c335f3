"""Render the pages of hosts that need JavaScript, and only them (``RENDER_*``).

For every HTML page fetched (GET, 200), the host's mark decides
(:mod:`crawler.render.marks`): an operator's ``on``/``off``, else what
sampling found. A host without a standing mark is sampled: its page is
judged from the raw HTML (:func:`crawler.render.detect.needs_browser`); one
page that needs JavaScript marks the host ``js`` for every worker
(``RENDER_MARK_TTL``), ``RENDER_SAMPLE_PAGES`` pages that do not mark it
``static``. ``meta["render"]`` True or False decides for one request.

A page to render is given to the browser with the response already fetched
(it is not fetched twice); what the page then asks for passes the gate
(:mod:`crawler.render.gate`: robots.txt, addresses, budget, politeness). The
response stays the raw one (the WARC ``response`` record); the rendered DOM
rides along in ``meta["rendered"]`` (:class:`~crawler.render.browser.RenderedPage`):
the web spider extracts links and text from it and the WARC pipeline stores
it as a ``conversion`` record. It all happens within the page's frontier
lease, so the host's next page waits for the rendering and its politeness
delay.

A page that cannot be rendered (no browser, a timeout without DOM, a crash,
a DOM over ``RENDER_MAX_DOM_BYTES``) keeps its raw response: counted in
``render/failed/<reason>``, logged, and the crawl goes on.

Stats: ``render/detected/<reason>`` (sampling verdicts), ``render/marked/js``,
``render/marked/static``, ``render/rendered``, ``render/timeout``,
``render/failed/<reason>``, ``render/subrequests/<decision>``,
``render/browser_launches``, ``render/browser_restarts``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.downloader.netguard import AddressPolicy
from crawler.frontier import FrontierConfig
from crawler.httpheaders import is_html
from crawler.policy.politeness import PolitenessPolicy
from crawler.redisconn.provider import RedisProvider
from crawler.render.browser import BrowserConfig, BrowserPool, RenderedPage, RenderFailed
from crawler.render.detect import needs_browser
from crawler.render.gate import HostPacer, PageGate
from crawler.render.marks import HostMark, Mark, RenderMarks, force
from crawler.render.subrequests import Decision, SubrequestPolicy, host_of_url
from crawler.requestmeta import MODULE_META, RENDER_META, RENDERED_META, ROBOTS_META, SITEMAP_META
from crawler.robots.cache import RobotsStore
from crawler.robots.policy import RobotsConfig, RobotsRules, origin_of
from crawler.settings_parsing import get_bool, get_float, get_int, get_list, setting

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RenderSettings:
    forced_on: tuple[str, ...]
    forced_off: tuple[str, ...]
    sample_pages: int
    mark_ttl: float
    min_text: int
    min_links: int
    cache_size: int
    cache_seconds: float

    @classmethod
    def from_settings(cls, settings: Any) -> RenderSettings:
        return cls(
            tuple(str(h).lower() for h in get_list(settings, "RENDER_HOSTS")),
            tuple(str(h).lower() for h in get_list(settings, "RENDER_NEVER_HOSTS")),
            get_int(settings, "RENDER_SAMPLE_PAGES", minimum=1),
            get_float(settings, "RENDER_MARK_TTL", minimum=1.0),
            get_int(settings, "RENDER_DETECT_MIN_TEXT", minimum=0),
            get_int(settings, "RENDER_DETECT_MIN_LINKS", minimum=0),
            get_int(settings, "RENDER_CACHE_SIZE", minimum=1),
            get_float(settings, "RENDER_CACHE_SECONDS", minimum=0.0),
        )


class RenderMiddleware:
    def __init__(self, crawler: Crawler, config: RenderSettings, browser: BrowserConfig, policy: SubrequestPolicy,
                 politeness: PolitenessPolicy, robots: RobotsConfig, addresses: AddressPolicy) -> None:
        self.crawler = crawler
        self.config = config
        self.stats = crawler.stats
        self.policy = policy
        self.robots_config = robots
        self.addresses = addresses
        self.provider = RedisProvider.for_crawler(crawler)
        self.router = RedisProvider.for_crawler(crawler).router
        self.pool = BrowserPool(browser, crawler.stats) if browser.executable and _has_playwright() else None
        self.pacer = HostPacer(politeness)
        self.marks: RenderMarks | None = None
        self.robots: RobotsStore | None = None
        #: Static verdicts per host this worker has seen (bounded), until the host is marked.
        self._static_seen: dict[str, int] = {}
        crawler.signals.connect(self._opened, signal=signals.spider_opened)
        crawler.signals.connect(self._closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "RENDER_ENABLED"):
            raise NotConfigured
        frontier = FrontierConfig.for_crawler(crawler)
        browser = BrowserConfig(
            executable=BrowserConfig.find_executable(str(setting(settings, "RENDER_BROWSER_PATH") or "")),
            concurrency=get_int(settings, "RENDER_CONCURRENCY", minimum=1),
            timeout=get_float(settings, "RENDER_TIMEOUT", minimum=1.0),
            js_heap_mb=get_int(settings, "RENDER_JS_HEAP_MB", minimum=16),
            max_dom_bytes=get_int(settings, "RENDER_MAX_DOM_BYTES", minimum=1024),
            max_pages=get_int(settings, "RENDER_BROWSER_MAX_PAGES", minimum=1),
            user_agent=str(settings.get("USER_AGENT") or ""),
        )
        policy = SubrequestPolicy(
            frozenset(str(t) for t in get_list(settings, "RENDER_BLOCKED_RESOURCE_TYPES")),
            frozenset(str(h).lower() for h in get_list(settings, "RENDER_SUBREQUEST_HOSTS")),
            get_int(settings, "RENDER_MAX_SUBREQUESTS", minimum=0),
        )
        return cls(crawler, RenderSettings.from_settings(settings), browser, policy,
                   frontier.politeness(),
                   RobotsConfig.from_settings(settings), AddressPolicy.from_settings(settings))

    async def _opened(self) -> None:
        client = await self.provider.client()
        batch = await self.provider.batched()
        key = self.router.crawl_keys.crawl_key("render")
        self.marks = RenderMarks(batch, key, self.config.cache_size, self.config.cache_seconds)
        self.robots = RobotsStore(batch, self.router, self.robots_config)
        for name in self.config.forced_on:
            await force(client, key, name, Mark.ON)
        for name in self.config.forced_off:
            await force(client, key, name, Mark.OFF)
        if self.pool is None:
            logger.warning("No browser for rendering (chromium not on the PATH and RENDER_BROWSER_PATH unset, or the "
                           "playwright package missing): pages that need JavaScript are detected and counted "
                           "(render/failed/no_browser), not rendered")

    async def _closed(self) -> None:
        if self.pool is not None:
            await self.pool.close()

    async def process_response(self, request: Request, response: Response) -> Response:
        if response.status != 200 or request.method != "GET":
            return response
        meta = request.meta
        if ROBOTS_META in meta or SITEMAP_META in meta or MODULE_META in meta or RENDERED_META in meta:
            return response
        if not is_html(response.headers.get(b"Content-Type")) or not response.body:
            return response
        wish = meta.get(RENDER_META)
        if wish is False:
            return response
        if wish is not True and not await self._host_renders(host_of_url(response.url), response.body):
            return response
        rendered = await self._render(request, response)
        if rendered is not None:
            meta[RENDERED_META] = rendered
        return response

    async def _host_renders(self, host: str, body: bytes) -> bool:
        marks = self.marks
        assert marks is not None, "render middleware used before spider_opened"
        known, mark = marks.cached(host, time.time())  # most pages: no Redis call, no await
        if not known:
            mark = await self.provider.outage.call("render marks", lambda: marks.get(host), self.stats)
        if mark is not None:
            return mark.mark.renders
        detection = needs_browser(body, self.config.min_text, self.config.min_links)
        self.stats.inc_value(f"render/detected/{detection.reason}")
        if detection.needs_js:
            self._static_seen.pop(host, None)
            self.stats.inc_value("render/marked/js")
            logger.info("%s needs JavaScript (%s): its pages are rendered for %.0f s", host, detection.reason,
                        self.config.mark_ttl)
            placed: HostMark = await self.provider.outage.call(
                "render marks", lambda: marks.detected(host, Mark.JS, self.config.mark_ttl), self.stats)
            return placed.mark.renders
        seen = self._static_seen.get(host, 0) + 1
        if seen >= self.config.sample_pages:
            self._static_seen.pop(host, None)
            self.stats.inc_value("render/marked/static")
            await self.provider.outage.call(
                "render marks", lambda: marks.detected(host, Mark.STATIC, self.config.mark_ttl), self.stats)
        else:
            self._static_seen[host] = seen
            if len(self._static_seen) > self.config.cache_size:
                self._static_seen.pop(next(iter(self._static_seen)))
        return False

    async def _render(self, request: Request, response: Response) -> RenderedPage | None:
        if self.pool is None:
            self.stats.inc_value("render/failed/no_browser")
            return None
        url = response.url
        host = host_of_url(url)
        latency = float(request.meta.get("download_latency") or 0.0)
        rules = await self._rules(origin_of(url))
        floor = 0.0
        if rules is not None:
            delay, _ = rules.crawl_delay(self.robots_config.max_crawl_delay)
            floor = delay or 0.0
        # The page's own fetch is the host's previous request.
        self.pacer.fetched(host, time.time(), latency, floor)
        gate = PageGate(url, self.policy, self.pacer, self._rules, self.addresses, _resolve)
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, values in response.headers.items()
                   for v in values]
        try:
            rendered = await self.pool.render(url, response.status, headers, response.body, gate)
        except RenderFailed as exc:
            self.stats.inc_value(f"render/failed/{exc.reason}")
            logger.warning("Could not render %s (%s): %s; keeping the page as fetched", url, exc.reason, exc)
            return None
        except Exception as exc:  # the browser died or could not start: the crawl goes on
            self.stats.inc_value("render/failed/browser_error")
            logger.error("Could not render %s: %r; keeping the page as fetched", url, exc)
            return None
        finally:
            for decision, count in gate.counts.items():
                self.stats.inc_value(f"render/subrequests/{decision.value}", count)
        self.stats.inc_value("render/rendered")
        if rendered.timed_out:
            self.stats.inc_value("render/timeout")
        blocked = sum(n for d, n in gate.counts.items() if not d.allowed)
        logger.debug("Rendered %s in %.2f s (%d requests fetched, %d blocked)", url, rendered.seconds,
                     gate.counts.get(Decision.FETCH, 0), blocked)
        return rendered

    async def _rules(self, origin: str) -> RobotsRules | None:
        """The crawl's robots.txt rules of an origin, if known (the page's own origin's always are)."""
        assert self.robots is not None
        now = time.time()
        rules = self.robots.local(origin, now)
        if rules is not None:
            return rules
        store = self.robots
        record = await self.provider.outage.call("robots.txt cache", lambda: store.get(origin), self.stats)
        if record is None or record.expired(now):
            return None
        return store.use(origin, record)


def _has_playwright() -> bool:
    return importlib.util.find_spec("playwright") is not None


async def _resolve(host: str) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, None)
    return [str(info[4][0]) for info in infos]
