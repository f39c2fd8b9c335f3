"""The crawl's frontier as other components reach it: one :class:`FrontierContext` per crawler.

The spider (bulk links), the robots.txt middleware (sitemaps) and the recrawl
pipeline (revisit hints) reach the frontier of their crawler here, by an
import that shows the edge, instead of through ``crawler.engine``. The
frontier scheduler attaches its :class:`~crawler.frontier.intake.Intake` (links
go straight to it) and itself (revisit hints) when it opens, and detaches them
when it closes; without them (another scheduler, a spider used outside a
crawl) :attr:`FrontierContext.intake` is None and the caller yields plain
``Request`` objects instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from crawler.percrawler import PerCrawler

if TYPE_CHECKING:
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
    def intake(self) -> Intake | None:
        """The frontier's way in for URLs (:meth:`Intake.urls`: in bulk, stored before the lease of the
        page that found them is acked); None without the frontier scheduler (open)."""
        return self._intake

    def revisit_scheduled(self, due_ms: int) -> None:
        """A revisit was scheduled by this process: the frontier drains it when due."""
        if self._revisits is not None:
            self._revisits.revisit_scheduled(due_ms)


_contexts: PerCrawler[FrontierContext] = PerCrawler(lambda crawler: FrontierContext())
