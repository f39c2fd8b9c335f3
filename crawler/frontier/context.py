"""The crawl's frontier as other components reach it: one :class:`FrontierContext` per crawler.

The spider (bulk links), the robots.txt middleware (sitemaps) and the recrawl
pipeline (revisit hints) talk to the frontier scheduler of their crawler;
they get it here, by an import that shows the edge, instead of through
``getattr(crawler.engine.scheduler, ...)``. The scheduler attaches itself
when it opens and detaches when it closes; without one (another scheduler,
a spider used outside a crawl) :meth:`FrontierContext.enqueue_urls` says so
and the caller yields plain ``Request`` objects instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol
from weakref import WeakKeyDictionary

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scrapy.crawler import Crawler


class Intake(Protocol):
    """What the frontier scheduler offers the crawl's other components."""

    def enqueue_urls(
        self,
        urls: Iterable[str],
        *,
        depth: int,
        callback: str | None = None,
        priority: int = 0,
        meta: dict[str, Any] | None = None,
        exact_seen: bool = False,
    ) -> int: ...

    def revisit_scheduled(self, due_ms: int) -> None: ...


_contexts: WeakKeyDictionary[Crawler, FrontierContext] = WeakKeyDictionary()


class FrontierContext:
    def __init__(self) -> None:
        self._intake: Intake | None = None

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> FrontierContext:
        context = _contexts.get(crawler)
        if context is None:
            context = _contexts[crawler] = cls()
        return context

    def attach(self, intake: Intake) -> None:
        self._intake = intake

    def detach(self, intake: Intake) -> None:
        if self._intake is intake:
            self._intake = None

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
        """Send URLs to the frontier in bulk (see ``FrontierScheduler.enqueue_urls``); None without one."""
        if self._intake is None:
            return None
        return self._intake.enqueue_urls(urls, depth=depth, callback=callback, priority=priority, meta=meta,
                                         exact_seen=exact_seen)

    def revisit_scheduled(self, due_ms: int) -> None:
        """A revisit was scheduled by this process: the frontier drains it when due."""
        if self._intake is not None:
            self._intake.revisit_scheduled(due_ms)
