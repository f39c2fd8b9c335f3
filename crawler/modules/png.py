"""An example module: keep the PNG images pages show (``PNG_MODULE_ENABLED``, off by default).

It finds ``<img src>`` (and ``<link rel=icon>``) URLs ending in ``.png`` and
follows them with the ``parse_resource`` callback, asking for ``image/png``:
such requests pass the extension and content-type gates that keep images out
of a crawl otherwise. The images go through the frontier (robots.txt,
politeness, seen set) and are stored in the WARC files like any response.
Enabling the module changes nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import NotConfigured

from crawler.modules.base import Follow
from crawler.modules.linkextractor import BaseUrl, resolve
from crawler.requestmeta import EXPECTED_TYPES_META, MODULE_META
from crawler.settings_parsing import get_bool

if TYPE_CHECKING:

    from crawler.modules.base import Page

MODULE = "png"


class PngImagesModule:
    @classmethod
    def from_crawler(cls, crawler: Any) -> Self:
        if not get_bool(crawler.settings, "PNG_MODULE_ENABLED"):
            raise NotConfigured
        return cls()

    def process(self, page: Page) -> Iterator[Follow]:
        base = BaseUrl(page.item.url)
        found = []
        for node in page.tree.css('img[src], link[rel~="icon" i][href]'):
            raw = node.attributes.get("src") or node.attributes.get("href") or ""
            url = resolve(base, raw)
            if url and url.lower().split("?", 1)[0].endswith(".png"):
                found.append(url)
        if found:
            yield Follow(
                list(dict.fromkeys(found)), page.item.depth + 1, callback="parse_resource",
                meta={EXPECTED_TYPES_META: ["image/png"], MODULE_META: MODULE},
            )
