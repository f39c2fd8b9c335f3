"""Retries through the frontier, with backoff; throttling; dead letters.

Replaces Scrapy's RetryMiddleware, which sends a failed request straight back
to the downloader with no delay and no ``Retry-After``. Here a failed request
goes back to the *frontier* (its host keeps its one-request-at-a-time turn and
its politeness), and the host itself backs off (see
:mod:`crawler.policy.backoff` for the formulas):

================================  ===========================================  =============
answer                            what happens                                 host signal
================================  ===========================================  =============
429, 503                          retried after max(host backoff,              throttled
                                  ``Retry-After``), at most
                                  ``RETRY_MAX_THROTTLED`` times
other 5xx                         retried after the URL's backoff, at most     neutral
                                  ``RETRY_MAX_RETRIES`` times
timeout, connection refused or    retried after the URL's backoff, at most     failed (parks
reset, truncated body (data       ``RETRY_MAX_RETRIES`` times                  the host after
loss)                                                                          repeated failures)
no answer on an open connection   retried after the URL's backoff, at most     silent (parks the
(a server that listens, silent),  ``RETRY_MAX_RETRIES`` times                  host at once)
a name that does not resolve
body over ``DOWNLOAD_MAXSIZE``    dropped (``fetch/size_exceeded``)            ok
TLS handshake failure (a          dead letter at once (it fails the same way)  neutral
certificate that does not verify)
anything else unexpected          dead letter, logged as an error              ok
================================  ===========================================  =============

A URL out of retries goes to the dead-letter queue with its last error class
(``scrapy frontier dead-letters`` lists and requeues them). Only requests
served by the frontier are retried; robots.txt fetches pass through (the
robots.txt middleware judges their failures), and so do requests with
``meta["dont_retry"]``. ``RETRY_HTTP_STATUSES`` (Scrapy's ``RETRY_HTTP_CODES``
in a project) narrows the statuses retried; unset, every 5xx and 429.
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

from crawler.downloader.errors import ServerSilentError, TlsError
from crawler.exceptions import ConfigurationError
from crawler.frontier.outcome import HostSignal, Rescheduled, dead_letter, handout_of, reschedule
from crawler.policy.backoff import BackoffPolicy, parse_retry_after
from crawler.requestmeta import RETRY_META, ROBOTS_META, THROTTLED_META
from crawler.settings_parsing import get_list, is_set

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



class RetryMiddleware:
    def __init__(self, policy: BackoffPolicy, stats: StatsCollector, statuses: frozenset[int] | None = None) -> None:
        self.policy = policy
        self.stats = stats
        #: The statuses retried; ``None``: every 5xx and 429.
        self.statuses = statuses

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
        return cls(BackoffPolicy.from_settings(settings), crawler.stats, statuses)

    def _retried(self, status: int) -> bool:
        if self.statuses is None:
            return status >= 500 or status == 429
        return status in self.statuses

    def process_response(self, request: Request, response: Response) -> Response:
        status = response.status
        if not self._retried(status):
            return response
        if handout_of(request) is None or ROBOTS_META in request.meta or request.meta.get("dont_retry"):
            return response
        now = time.time()
        if status in THROTTLE_STATUSES:
            self.stats.inc_value(f"retry/throttled/{status}")
            attempt = int(request.meta.get(THROTTLED_META, 0)) + 1
            if attempt > self.policy.max_throttled:
                self._give_up(request, f"http_{status}", f"still {status} after {attempt - 1} retries")
            retry_after = parse_retry_after(response.headers.get(b"Retry-After"), now)
            not_before = now + self.policy.capped_retry_after(retry_after) if retry_after is not None else 0.0
            if retry_after is not None:
                self.stats.inc_value("retry/retry_after")
            reschedule(request, not_before=not_before, host_signal=HostSignal.THROTTLED,
                       meta_updates={THROTTLED_META: attempt}, reason=f"HTTP {status}")
            logger.debug("Throttled (%d) %s; Retry-After %s", status, request.url, retry_after)
            raise Rescheduled(f"HTTP {status}")
        self._retry(request, f"http_{status}", f"HTTP {status}", HostSignal.NEUTRAL, now)
        raise AssertionError("unreachable")  # pragma: no cover

    def process_exception(self, request: Request, exception: Exception) -> None:
        if isinstance(exception, IgnoreRequest) or handout_of(request) is None or ROBOTS_META in request.meta:
            return
        if request.meta.get("dont_retry"):
            return
        name = type(exception).__name__
        if isinstance(exception, DownloadCancelledError):
            self.stats.inc_value("fetch/size_exceeded")
            return  # over DOWNLOAD_MAXSIZE: not worth another try
        if isinstance(exception, TlsError):
            # The host answered; the handshake will fail the same way again.
            self._give_up(request, name, str(exception), HostSignal.NEUTRAL)
        if isinstance(exception, TRANSIENT_ERRORS):
            if isinstance(exception, ResponseDataLossError):
                self.stats.inc_value("fetch/truncated")
            elif isinstance(exception, (DownloadTimeoutError, TimeoutError)):
                self.stats.inc_value("fetch/timeout")
            signal = HostSignal.SILENT if isinstance(exception, SILENT_ERRORS) else HostSignal.FAILED
            self._retry(request, name, str(exception), signal, time.time())
        if isinstance(exception, (RedisConnectionError, RedisTimeoutError)):
            # Our own Redis was down for longer than REDIS_OUTAGE_TIMEOUT while a
            # middleware needed it: not the URL's fault, and no attempt spent.
            self.stats.inc_value("retry/redis_unavailable")
            logger.warning("Redis unavailable while fetching %s (%s); the URL waits in the frontier", request.url,
                           exception)
            reschedule(request, not_before=time.time() + self.policy.retry_delay(1), host_signal=HostSignal.NEUTRAL,
                       reason=f"Redis unavailable: {exception}")
            raise Rescheduled(f"Redis unavailable for {request.url}")
        self.stats.inc_value(f"retry/unexpected/{name}")
        logger.error("Unexpected download error for %s: %s: %s", request.url, name, exception)
        self._give_up(request, name, str(exception))

    def _retry(self, request: Request, error: str, message: str, signal: HostSignal, now: float) -> None:
        attempt = int(request.meta.get(RETRY_META, 0)) + 1
        if attempt > self.policy.max_retries:
            self._give_up(request, error, message, signal)
        self.stats.inc_value(f"retry/count/{error}")
        reschedule(request, not_before=now + self.policy.retry_delay(attempt), host_signal=signal,
                   meta_updates={RETRY_META: attempt}, reason=f"{error}: {message}")
        raise Rescheduled(f"retry {attempt} of {request.url}: {error}")

    def _give_up(self, request: Request, error: str, message: str, signal: HostSignal = HostSignal.OK) -> None:
        self.stats.inc_value("retry/max_reached")
        dead_letter(request, error=error, message=message, host_signal=signal)
        raise Rescheduled(f"gave up on {request.url}: {error}")
