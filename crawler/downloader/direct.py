"""Scrapy's downloader, with a request its slot would start at once started in place.

Scrapy's :class:`~scrapy.core.downloader.Downloader` puts every request in
its slot's queue (a Deferred), then starts it from there in a task of its
own, whose result comes back through that Deferred. Under the frontier a
slot never holds a request back: the frontier already spaces a host's
requests across every worker, and the add-on sets Scrapy's per-slot delay
to 0 and its per-domain concurrency to the worker's (``DOWNLOAD_DELAY``,
``CONCURRENT_REQUESTS_PER_DOMAIN``). So the queue, the Deferred and the task
are work for nothing on every page: :class:`DirectDownloader` starts a
request in the caller's own task when the slot would start it at once (an
empty queue, a free transfer slot, no delay), and leaves everything else to
Scrapy's queue: a ``DOWNLOAD_SLOTS`` entry with a delay, a request of a slot
that is full. The slot's bookkeeping, the order of the signals
(``request_reached_downloader``, ``response_downloaded``,
``request_left_downloader``) and the errors a caller sees are Scrapy's; a
signal nothing listens to is not sent (three signals a page that no shipped
component listens to). ``fetch`` goes to the middlewares without a Twisted
generator of its own.

``DOWNLOADER`` names it (the add-on's setting); a project's own downloader
class wins.
"""

from __future__ import annotations

import asyncio
from time import monotonic
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.core.downloader import Downloader
from scrapy.utils.defer import deferred_from_coro

from crawler.scrapy_internals import has_receivers

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.http import Response
    from twisted.internet.defer import Deferred


class DirectDownloader(Downloader):
    def fetch(self, request: Request, spider: Spider | None = None) -> Deferred[Any]:
        """As Scrapy's: the request counts as active from this call until its answer or error."""
        self.active.add(request)
        fetched: Deferred[Any] = deferred_from_coro(self.middleware.download_async(self._enqueue_request, request))
        return fetched.addBoth(self._fetched, request)

    def _fetched(self, result: Any, request: Request) -> Any:
        self.active.discard(request)
        return result

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
