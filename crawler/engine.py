"""Scrapy's engine, with each request's download, callback and release in one task.

Scrapy's :class:`~scrapy.core.engine.ExecutionEngine` carries a request from
the scheduler to the downloader, the scraper and back through a chain of
Twisted Deferreds: two Twisted generators (``_download``,
``_handle_downloader_output``), a third in the scraper (``enqueue_scrape``)
with a Deferred per response in its queue, six callbacks, a task for the
download and another for the callback. :class:`DirectEngine` takes each
request it starts through the same steps in one coroutine, one task per
request: the downloader's middlewares and handler, the ``response_received``
signal, the scraper's spider middlewares, callback and item pipelines, then
the request's release from the engine (where the frontier acks its lease)
and the engine's next look for work. With ``CONCURRENT_ITEMS = 1`` (the
add-on's) the callback's output is taken in that task too, one object after
the other (:class:`SequentialScraper`), instead of through a queue, a filling
task and a worker task per response. The bookkeeping Scrapy's back-pressure
reads is kept as Scrapy keeps it: the request counts as in progress and as
active in the downloader from the moment it leaves the scheduler, a response
counts in the scraper's active size while its callback runs. The errors
logged are Scrapy's, with its messages. Only with the crawler's
:class:`~crawler.downloader.direct.DirectDownloader` (else Scrapy's engine
stays as it is); ``TUNING_ONE_TASK_PER_REQUEST`` turns it off, with the lean
spider-middleware manager (:mod:`crawler.spidermw`) set with it. The private
parts of Scrapy it uses are listed in :mod:`crawler.scrapy_internals`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from scrapy import Request, signals
from scrapy.core.engine import ExecutionEngine
from scrapy.core.scraper import Scraper
from scrapy.http import Response
from scrapy.utils.log import logformatter_adapter
from twisted.python.failure import Failure

from crawler.downloader.direct import DirectDownloader
from crawler.scrapy_internals import aiter_errback, iter_errback
from crawler.spidermw import use_lean_spidermw

if TYPE_CHECKING:
    from collections.abc import Coroutine, Iterable

logger = logging.getLogger(__name__)


class DirectEngine(ExecutionEngine):
    """See the module's docstring. Set on Scrapy's engine once it is built (``__class__``)."""

    def _start_scheduled_request(self) -> bool:
        slot = self._slot
        assert slot is not None
        request = slot.scheduler.next_request()
        if request is None:
            self.signals.send_catch_log(signals.scheduler_empty)
            return False
        # As Scrapy: in progress and active in the downloader at once (needs_backout() reads both).
        # The downloader is a DirectDownloader: use_direct_engine() makes no DirectEngine otherwise.
        slot.add_request(request)
        download = self.downloader.fetch_async(request)  # type: ignore[attr-defined]
        asyncio.get_running_loop().create_task(self._carry(request, download))
        return True

    async def _carry(self, request: Request, download: Coroutine[Any, Any, Response | Request]) -> None:
        """One request from the downloader to its release (Scrapy's Deferred chain, in order)."""
        slot = self._slot
        assert slot is not None
        try:
            try:
                result: Response | Request | Failure = await self._downloaded(request, download)
            except Exception:
                result = Failure()  # type: ignore[no-untyped-call]
            if isinstance(result, Request):
                # A downloader middleware's new request (a redirect, a retry): back to the scheduler.
                self.crawl(result)
            else:
                await self._scrape(result, request)
        except Exception:
            logger.info("Error while handling downloader output", exc_info=True, extra={"spider": self.spider})
        finally:
            try:
                slot.remove_request(request)
            except Exception:
                logger.info("Error while removing request from slot", exc_info=True, extra={"spider": self.spider})
            slot.nextcall.schedule()

    async def _downloaded(self, request: Request, download: Coroutine[Any, Any, Response | Request],
                          ) -> Response | Request:
        """Scrapy's ``_download`` after its start: the answer checked, logged and signalled."""
        try:
            result = await download
            if isinstance(result, Response):
                if result.request is None:
                    result.request = request
                assert self.spider is not None
                logkws = self.logformatter.crawled(result.request, result, self.spider)
                if logkws is not None:
                    logger.log(*logformatter_adapter(logkws), extra={"spider": self.spider})
                self.signals.send_catch_log(signal=signals.response_received, response=result,
                                            request=result.request, spider=self.spider)
            elif not isinstance(result, Request):
                raise TypeError(f"Incorrect type: expected Response or Request, got {type(result)}: {result!r}")
            return result
        finally:
            assert self._slot is not None
            self._slot.nextcall.schedule()

    async def _scrape(self, result: Response | Failure, request: Request) -> None:
        """Scrapy's ``enqueue_scrape`` without its queue: the response (or failure) counts in the scraper's
        active size while its callback (or errback) and outputs go through."""
        scraper = self.scraper
        scraper_slot = scraper.slot
        assert scraper_slot is not None
        size = max(len(result.body), scraper_slot.MIN_RESPONSE_SIZE) if isinstance(result, Response) \
            else scraper_slot.MIN_RESPONSE_SIZE
        scraper_slot.active_size += size
        scraper_slot.active.add(request)
        try:
            await scraper._scrape(result, request)
        except Exception:
            logger.error("Scraper bug processing %(request)s", {"request": request}, exc_info=True,
                         extra={"spider": self.spider})
        finally:
            scraper_slot.finish_response(result, request)
            scraper._check_if_closing()


class SequentialScraper(Scraper):
    """Scrapy's scraper taking a callback's output one object after the other in the callback's task when
    ``CONCURRENT_ITEMS`` is 1 (Scrapy's way otherwise). Scrapy's way for any number is a queue, a task
    filling it (which reads up to two objects ahead) and one worker task per ``CONCURRENT_ITEMS``, made
    again for each response; here nothing is read ahead. Errors are handled as Scrapy's: an error while
    iterating goes to ``handle_spider_error``, an item's to the item's own handling."""

    async def handle_spider_output_async(self, result: Iterable[Any] | AsyncIterator[Any], request: Request,
                                         response: Response | Failure) -> None:
        if self.concurrent_items != 1:
            await super().handle_spider_output_async(result, request, response)
            return
        process = self._process_spidermw_output_async
        if isinstance(result, AsyncIterator):
            async for output in aiter_errback(result, self.handle_spider_error, request, response):
                await process(output, response)
        else:
            for output in iter_errback(result, self.handle_spider_error, request, response):
                await process(output, response)


def use_direct_engine(engine: Any) -> bool:
    """Make Scrapy's engine a :class:`DirectEngine` when its downloader is a ``DirectDownloader``, its
    scraper a :class:`SequentialScraper` and the scraper's spider-middleware manager lean
    (:mod:`crawler.spidermw`); whether it is one (a subclass of Scrapy's engine, or another downloader:
    left as they are; a subclass of Scrapy's scraper or manager is left as it is)."""
    if type(engine) is ExecutionEngine and isinstance(getattr(engine, "downloader", None), DirectDownloader):
        engine.__class__ = DirectEngine
        if type(engine.scraper) is Scraper:
            engine.scraper.__class__ = SequentialScraper
        use_lean_spidermw(engine.scraper.spidermw)
    return isinstance(engine, DirectEngine)
