"""The text extractor module: visible text and its SimHash (for near-duplicate detection)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from crawler.dedup.text import content_simhash, visible_text
from crawler.settings_parsing import get_int

if TYPE_CHECKING:
    from scrapy import Request

    from crawler.modules.base import Page


class TextModule:
    def __init__(self, max_words: int, min_block_words: int = 10) -> None:
        self.max_words = max_words
        self.min_block_words = min_block_words

    @classmethod
    def from_crawler(cls, crawler: Any) -> Self:
        settings = crawler.settings
        return cls(get_int(settings, "DEDUP_MAX_WORDS", minimum=1),
                   get_int(settings, "DEDUP_MIN_BLOCK_WORDS", minimum=0))

    def process(self, page: Page) -> Iterator[Request]:
        text = visible_text(page.tree)
        page.item.text = text
        page.item.simhash = content_simhash(page.tree, text, self.max_words, self.min_block_words)
        return iter(())
