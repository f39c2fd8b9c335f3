"""Start requests marked ``is_start_request``, as Scrapy's ``StartSpiderMiddleware`` marks them, and nothing more.

Scrapy's middleware (a ``BaseSpiderMiddleware``) also has a
``process_spider_output``, which passes every callback's output through
unchanged (it marks start requests only): one more layer of asynchronous
generators for every response, a measurable share of a page's CPU.
:class:`StartRequestsMiddleware` has only ``process_start``, so callbacks'
output does not go through it. The add-on puts it where Scrapy's was (25).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

#: Scrapy's meta key for a start request.
START_META = "is_start_request"


class StartRequestsMiddleware:
    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        async for entry in start:
            if isinstance(entry, Request):
                entry.meta.setdefault(START_META, True)
            yield entry
