"""Rendering pages in headless Chromium through Playwright (mechanism; the policy is in subrequests.py).

One browser per process, started at the first page that needs it (an
ordinary crawl never starts one: ``render/browser_launches`` stays absent),
Debian's ``chromium`` by default (``RENDER_BROWSER_PATH``; nothing is ever
downloaded). Pages are rendered in *tabs* (a browser context with one page),
at most one per concurrent page, reused from page to page: a new renderer
process per page cost about 3x the CPU (``benchmarks/render.py``). Between pages a
tab shows ``about:blank`` and its cookies are cleared; a tab is closed after
50 pages, after a page that timed out or crashed, and with its browser.
Every page gets:

* at most ``RENDER_CONCURRENCY`` pages at once;
* ``RENDER_TIMEOUT`` seconds for the whole page: a page that never settles
  gives the DOM it has at the deadline (``render/timeout``);
* the JavaScript heap capped (``RENDER_JS_HEAP_MB``): a script that allocates
  without end crashes its renderer (``render/crashed``), not the crawl;
* the DOM kept only up to ``RENDER_MAX_DOM_BYTES`` (``render/dom_too_large``);
* dialogs dismissed, popups closed, downloads refused, service workers blocked;
* the browser restarted after ``RENDER_BROWSER_MAX_PAGES`` pages and whenever
  it dies (``render/browser_restarts``).

Every request the page makes is routed through :class:`SubrequestGate`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from crawler.exceptions import ConfigurationError
from crawler.render.subrequests import Decision

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route
    from playwright.async_api import Request as BrowserRequest

logger = logging.getLogger(__name__)

#: Chromium flags for a crawler: no background traffic of its own, no sandbox as root, no GPU.
BASE_ARGS = ("--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-dev-shm-usage",
             "--disable-extensions", "--mute-audio", "--disable-features=Translate,MediaRouter")


@dataclass(frozen=True)
class BrowserConfig:
    executable: str
    concurrency: int = 2
    timeout: float = 30.0
    js_heap_mb: int = 256
    max_dom_bytes: int = 5_000_000
    max_pages: int = 200
    user_agent: str = ""

    @staticmethod
    def find_executable(configured: str) -> str:
        """``RENDER_BROWSER_PATH``, else chromium on the PATH; a clear error names the setting."""
        if configured:
            if not os.access(configured, os.X_OK):
                raise ConfigurationError("RENDER_BROWSER_PATH", f"{configured!r} is not an executable")
            return configured
        for name in ("chromium", "chromium-browser", "google-chrome"):
            found = shutil.which(name)
            if found:
                return found
        return ""


@dataclass
class RenderedPage:
    """The DOM after rendering, and what it took."""

    html: bytes
    seconds: float
    timed_out: bool = False


class RenderFailed(Exception):
    """The page could not be rendered (the crawl keeps its plain response)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Gate(Protocol):
    """What a rendered page may ask for (:class:`crawler.render.gate.PageGate`)."""

    async def decide(self, url: str, resource_type: str, navigation: bool) -> Decision: ...

    def fetching(self, url: str) -> AbstractAsyncContextManager[None]:
        """Held around one fetch: the host's slot, after its politeness delay."""
        ...


#: Pages a tab renders before it is closed and a fresh one opened (its memory and state stay bounded).
TAB_MAX_PAGES = 50
#: Seconds a discarded tab's page is given to go blank before its context is closed anyway
#: (a page in an endless loop never does; it makes no requests either).
DISCARD_BLANK_TIMEOUT = 3.0


@dataclass
class _Render:
    """What the tab is rendering now: the page's response and the gate of its requests."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes
    gate: Gate


class _Tab:
    """A browser context with one page, reused from page to page (a new renderer per page costs about 3x the CPU).

    Its routing is installed once and serves whatever page it is rendering now;
    between pages it shows ``about:blank`` and its cookies are cleared.
    """

    def __init__(self, browser: Browser, context: BrowserContext, timeout: float) -> None:
        self.browser = browser
        self.context = context
        self.timeout_ms = timeout * 1000
        self.page: Page = None  # type: ignore[assignment]  # set right after the context
        self.current: _Render | None = None
        self.used = 0
        self.crashed = asyncio.Event()

    async def route(self, route: Route, request: BrowserRequest) -> None:
        from playwright.async_api import Error as PlaywrightError

        current = self.current
        if current is None:  # a request of a page no longer rendered
            with contextlib.suppress(PlaywrightError):
                await route.abort("blockedbyclient")
            return
        try:
            navigation = request.is_navigation_request() and request.frame.parent_frame is None
        except PlaywrightError:
            navigation = True  # a popup's first navigation: its frame is not there yet
        try:
            decision = await current.gate.decide(request.url, request.resource_type, navigation)
        except Exception as exc:  # a check that failed (Redis, DNS): not fetched
            logger.debug("Sub-request %s of %s not checked: %r", request.url, current.url, exc)
            decision = Decision.BLOCKED_HOST
        try:
            if decision is Decision.DOCUMENT:
                await route.fulfill(status=current.status, headers=current.headers, body=current.body)
            elif decision is Decision.FETCH:
                async with current.gate.fetching(request.url):
                    answer = await route.fetch(max_redirects=0, timeout=self.timeout_ms)
                    payload = await answer.body()
                await route.fulfill(response=answer, body=payload)
            else:
                await route.abort("blockedbyclient")
        except PlaywrightError as exc:
            # The page went away meanwhile, or the fetch failed.
            logger.debug("Sub-request %s of %s: %s", request.url, current.url, exc)
            with contextlib.suppress(PlaywrightError):
                await route.abort("failed")


class BrowserPool:
    """A lazily started Chromium, a bounded number of pages at once, each in a reused tab."""

    def __init__(self, config: BrowserConfig, stats: Any) -> None:
        self.config = config
        self.stats = stats
        self._semaphore = asyncio.Semaphore(config.concurrency)
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._pages = 0
        self._in_flight: dict[Browser, int] = {}
        self._retired: set[Browser] = set()
        self._launching: asyncio.Lock | None = None
        #: Closings under way (a reference keeps each task alive until it ends).
        self._tasks: set[asyncio.Future[None]] = set()
        #: Tabs that rendered a page well, ready for the next (at most RENDER_CONCURRENCY).
        self._idle: list[_Tab] = []

    async def _start_playwright(self) -> Playwright:
        if self._playwright is None:
            from playwright.async_api import async_playwright

            self._playwright = await async_playwright().start()
        return self._playwright

    async def _launch(self) -> Browser:
        playwright = await self._start_playwright()
        args = [*BASE_ARGS, f"--js-flags=--max-old-space-size={self.config.js_heap_mb}"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
        browser = await playwright.chromium.launch(executable_path=self.config.executable, headless=True, args=args)
        self.stats.inc_value("render/browser_launches")
        logger.info("Browser started for rendering: %s (RENDER_CONCURRENCY %d)", self.config.executable,
                    self.config.concurrency)
        self._pages = 0
        return browser

    async def _browser_for_page(self) -> Browser:
        if self._launching is None:
            self._launching = asyncio.Lock()
        async with self._launching:
            browser = self._browser
            if browser is not None and (not browser.is_connected() or self._pages >= self.config.max_pages):
                self.stats.inc_value("render/browser_restarts")
                self._retire(browser)
                browser = None
            if browser is None:
                browser = self._browser = await self._launch()
            self._pages += 1
            self._in_flight[browser] = self._in_flight.get(browser, 0) + 1
            return browser

    def _retire(self, browser: Browser) -> None:
        self._retired.add(browser)
        if self._browser is browser:
            self._browser = None
        if not self._in_flight.get(browser):
            self._spawn(self._close(browser))

    def _done_with(self, browser: Browser) -> None:
        left = self._in_flight.get(browser, 1) - 1
        self._in_flight[browser] = left
        if left <= 0 and browser in self._retired:
            self._spawn(self._close(browser))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close(self, browser: Browser) -> None:
        self._retired.discard(browser)
        self._in_flight.pop(browser, None)
        try:
            await browser.close()
        except Exception as exc:  # already dead
            logger.debug("Closing a retired browser: %s", exc)

    async def render(self, url: str, status: int, headers: list[tuple[str, str]], body: bytes,
                     gate: Gate) -> RenderedPage:
        """Render the page at ``url`` whose response the crawler has (status, headers, body)."""
        async with self._semaphore:
            browser = await self._browser_for_page()
            tab: _Tab | None = None
            healthy = False
            try:
                tab = await self._tab(browser)
                rendered = await self._render(tab, url, status, headers, body, gate)
                healthy = not rendered.timed_out
                return rendered
            finally:
                if tab is not None:
                    await self._put_back(tab, healthy)
                self._done_with(browser)

    async def _tab(self, browser: Browser) -> _Tab:
        """An idle tab of ``browser``, or a new one (a context with one page, its routing installed once)."""
        while self._idle:
            tab = self._idle.pop()
            if tab.browser is browser and not tab.crashed.is_set():
                return tab
            # Blanked when it was put back (or its renderer is gone): nothing left to stop.
            self._spawn(_quietly(asyncio.wait_for(tab.context.close(), timeout=10)))
        context = await browser.new_context(
            user_agent=self.config.user_agent or None, accept_downloads=False, service_workers="block",
            java_script_enabled=True,
        )
        tab = _Tab(browser, context, self.config.timeout)
        await context.route("**/*", tab.route)
        tab.page = await context.new_page()
        tab.page.on("popup", self._close_popup)
        tab.page.on("dialog", lambda dialog: self._spawn(_quietly(dialog.dismiss())))
        tab.page.on("crash", lambda _page: tab.crashed.set())
        return tab

    async def _put_back(self, tab: _Tab, healthy: bool) -> None:
        """Keep a tab that behaved for the next page (blanked: the last page's scripts stop), else close it."""
        from playwright.async_api import Error as PlaywrightError

        tab.current = None
        tab.used += 1
        keep = healthy and not tab.crashed.is_set() and tab.used < TAB_MAX_PAGES and tab.browser is self._browser
        if keep:
            try:
                await tab.page.goto("about:blank", timeout=5000)
                await tab.context.clear_cookies()
            except (TimeoutError, PlaywrightError):
                keep = False
        if keep:
            self._idle.append(tab)
        else:
            self._spawn(_discard(tab))

    async def _render(self, tab: _Tab, url: str, status: int, headers: list[tuple[str, str]], body: bytes,
                      gate: Gate) -> RenderedPage:
        from playwright.async_api import Error as PlaywrightError

        started = time.monotonic()
        tab.current = _Render(url, status, _document_headers(headers), body, gate)
        page = tab.page
        tab.crashed.clear()
        deadline = started + self.config.timeout
        timed_out = False
        try:
            await page.goto(url, wait_until="load", timeout=self.config.timeout * 1000)
            left = deadline - time.monotonic()
            if left > 0:
                try:
                    await page.wait_for_load_state("networkidle", timeout=left * 1000)
                except PlaywrightError:
                    timed_out = True
        except PlaywrightError as exc:
            if tab.crashed.is_set() or "crash" in str(exc).lower():
                raise RenderFailed("crashed", f"the page's renderer crashed: {exc}") from None
            timed_out = True
        if tab.crashed.is_set():
            raise RenderFailed("crashed", "the page's renderer crashed")
        try:
            html = await asyncio.wait_for(page.content(), timeout=max(2.0, deadline - time.monotonic()))
        except (TimeoutError, PlaywrightError) as exc:
            raise RenderFailed("no_dom", f"the page gave no DOM in time: {exc}") from None
        data = html.encode("utf-8", "surrogatepass")
        if len(data) > self.config.max_dom_bytes:
            raise RenderFailed("dom_too_large", f"the rendered DOM has {len(data)} bytes, over RENDER_MAX_DOM_BYTES")
        return RenderedPage(data, time.monotonic() - started, timed_out)

    def _close_popup(self, popup: Any) -> None:
        """A page opened by the page (window.open, target=_blank): closed at once."""
        self.stats.inc_value("render/popups_closed")
        self._spawn(_quietly(popup.close()))

    async def close(self) -> None:
        for tab in self._idle:
            await _quietly(tab.context.close())
        self._idle.clear()
        browsers = [b for b in (self._browser, *self._retired) if b is not None]
        self._browser = None
        for browser in browsers:
            await self._close(browser)
        if self._playwright is not None:
            try:
                await self._playwright.stop()
            except Exception as exc:
                logger.debug("Stopping Playwright: %s", exc)
            self._playwright = None


async def _discard(tab: _Tab) -> None:
    """Close a tab whose page may still be running (it timed out, crashed or failed, or went past its
    page budget).

    The page is blanked first, its scripts stopped, while the tab's routing
    still aborts what it asks for (``tab.current`` is None). Closing the
    context at once would let a request through: while a context closes,
    Playwright leaves the requests its page makes meanwhile unanswered, and
    Chromium lets them go when the context goes, past the sub-request gate.
    """
    await _quietly(tab.page.goto("about:blank", timeout=DISCARD_BLANK_TIMEOUT * 1000))
    await _quietly(asyncio.wait_for(tab.context.close(), timeout=10))


async def _quietly(coroutine: Any) -> None:
    """Await a browser call whose failure does not matter (its page or context is gone)."""
    try:
        await coroutine
    except Exception as exc:
        logger.debug("Browser call after its page went away: %s", exc)


#: Headers that describe the bytes as they travelled, not the decoded body given to the browser.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})


def _document_headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in _WIRE_HEADERS:
            continue
        out[key] = f"{out[key]}, {value}" if key in out and key != "set-cookie" else value
    return out
