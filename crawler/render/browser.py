"""Rendering pages in headless Chromium through Playwright (mechanism; the policy is in subrequests.py).

One browser per process, started at the first page that needs it (an
ordinary crawl never starts one: ``render/browser_launches`` stays absent),
Debian's ``chromium`` by default (``RENDER_BROWSER_PATH``; nothing is ever
downloaded). Each page gets a fresh browser context (no cookies or storage
shared between pages), with:

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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from crawler.exceptions import ConfigurationError
from crawler.render.subrequests import Decision

if TYPE_CHECKING:
    from playwright.async_api import Browser, Playwright, Route
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
    #: Requests the page made, by decision.
    subrequests: dict[Decision, int] = field(default_factory=dict)
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


class BrowserPool:
    """A lazily started Chromium, a bounded number of pages at once."""

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

    @property
    def started(self) -> bool:
        return self._playwright is not None

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
            try:
                return await self._render(browser, url, status, headers, body, gate)
            finally:
                self._done_with(browser)

    async def _render(self, browser: Browser, url: str, status: int, headers: list[tuple[str, str]], body: bytes,
                      gate: Gate) -> RenderedPage:
        from playwright.async_api import Error as PlaywrightError

        started = time.monotonic()
        counts: dict[Decision, int] = {}
        document_headers = _document_headers(headers)

        async def route(route: Route, request: BrowserRequest) -> None:
            try:
                navigation = request.is_navigation_request() and request.frame.parent_frame is None
            except PlaywrightError:
                navigation = True  # a popup's first navigation: its frame is not there yet
            try:
                decision = await gate.decide(request.url, request.resource_type, navigation)
            except Exception as exc:  # a check that failed (Redis, DNS): not fetched
                logger.debug("Sub-request %s of %s not checked: %r", request.url, url, exc)
                decision = Decision.BLOCKED_HOST
            counts[decision] = counts.get(decision, 0) + 1
            try:
                if decision is Decision.DOCUMENT:
                    await route.fulfill(status=status, headers=document_headers, body=body)
                elif decision is Decision.FETCH:
                    async with gate.fetching(request.url):
                        answer = await route.fetch(max_redirects=0, timeout=self.config.timeout * 1000)
                        payload = await answer.body()
                    await route.fulfill(response=answer, body=payload)
                else:
                    await route.abort("blockedbyclient")
            except PlaywrightError as exc:
                # The page or its context went away meanwhile, or the fetch failed.
                logger.debug("Sub-request %s of %s: %s", request.url, url, exc)
                with contextlib.suppress(PlaywrightError):
                    await route.abort("failed")

        context = await browser.new_context(
            user_agent=self.config.user_agent or None, accept_downloads=False, service_workers="block",
            java_script_enabled=True,
        )
        timed_out = False
        try:
            await context.route("**/*", route)
            page = await context.new_page()
            page.on("popup", self._close_popup)
            page.on("dialog", lambda dialog: self._spawn(_quietly(dialog.dismiss())))
            crashed = asyncio.Event()
            page.on("crash", lambda _page: crashed.set())
            deadline = started + self.config.timeout
            try:
                await page.goto(url, wait_until="load", timeout=self.config.timeout * 1000)
                left = deadline - time.monotonic()
                if left > 0:
                    try:
                        await page.wait_for_load_state("networkidle", timeout=left * 1000)
                    except PlaywrightError:
                        timed_out = True
            except PlaywrightError as exc:
                if crashed.is_set() or "crash" in str(exc).lower():
                    raise RenderFailed("crashed", f"the page's renderer crashed: {exc}") from None
                timed_out = True
            if crashed.is_set():
                raise RenderFailed("crashed", "the page's renderer crashed")
            try:
                html = await asyncio.wait_for(page.content(), timeout=max(2.0, deadline - time.monotonic()))
            except (TimeoutError, PlaywrightError) as exc:
                raise RenderFailed("no_dom", f"the page gave no DOM in time: {exc}") from None
        finally:
            try:
                await asyncio.wait_for(context.close(), timeout=10)
            except (TimeoutError, PlaywrightError) as exc:
                logger.debug("Closing the context of %s: %s", url, exc)
        data = html.encode("utf-8", "surrogatepass")
        if len(data) > self.config.max_dom_bytes:
            raise RenderFailed("dom_too_large", f"the rendered DOM has {len(data)} bytes, over RENDER_MAX_DOM_BYTES")
        return RenderedPage(data, time.monotonic() - started, counts, timed_out)

    def _close_popup(self, popup: Any) -> None:
        """A page opened by the page (window.open, target=_blank): closed at once."""
        self.stats.inc_value("render/popups_closed")
        self._spawn(_quietly(popup.close()))

    async def close(self) -> None:
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
