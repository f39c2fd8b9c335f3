"""Scrapy's downloader, with a request its slot would start at once started in place.

Scrapy's :class:`~scrapy.core.downloader.Downloader` puts every request in its
slot's queue (a Deferred), then starts it from there in a task of its own.
Under the frontier a slot never holds a request back: the frontier spaces a
host's requests across every worker, and the add-on sets Scrapy's per-slot
delay to 0 and its per-domain concurrency to the worker's. So
:class:`DirectDownloader` starts a request in the caller's own task when the
slot would start it at once (an empty queue, a free transfer slot, no delay)
and leaves the rest to Scrapy's queue (a ``DOWNLOAD_SLOTS`` delay, a full
slot). The slot's bookkeeping, the order of the signals and the errors a
caller sees are Scrapy's; a signal nothing listens to is not sent (three a
page that no shipped component listens to); ``fetch`` has no Twisted
generator of its own.

Its middleware manager (:class:`DirectMiddlewareManager`) is Scrapy's with
lean loops: a method that answers at once (``None``, a response, a request:
every one the crawler ships) is taken at its word, where Scrapy wraps each
answer in a coroutine, checks it against the ``Awaitable`` ABC and formats
the method's name for a warning. An awaitable, a Deferred or a wrong answer
goes Scrapy's way, with its warnings and errors. ``DOWNLOADER`` names it (the
add-on's setting; a project's own wins). Measured in ``docs/benchmarks.md``
("The worker's work per page, counted").
"""

from __future__ import annotations

import asyncio
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.core.downloader import Downloader
from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
from scrapy.http import Response
from scrapy.utils.defer import deferred_from_coro, ensure_awaitable
from scrapy.utils.python import global_object_name

from crawler.scrapy_internals import has_receivers, raise_invalid_output

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from twisted.internet.defer import Deferred


class DirectMiddlewareManager(DownloaderMiddlewareManager):
    """Scrapy's downloader middleware manager, taking the answer of a middleware method that returns at once
    (``None``, a response, a request) as it is, instead of wrapping it in a coroutine to await; an
    awaitable, a Deferred or a wrong type goes Scrapy's way (its warnings, its errors)."""

    async def _process_request(
        self, request: Request, download_func: Callable[[Request], Coroutine[Any, Any, Response]],
    ) -> Response | Request:
        needs_spider = self._mw_methods_requiring_spider
        for method in self.methods["process_request"]:
            assert method is not None
            answer = method(request=request, spider=self._spider) if method in needs_spider else method(request=request)
            if answer is None:
                continue
            if not isinstance(answer, (Response, Request)):
                answer = await ensure_awaitable(answer, _warn=global_object_name(method))
                if answer is None:
                    continue
                if not isinstance(answer, (Response, Request)):
                    raise_invalid_output(f"Middleware {method.__qualname__} must return None, Response or "
                                         f"Request, got {answer.__class__.__name__}")
            return answer
        return await download_func(request)

    async def _process_response(self, response: Response | Request, request: Request) -> Response | Request:
        if response is None:
            raise TypeError("Received None in process_response")
        if isinstance(response, Request):
            return response
        needs_spider = self._mw_methods_requiring_spider
        for method in self.methods["process_response"]:
            assert method is not None
            if method in needs_spider:
                response = method(request=request, response=response, spider=self._spider)
            else:
                response = method(request=request, response=response)
            if isinstance(response, Response):
                continue
            if not isinstance(response, Request):
                response = await ensure_awaitable(response, _warn=global_object_name(method))
                if isinstance(response, Response):
                    continue
                if not isinstance(response, Request):
                    raise_invalid_output(f"Middleware {method.__qualname__} must return Response or Request, "
                                         f"got {type(response)}")
            return response
        return response


class DirectDownloader(Downloader):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        # The same manager, its middlewares built once (by Scrapy), with the lean loops above.
        self.middleware.__class__ = DirectMiddlewareManager

    def fetch(self, request: Request, spider: Spider | None = None) -> Deferred[Any]:
        """As Scrapy's: the request counts as active from this call until its answer or error."""
        return deferred_from_coro(self.fetch_async(request))

    def fetch_async(self, request: Request) -> Coroutine[Any, Any, Response | Request]:
        """:meth:`fetch` as a coroutine to await (:class:`crawler.engine.DirectEngine`'s): the request counts
        as active from this call, not from the coroutine's start."""
        self.active.add(request)
        return self._fetch(request)

    async def _fetch(self, request: Request) -> Response | Request:
        try:
            return await self.middleware.download_async(self._enqueue_request, request)
        finally:
            self.active.discard(request)

    async def _enqueue_request(self, request: Request) -> Response:
        key, slot = self._get_slot(request)
        if slot.queue or slot.free_transfer_slots() <= 0 or slot.download_delay():
            return await super()._enqueue_request(request)
        request.meta[self.DOWNLOAD_SLOT] = key
        slot.active.add(request)
        self._signal(signals.request_reached_downloader, request=request)
        slot.lastseen = monotonic()
        slot.transferring.add(request)
        try:
            response: Response = await self.handlers.download_request_async(request)
            self._signal(signals.response_downloaded, response=response, request=request)
            return response
        except Exception:
            # As Scrapy does: let the loop go through its ready readers and writers first.
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            raise
        finally:
            slot.transferring.remove(request)
            self._process_queue(slot)
            self._signal(signals.request_left_downloader, request=request)
            slot.active.remove(request)

    def _signal(self, signal: object, **kwargs: Any) -> None:
        if has_receivers(self.signals.sender, signal):
            self.signals.send_catch_log(signal=signal, spider=self.crawler.spider, **kwargs)
