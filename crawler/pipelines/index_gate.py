"""The gate in front of index consumers: only primary, non-duplicate pages pass.

Duplicates are archived (the WARC pipeline runs before this gate) but not
indexed: an exact duplicate (``duplicate_of`` another URL; not for a page
rendered in a browser, whose raw payload is the site's shell), a near duplicate
(``near_duplicate_of``), a page whose rel="canonical" names another URL
(``primary`` False), a non-HTML resource, and a non-200 answer stop here,
counted in ``index/skipped/<reason>``. Pipelines after this one (order > 600)
see only pages worth indexing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import DropItem, NotConfigured

from crawler.items import PageItem
from crawler.settings_parsing import get_bool

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class IndexGatePipeline:
    def __init__(self, stats: Any) -> None:
        self.stats = stats

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        if not get_bool(crawler.settings, "INDEX_GATE_ENABLED"):
            raise NotConfigured
        return cls(crawler.stats)

    def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem):
            return item
        reason = None
        if item.status != 200:
            reason = "status"
        elif item.text is None:
            reason = "not_html"
        elif item.duplicate_of is not None and item.duplicate_of[0] != item.url and item.rendered_html is None:
            # (A rendered page's raw payload is often one shell for the whole site: its
            # content is the rendered DOM, judged by its SimHash below.)
            reason = "exact_duplicate"
        elif item.near_duplicate_of is not None:
            reason = "near_duplicate"
        elif not item.primary:
            reason = "not_canonical"
        if reason is None:
            self.stats.inc_value("index/passed")
            return item
        self.stats.inc_value(f"index/skipped/{reason}")
        raise DropItem(f"not for the index: {reason}", log_level="DEBUG")
