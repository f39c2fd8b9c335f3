"""Scrapy's log messages, without building the per-page ones nobody will see.

Scrapy's engine asks the ``LOG_FORMATTER`` for a "Crawled (200) <GET ...>"
message on every response and a "Scraped from ..." message on every item,
then logs them at DEBUG: at the usual INFO level each is built (the referer
looked up, flags formatted) and thrown away. Scrapy's documented contract
lets a formatter return ``None`` for "do not log"; this one does so for those
two messages unless their logger is enabled for DEBUG, and is Scrapy's
formatter otherwise.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.logformatter import LogFormatter

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.http import Response
    from scrapy.logformatter import LogFormatterResult
    from twisted.python.failure import Failure

_ENGINE = logging.getLogger("scrapy.core.engine")
_SCRAPER = logging.getLogger("scrapy.core.scraper")


class LeanLogFormatter(LogFormatter):
    def crawled(  # type: ignore[override]
        self, request: Request, response: Response, spider: Spider
    ) -> LogFormatterResult | None:
        if not _ENGINE.isEnabledFor(logging.DEBUG):
            return None
        return super().crawled(request, response, spider)

    def scraped(  # type: ignore[override]
        self, item: Any, response: Response | Failure | None, spider: Spider
    ) -> LogFormatterResult | None:
        if not _SCRAPER.isEnabledFor(logging.DEBUG):
            return None
        return super().scraped(item, response, spider)
