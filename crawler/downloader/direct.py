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
that is full. The signals (``request_reached_downloader``,
``response_downloaded``, ``request_left_downloader``), the slot's
bookkeeping and the errors a caller sees are Scrapy's, unchanged.

``DOWNLOADER`` names it (the add-on's setting); a project's own downloader
class wins.
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.core.downloader import Downloader

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response


class DirectDownloader(Downloader):
    async def _enqueue_request(self, request: Request) -> Response:
        key, slot = self._get_slot(request)
        if slot.queue or slot.free_transfer_slots() <= 0 or slot.download_delay():
            return await super()._enqueue_request(request)
        request.meta[self.DOWNLOAD_SLOT] = key
        slot.active.add(request)
        self.signals.send_catch_log(
            signal=signals.request_reached_downloader, request=request, spider=self.crawler.spider,
        )
        try:
            slot.lastseen = monotonic()
            return await self._download(slot, request)
        finally:
            slot.active.remove(request)
