"""The crawl's frontier as other components reach it: one :class:`FrontierContext` per crawler.

The spider (bulk links), the robots.txt middleware (sitemaps) and the recrawl
pipeline (revisit hints) reach the frontier of their crawler here, by an
import that shows the edge, instead of through ``crawler.engine``. The
frontier scheduler attaches its :class:`~crawler.frontier.intake.Intake` (links
go straight to it) and itself (revisit hints) when it opens, and detaches them
when it closes; without them (another scheduler, a spider used outside a
crawl) :meth:`FrontierContext.enqueue_urls` returns None and the caller yields
plain ``Request`` objects instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from crawler.percrawler import PerCrawler

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.crawler import Crawler

    from crawler.frontier.intake import Intake


class RevisitListener(Protocol):
    """Told when this process schedules a revisit (the frontier scheduler: it drains it when due)."""

    def revisit_scheduled(self, due_ms: int) -> None: ...


class FrontierContext:
    def __init__(self) -> None:
        self._intake: Intake | None = None
        self._revisits: RevisitListener | None = None

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> FrontierContext:
        return _contexts(crawler)

    def attach(self, intake: Intake, revisits: RevisitListener) -> None:
        self._intake = intake
        self._revisits = revisits

    def detach(self, intake: Intake) -> None:
        if self._intake is intake:
            self._intake = None
            self._revisits = None

    @property
    def attached(self) -> bool:
        """Whether the crawl's scheduler is the frontier (open)."""
        return self._intake is not None

    def enqueue_urls(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        callback: str | None = None,
        priority: int = 0,
        meta: dict[str, Any] | None = None,
        exact_seen: bool = False,
    ) -> int | None:
        """Send URLs to the frontier in bulk (:meth:`Intake.urls`: stored before the lease of the page
        that found them is acked); how many were sent, None without a frontier."""
        if self._intake is None:
            return None
        return self._intake.urls(urls, depth=depth, callback=callback, priority=priority, meta=meta,
                                 exact_seen=exact_seen)

    def revisit_scheduled(self, due_ms: int) -> None:
        """A revisit was scheduled by this process: the frontier drains it when due."""
        if self._revisits is not None:
            self._revisits.revisit_scheduled(due_ms)


_contexts: PerCrawler[FrontierContext] = PerCrawler(lambda crawler: FrontierContext())
