"""Every request's defaults in one downloader middleware: timeout, headers, User-Agent.

Replaces Scrapy's ``DownloadTimeoutMiddleware``, ``DefaultHeadersMiddleware``
and ``UserAgentMiddleware`` (same settings, same spider attributes, same
order: values a request already has are kept) at the cost of one middleware
call instead of three; each middleware call costs the engine several
microseconds on every request, whatever it does.

* ``DOWNLOAD_TIMEOUT`` (or the spider's ``download_timeout``) becomes
  ``meta["download_timeout"]`` unless set;
* every ``DEFAULT_REQUEST_HEADERS`` header is set unless present;
* ``USER_AGENT`` (or the spider's ``user_agent``) is the ``User-Agent`` unless present.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.http import Headers

if TYPE_CHECKING:
    from typing import Self

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler


class RequestDefaultsMiddleware:
    def __init__(self, timeout: float, headers: dict[str, Any], user_agent: str | None) -> None:
        self.timeout = timeout
        self.user_agent = user_agent
        # Normalized once (Scrapy's Headers form: title-case bytes -> [bytes]).
        self._headers = Headers({k: v for k, v in headers.items() if v is not None})
        self._defaults: list[tuple[bytes, list[bytes]]] = []
        self._build()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        middleware = cls(
            settings.getfloat("DOWNLOAD_TIMEOUT"),
            settings.getdict("DEFAULT_REQUEST_HEADERS"),
            settings.get("USER_AGENT"),
        )
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        return middleware

    def spider_opened(self, spider: Spider) -> None:
        self.timeout = getattr(spider, "download_timeout", self.timeout)
        self.user_agent = getattr(spider, "user_agent", self.user_agent)
        self._build()

    def _build(self) -> None:
        defaults: dict[bytes, list[bytes]] = {name: list(values) for name, values in dict.items(self._headers)}
        if self.user_agent:
            # DefaultHeadersMiddleware ran first in Scrapy: a User-Agent among
            # the default headers wins over USER_AGENT.
            agent = self.user_agent
            defaults.setdefault(b"User-Agent", [agent if isinstance(agent, bytes) else str(agent).encode("utf-8")])
        self._defaults = list(defaults.items())

    def process_request(self, request: Request) -> None:
        if self.timeout:
            request.meta.setdefault("download_timeout", self.timeout)
        headers = request.headers
        for name, values in self._defaults:
            if not dict.__contains__(headers, name):
                dict.__setitem__(headers, name, list(values))
