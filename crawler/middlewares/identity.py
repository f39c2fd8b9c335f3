"""The crawler's identity: a user agent that says who runs the crawl.

The default ``USER_AGENT`` of this project is a placeholder. Crawling hosts
other than this machine with it is refused: at start-up when a seed is not a
loopback host (the ``crawl`` command's checks), and at the first such request
otherwise (:class:`IdentityGuardMiddleware` closes the spider).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import deferred_from_coro
from scrapy.utils.httpobj import urlparse_cached

from crawler.downloader.netguard import AddressPolicy, is_loopback_host, parse_ip
from crawler.exceptions import ConfigurationError
from crawler.frontier import HostSignal, Rescheduled, reschedule

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

PLACEHOLDER_MARKS = ("example.invalid", "(+https://scrapy.org)")


def is_placeholder(user_agent: str | None) -> bool:
    return not user_agent or any(mark in user_agent for mark in PLACEHOLDER_MARKS)


def placeholder_error() -> ConfigurationError:
    return ConfigurationError(
        "USER_AGENT",
        "still the placeholder; set it to name your crawler with a URL about your crawl, "
        "e.g. -s 'USER_AGENT=examplebot/1.0 (+https://example.org/bot)'",
    )


def check_identity(settings: BaseSettings, hosts: Iterable[str]) -> None:
    """Raise if the user agent is a placeholder and any host is not this machine."""
    if is_placeholder(settings.get("USER_AGENT")) and any(not is_loopback_host(h) for h in hosts):
        raise placeholder_error()


class IdentityGuardMiddleware:
    """Stops the crawl at its first non-loopback request if USER_AGENT is a placeholder."""

    def __init__(self, crawler: Crawler, addresses: AddressPolicy) -> None:
        self.crawler = crawler
        self.addresses = addresses
        self.closing = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not is_placeholder(crawler.settings.get("USER_AGENT")):
            raise NotConfigured
        return cls(crawler, AddressPolicy.from_settings(crawler.settings))

    def process_request(self, request: Request) -> Request | None:
        host = urlparse_cached(request).hostname or ""
        if is_loopback_host(host):
            return None
        address = parse_ip(host)
        if address is not None and not self.addresses.allowed(address):
            return None  # never contacted: the download handler refuses it
        if not self.closing:
            self.closing = True
            logger.error("Refusing to crawl %s: %s", host, placeholder_error())
            engine = self.crawler.engine
            if engine is not None:
                deferred_from_coro(engine.close_spider_async(reason="user_agent_placeholder"))
        # The URL stays in the frontier for a crawl with a proper user agent.
        if reschedule(request, not_before=0.0, host_signal=HostSignal.NEUTRAL, reason="USER_AGENT is a placeholder"):
            return request  # given back to the frontier (see crawler.frontier.outcome.waits)
        raise Rescheduled("USER_AGENT is a placeholder")
