"""What a page module sees, and what it hands back: URLs to follow, or requests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response
    from selectolax.lexbor import LexborHTMLParser

    from crawler.items import PageItem


@dataclass
class Page:
    response: Response
    tree: LexborHTMLParser
    item: PageItem


@dataclass(frozen=True, slots=True)
class Follow:
    """URLs a module asks to follow: the spider sends them on (to the frontier in bulk, or as requests
    with another scheduler), so a module never calls back into the spider."""

    urls: list[str]
    depth: int
    callback: str = "parse"
    priority: int = 0
    meta: dict[str, Any] | None = field(default=None)


class PageModule(Protocol):
    """One step after the parser. Built with ``from_crawler(crawler)``; may raise NotConfigured."""

    def process(self, page: Page) -> Iterator[Follow | Request]:
        """Read ``page.tree``, fill ``page.item``; yield :class:`Follow` for URLs to follow."""
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
