"""Retries through the frontier, with backoff; throttling; dead letters.

Replaces Scrapy's RetryMiddleware (no delay, no ``Retry-After``): a failed
request goes back to the *frontier*, and the host backs off (:mod:`crawler.policy.backoff`):

================================  ===========================================  =============
answer                            what happens                                 host signal
================================  ===========================================  =============
429, 503                          retried after max(host backoff,              throttled
                                  ``Retry-After``), at most
                                  ``RETRY_MAX_THROTTLED`` times
other 5xx                         retried after the URL's backoff, at most     neutral
                                  ``RETRY_TIMES`` times
timeout, connection refused or    retried after the URL's backoff, at most     failed (parks
reset, truncated body (data       ``RETRY_TIMES`` times                        the host after
loss)                                                                          repeated failures)
no answer on an open connection   retried after the URL's backoff, at most     silent (parks the
(a server that listens, silent),  ``RETRY_TIMES`` times                        host at once)
a name that does not resolve
body over ``DOWNLOAD_MAXSIZE``    dropped (``fetch/size_exceeded``)            ok
TLS handshake failure (a          dead letter at once (it fails the same way)  neutral
certificate that does not verify)
anything else unexpected          dead letter, logged as an error              ok
================================  ===========================================  =============

Out of retries, an *answer* goes on to the spider as with Scrapy's middleware; a
download error is dead-lettered, and the errback gets it. Not retried: robots.txt,
``meta["dont_retry"]``; ``meta["max_retry_times"]`` is honoured. Stats: Scrapy's
``retry/*`` keys as its middleware writes them, and the crawler's (docs/stats.md).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    IgnoreRequest,
    ResponseDataLossError,
)
from scrapy.utils.python import global_object_name
from scrapy.utils.response import response_status_message

from crawler.downloader.errors import ServerSilentError, TlsError
from crawler.exceptions import ConfigurationError
from crawler.frontier import HostSignal, dead_letter, handout_of, reschedule, signal_host
from crawler.policy.backoff import BackoffPolicy, parse_retry_after
from crawler.requestmeta import RETRY_META, ROBOTS_META, THROTTLED_META
from crawler.settings_parsing import get_list, is_set, setting

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

THROTTLE_STATUSES = frozenset({429, 503})

#: Connection-level failures: retried, and they count towards parking the host.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    DownloadTimeoutError,
    DownloadConnectionRefusedError,
    CannotResolveHostError,
    DownloadFailedError,
    ResponseDataLossError,
    TimeoutError,
    ConnectionError,
)

#: Failures that park the host at once (a host that listens and never answers,
#: a name that does not resolve): one more try would hold a fetch slot for nothing.
SILENT_ERRORS: tuple[type[BaseException], ...] = (ServerSilentError, CannotResolveHostError)



def _next_attempt(request: Request, counter: str) -> int:
    """The number of the retry to come, by the request's counter (retries or throttled retries)."""
    return int(request.meta.get(counter, 0)) + 1


def _give_up_level(value: object) -> int:
    """``RETRY_GIVE_UP_LOG_LEVEL`` (Scrapy's): a level name or number."""
    level = logging.getLevelName(value) if isinstance(value, str) else value
    if not isinstance(level, int):
        raise ConfigurationError("RETRY_GIVE_UP_LOG_LEVEL", f"not a log level: {value!r}")
    return level


class RetryMiddleware:
    def __init__(self, policy: BackoffPolicy, stats: StatsCollector, statuses: frozenset[int] | None = None,
                 give_up_level: int = logging.ERROR) -> None:
        self.policy = policy
        self.stats = stats
        #: The statuses retried; ``None``: every 5xx and 429.
        self.statuses = statuses
        #: The level of the line that says a URL is out of retries (Scrapy's RETRY_GIVE_UP_LOG_LEVEL).
        self.give_up_level = give_up_level

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        assert crawler.stats is not None
        settings = crawler.settings
        statuses = None
        if is_set(settings, "RETRY_HTTP_STATUSES"):
            try:
                statuses = frozenset(int(code) for code in get_list(settings, "RETRY_HTTP_STATUSES"))
            except ValueError:
                raise ConfigurationError("RETRY_HTTP_STATUSES", "not a list of HTTP status codes") from None
        return cls(BackoffPolicy.from_settings(settings), crawler.stats, statuses,
                   _give_up_level(setting(settings, "RETRY_GIVE_UP_LOG_LEVEL")))

    def _max_retries(self, request: Request) -> int:
        """Retries of this request at most: ``meta["max_retry_times"]`` (Scrapy's), else ``RETRY_TIMES``."""
        own = request.meta.get("max_retry_times")
        return self.policy.max_retries if own is None else int(own)

    def _count(self, reason: str) -> None:
        """One retry, in Scrapy's keys."""
        self.stats.inc_value("retry/count")
        self.stats.inc_value(f"retry/reason_count/{reason}")

    def _retried(self, status: int) -> bool:
        if self.statuses is None:
            return status >= 500 or status == 429
        return status in self.statuses

    def process_response(self, request: Request, response: Response) -> Request | Response:
        status = response.status
        if not self._retried(status):
            return response
        if handout_of(request) is None or ROBOTS_META in request.meta or request.meta.get("dont_retry"):
            return response
        now = time.time()
        if status in THROTTLE_STATUSES:
            self.stats.inc_value(f"retry/throttled/{status}")
            attempt = _next_attempt(request, THROTTLED_META)
            limit = self.policy.max_throttled if request.meta.get("max_retry_times") is None \
                else self._max_retries(request)
            if attempt > limit:
                return self._hand_on(request, response, attempt - 1, HostSignal.THROTTLED)
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"), now)
            not_before = now + self.policy.capped_retry_after(retry_after) if retry_after is not None else 0.0
            if retry_after is not None:
                self.stats.inc_value("retry/retry_after")
            self._count(response_status_message(status))
            reschedule(request, not_before=not_before, host_signal=HostSignal.THROTTLED,
                       meta_updates={THROTTLED_META: attempt}, reason=f"HTTP {status}")
            logger.debug("Throttled (%d) %s; Retry-After %s", status, request.url, retry_after)
            return request
        attempt = _next_attempt(request, RETRY_META)
        if attempt > self._max_retries(request):
            return self._hand_on(request, response, attempt - 1, HostSignal.NEUTRAL)
        return self._retry(request, attempt, response_status_message(status), f"HTTP {status}",
                           HostSignal.NEUTRAL, now)

    def _hand_on(self, request: Request, response: Response, retries: int, signal: HostSignal) -> Response:
        """Out of retries with an answer: as Scrapy's RetryMiddleware, the last response goes on to
        the spider (HttpError filters it unless the spider allows its status) and the URL is done."""
        self.stats.inc_value("retry/max_reached")
        self.stats.inc_value(f"retry/max_reached/http_{response.status}")
        signal_host(request, signal)
        logger.log(self.give_up_level, "Gave up retrying %s (%d retries): HTTP %d; the response goes on to the "
                   "spider", request.url, retries, response.status)
        return response

    def process_exception(self, request: Request, exception: Exception) -> Request | None:
        if isinstance(exception, IgnoreRequest) or handout_of(request) is None or ROBOTS_META in request.meta:
            return None
        if request.meta.get("dont_retry"):
            return None
        name = type(exception).__name__
        if isinstance(exception, DownloadCancelledError):
            self.stats.inc_value("fetch/size_exceeded")
            return None  # over DOWNLOAD_MAXSIZE: not worth another try
        if isinstance(exception, TlsError):
            # The host answered; the handshake will fail the same way again.
            self.stats.inc_value(f"retry/not_retried/{name}")
            return self._give_up(request, name, str(exception), HostSignal.NEUTRAL, retried=False)
        if isinstance(exception, TRANSIENT_ERRORS):
            if isinstance(exception, ResponseDataLossError):
                self.stats.inc_value("fetch/truncated")
            elif isinstance(exception, (DownloadTimeoutError, TimeoutError)):
                self.stats.inc_value("fetch/timeout")
            signal = HostSignal.SILENT if isinstance(exception, SILENT_ERRORS) else HostSignal.FAILED
            attempt = _next_attempt(request, RETRY_META)
            if attempt > self._max_retries(request):
                return self._give_up(request, name, str(exception), signal)
            return self._retry(request, attempt, global_object_name(type(exception)), str(exception), signal,
                               time.time())
        if isinstance(exception, (RedisConnectionError, RedisTimeoutError)):
            # Our own Redis was down for longer than REDIS_OUTAGE_TIMEOUT while a
            # middleware needed it: not the URL's fault, and no attempt spent.
            self.stats.inc_value("retry/redis_unavailable")
            logger.warning("Redis unavailable while fetching %s (%s); the URL waits in the frontier", request.url,
                           exception)
            reschedule(request, not_before=time.time() + self.policy.retry_delay(1), host_signal=HostSignal.NEUTRAL,
                       reason=f"Redis unavailable: {exception}")
            return request
        self.stats.inc_value(f"retry/unexpected/{name}")
        self.stats.inc_value(f"retry/not_retried/{name}")
        logger.error("Unexpected download error for %s: %s: %s", request.url, name, exception)
        return self._give_up(request, name, str(exception), retried=False)

    def _retry(self, request: Request, attempt: int, reason: str, message: str, signal: HostSignal,
               now: float) -> Request:
        """Back to the frontier for attempt ``attempt``, after the URL's backoff. The request itself is
        returned: the frontier scheduler takes it as given back (its lease's ack requeues it), so the
        spider's errback hears nothing of a retry, as with Scrapy's RetryMiddleware."""
        self._count(reason)
        reschedule(request, not_before=now + self.policy.retry_delay(attempt), host_signal=signal,
                   meta_updates={RETRY_META: attempt}, reason=f"{reason}: {message}")
        return request

    def _give_up(self, request: Request, error: str, message: str,
                 signal: HostSignal = HostSignal.OK, *, retried: bool = True) -> Request | None:
        """Out of retries (or not worth one: ``retried`` False) with a download error: the URL goes to
        the dead-letter set. A request with an errback then gets the error itself, as Scrapy's does
        (the error goes on down the chain); one without ends quietly (returned to the frontier
        scheduler, which has it dead-lettered): the dead-letter set and its stats say it, not a
        traceback per URL."""
        if retried:
            self.stats.inc_value("retry/max_reached")
            logger.log(self.give_up_level, "Gave up retrying %s (%d retries): %s: %s", request.url,
                       int(request.meta.get(RETRY_META, 0)), error, message)
        dead_letter(request, error=error, message=message, host_signal=signal)
        return None if request.errback is not None else request
