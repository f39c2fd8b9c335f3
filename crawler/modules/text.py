"""The text extractor module: visible text and its SimHash (for near-duplicate detection)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from crawler.dedup.text import simhash64, visible_text, words
from crawler.settings_parsing import get_int

if TYPE_CHECKING:
    from scrapy import Request

    from crawler.modules.base import Page


class TextModule:
    def __init__(self, max_words: int) -> None:
        self.max_words = max_words

    @classmethod
    def from_crawler(cls, crawler: Any) -> Self:
        return cls(get_int(crawler.settings, "DEDUP_MAX_WORDS", minimum=1))

    def process(self, page: Page) -> Iterator[Request]:
        text = visible_text(page.tree)
        page.item.text = text
        page.item.simhash = simhash64(words(text, self.max_words))
        return iter(())
