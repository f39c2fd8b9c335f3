"""The link extractor module: outlinks, ``<base href>``, rel="canonical"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Self

from crawler.modules.base import Follow
from crawler.modules.linkextractor import LinkExtractor, canonical_from_link_header
from crawler.urls import NormalizationConfig, UrlError, normalize_url
from crawler.urls.domains import RegisteredDomains

if TYPE_CHECKING:

    from crawler.modules.base import Page


class LinksModule:
    """Follows every ``<a href>``; applies the rel="canonical" rule (see the README)."""

    def __init__(self, crawler: Any) -> None:
        self.extractor = LinkExtractor()
        self.domains = RegisteredDomains.shared()
        self.crawler = crawler
        #: The crawl's URL normalization (canonical and page URLs compare in the frontier's form).
        self.normalization = NormalizationConfig.from_settings(crawler.settings)

    @property
    def stats(self) -> Any:
        # Modules are built with the spider, before the crawler has its stats.
        return self.crawler.stats

    @classmethod
    def from_crawler(cls, crawler: Any) -> Self:
        return cls(crawler)

    def process(self, page: Page) -> Iterator[Follow]:
        item = page.item
        links = self.extractor.extract_tree(page.tree, item.url)
        item.outlinks = links.links
        link_header = page.response.headers.get(b"Link")
        canonical = links.canonical or canonical_from_link_header(
            link_header.decode("latin-1") if link_header else None, item.url
        )
        if canonical:
            yield from self._canonical(page, canonical)
        yield Follow(item.outlinks, item.depth + 1)

    def _canonical(self, page: Page, canonical: str) -> Iterator[Follow]:
        item = page.item
        try:
            target, target_host = normalize_url(canonical, self.normalization)
            here, here_host = normalize_url(item.url, self.normalization)
        except UrlError:
            self.stats.inc_value("canonical/invalid")
            return
        item.canonical_url = target
        if target == here:
            return
        if self.domains(target_host) != self.domains(here_host):
            # Not trusted across registered domains: recorded only.
            self.stats.inc_value("canonical/other_domain")
            return
        item.primary = False
        self.stats.inc_value("canonical/followed")
        yield Follow([target], item.depth)
