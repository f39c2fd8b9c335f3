"""Every private Scrapy (and PyDispatcher) API the crawler uses, in one place.

Scrapy offers no public way to do these; each is pinned to the Scrapy version
in ``requirements.txt``, and ``tests/test_units.py`` checks each one against
it, so an upgrade that moves one fails a unit test, not a crawl:

* the engine's slot (:func:`engine_slot`): its requests in progress, watched
  so that the frontier scheduler hears of each one the engine is done with
  (and acks its lease), and its "look for work now" call; whether the engine
  stays open when idle (:func:`engine_is_interactive`: ``scrapy shell``);
* Scrapy's streaming download-handler base class, which the crawler's
  handler extends (:mod:`crawler.downloader.handler`), Scrapy's TLS context
  and TLS debug log, and its download-handler helpers (stop-download checks,
  data-loss and warn-size messages, building a response: :func:`make_response`);
* whether any receiver listens to a signal (PyDispatcher's registry and its ``connections`` table), so
  the handler and the downloader send a signal only when someone listens;
* the downloader's slots, which :mod:`crawler.downloader.direct` subclasses
  (``Downloader._enqueue_request``, ``_get_slot``, ``_process_queue``, a
  slot's ``queue``, ``active``, ``transferring``, ``lastseen``,
  ``free_transfer_slots()``, ``download_delay()``), its middleware manager's loops
  (``_process_request``, ``_process_response``; ``methods``, ``_spider``, ``_mw_methods_requiring_spider``,
  the item pipeline manager's too: :mod:`crawler.pipelines.manager`; :func:`raise_invalid_output`);
* the engine's and scraper's handling of one request, which
  :mod:`crawler.engine` runs in one task (``ExecutionEngine._start_scheduled_request``,
  which it overrides, ``_slot.add_request``, ``remove_request``, ``nextcall``,
  ``scheduler``; the scraper's ``_scrape``, ``_check_if_closing``,
  ``handle_spider_output_async`` (overridden), ``_process_spidermw_output_async``,
  ``concurrent_items``, its slot's ``active``, ``active_size``, ``MIN_RESPONSE_SIZE``,
  ``finish_response()``; ``iter_errback``, ``aiter_errback``); the spider-middleware manager's output
  chaining, which :mod:`crawler.spidermw` overrides (checked by ``tests/test_spidermw.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NoReturn

from pydispatch.dispatcher import Any as DispatchAny
from pydispatch.dispatcher import connections, getAllReceivers, liveReceivers
from scrapy import responsetypes
from scrapy.core.downloader.handlers._base_streaming import BaseStreamingDownloadHandler
from scrapy.core.downloader.handlers._base_streaming import _BaseResponseArgs as BaseResponseArgs
from scrapy.exceptions import _InvalidOutput
from scrapy.utils._download_handlers import check_stop_download, get_dataloss_msg, get_warnsize_msg
from scrapy.utils.defer import aiter_errback, iter_errback
from scrapy.utils.ssl import _log_sslobj_debug_info as log_tls_session
from scrapy.utils.ssl import _make_ssl_context as make_ssl_context

from crawler.exceptions import ConfigurationError

if TYPE_CHECKING:
    from ipaddress import IPv4Address, IPv6Address

    from scrapy.core.engine import ExecutionEngine
    from scrapy.exceptions import StopDownload
    from scrapy.http import Headers, Response

#: PyDispatcher's key of its ``Any`` sender in ``connections``.
_ANY_SENDER = id(DispatchAny)

__all__ = [
    "BaseResponseArgs",
    "BaseStreamingDownloadHandler",
    "aiter_errback",
    "check_stop_download",
    "engine_is_interactive",
    "engine_slot",
    "get_dataloss_msg",
    "get_warnsize_msg",
    "has_receivers",
    "iter_errback",
    "log_tls_session",
    "make_response",
    "make_ssl_context",
]


class _WatchedRequests(set[Any]):
    """The engine's set of requests in progress, telling ``on_removed`` of each one the engine is done with
    (the engine removes a request once its download, callback and outputs are through)."""

    __slots__ = ("on_removed",)

    def __init__(self, members: Iterable[Any], on_removed: Callable[[Any], None]) -> None:
        super().__init__(members)
        self.on_removed = on_removed

    def remove(self, request: Any) -> None:
        super().remove(request)
        self.on_removed(request)

    def discard(self, request: Any) -> None:
        if request in self:
            self.remove(request)


def engine_slot(engine: ExecutionEngine | None, on_finished: Callable[[Any], None]) -> Any:
    """Watch the engine's requests in progress (``on_finished(request)`` when the engine is done with
    one); the engine's ``nextcall`` (``schedule()`` asks it to look for work)."""
    slot: Any = getattr(engine, "_slot", None)
    inprogress = getattr(slot, "inprogress", None)
    if not isinstance(inprogress, set) or not hasattr(slot, "nextcall"):
        raise ConfigurationError(
            "SCHEDULER",
            "this Scrapy version's engine has no slot with a set 'inprogress' and 'nextcall'; "
            "the frontier scheduler needs the Scrapy version pinned in requirements.txt",
        )
    slot.inprogress = _WatchedRequests(inprogress, on_finished)
    return slot.nextcall


def engine_is_interactive(engine: ExecutionEngine | None) -> bool:
    """Whether the engine was opened to stay open when idle (``scrapy shell``: ``close_if_idle=False``)."""
    slot = getattr(engine, "_slot", None)
    return getattr(slot, "close_if_idle", True) is False


def has_receivers(sender: Any, signal: Any) -> bool:
    """Whether anything listens to ``signal`` from ``sender`` (no signal is built for nobody).

    PyDispatcher's tables first (``connections``: by sender id, then signal; ``Any`` for either):
    no list, no receiver, without its generators; a list, the exact answer (its receivers alive)."""
    for table in (connections.get(id(sender)), connections.get(_ANY_SENDER)):
        if table is not None and (table.get(signal) or table.get(DispatchAny)):
            return next(iter(liveReceivers(getAllReceivers(sender, signal))), None) is not None
    return False


def raise_invalid_output(message: str) -> NoReturn:
    """Raise what Scrapy raises for a middleware's answer of the wrong type (its private ``_InvalidOutput``)."""
    raise _InvalidOutput(message)


def make_response(url: str, status: int, headers: Headers, body: bytes = b"", flags: list[str] | None = None,
                  certificate: Any = None, ip_address: IPv4Address | IPv6Address | None = None,
                  protocol: str | None = None, stop_download: StopDownload | None = None) -> Response:
    """Scrapy's ``make_response`` (``scrapy.utils._download_handlers``), the response keeping ``headers``
    as they are: Scrapy's gives them to the response's constructor, which copies them, every name and
    value normalized again (some 40 calls a response)."""
    respcls = responsetypes.responsetypes.from_args(headers=headers, url=url, body=body)
    response = respcls(url=url, status=status, body=body, flags=flags, certificate=certificate,
                       ip_address=ip_address, protocol=protocol)
    response.headers = headers  # a Headers instance: kept, not copied
    if stop_download:
        response.flags.append("download_stopped")
        if stop_download.fail:
            stop_download.response = response
            raise stop_download
    return response
