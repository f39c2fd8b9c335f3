"""What a page module sees and how it follows URLs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from selectolax.lexbor import LexborHTMLParser

    from crawler.items import PageItem

#: ``follow(urls, depth, callback=..., priority=..., meta=...)`` -> Requests to yield
#: (empty with the frontier scheduler, which takes the URLs in bulk).
Follow = Callable[..., Iterator["Request"]]


@dataclass
class Page:
    response: Response
    tree: LexborHTMLParser
    item: PageItem
    follow: Follow


class PageModule(Protocol):
    """One step after the parser. Built with ``from_crawler(crawler)``; may raise NotConfigured."""

    def process(self, page: Page) -> Iterator[Request]:
        """Read ``page.tree``, fill ``page.item``, follow URLs through ``page.follow``."""
        ...


def build_modules(crawler: Any, paths: list[str]) -> list[PageModule]:
    from scrapy.exceptions import NotConfigured
    from scrapy.utils.misc import build_from_crawler, load_object

    modules = []
    for path in paths:
        try:
            modules.append(build_from_crawler(load_object(path), crawler))
        except NotConfigured:
            continue
    return modules
