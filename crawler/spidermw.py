"""Scrapy's spider-middleware manager, with a callback's output chained by one generator.

Scrapy's :class:`~scrapy.core.spidermw.SpiderMiddlewareManager` takes a
callback's output through each middleware's ``process_spider_output``, every
layer wrapped by ``_evaluate_iterable`` (which hands an error to the
``process_spider_exception`` methods after it). What those methods give back
instead ("recovered" output) is kept in a ``MutableAsyncChain`` per level and
comes after the output of its level: for a callback and one middleware, two
empty chains and two more chaining them, eight asynchronous generators made
(and registered with the event loop) per response, and each object of the
output passes through every one of them.
:class:`LeanSpiderMiddlewareManager` keeps each level's recovered output in a
list (:class:`Recovered`) and chains the callback's output, then each level's
recovered output, in one generator. The middlewares, their order, the layers
that catch errors, the objects, their order and the errors raised are
Scrapy's (``tests/test_spidermw.py`` runs both managers on the same
scenarios). Set on the scraper's manager with :class:`crawler.engine.DirectEngine`
(``TUNING_ONE_TASK_PER_REQUEST``), only when it is Scrapy's own class.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from itertools import islice
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy.core.spidermw import SpiderMiddlewareManager

if TYPE_CHECKING:
    from scrapy.http import Response

_T = TypeVar("_T")


class Recovered:
    """A level's recovered output: the iterables ``process_spider_exception`` methods gave back, in order
    (``_evaluate_iterable`` calls :meth:`extend`, as it does on Scrapy's ``MutableAsyncChain``)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[Iterable[Any] | AsyncIterator[Any]] = []

    def extend(self, *iterables: Iterable[Any] | AsyncIterator[Any]) -> None:
        self.parts.extend(iterables)


async def chained(result: AsyncIterator[_T], *levels: Recovered) -> AsyncIterator[_T]:
    """``result``, then each level's recovered output (innermost level first, as Scrapy's chains give it).
    A level is read once ``result`` is done: every layer that could add to it wraps ``result``."""
    async for output in result:
        yield output
    for level in levels:
        for part in level.parts:
            if isinstance(part, AsyncIterator):
                async for output in part:
                    yield output
            else:
                for output in part:
                    yield output


class LeanSpiderMiddlewareManager(SpiderMiddlewareManager):
    """See the module's docstring. Set on Scrapy's manager once it is built (``__class__``)."""

    def _layers(self, response: Response, result: AsyncIterator[_T], start_index: int,
                recovered: Recovered) -> AsyncIterator[_T]:
        """``result`` through each ``process_spider_output`` from ``start_index``, each layer evaluated as
        Scrapy's (its errors to the exception methods after it, what they give back to ``recovered``)."""
        for method_index, method in enumerate(islice(self.methods["process_spider_output"], start_index, None),
                                              start=start_index):
            if method is None:
                continue
            if method in self._mw_methods_requiring_spider:
                result = method(response=response, result=result, spider=self._spider)
            else:
                result = method(response=response, result=result)
            result = self._evaluate_iterable(response, result, method_index + 1, recovered)  # type: ignore[arg-type]
        return result

    def _process_spider_output(  # type: ignore[override]
        self, response: Response, result: AsyncIterator[_T], start_index: int = 0,
    ) -> AsyncIterator[_T]:
        recovered = Recovered()
        return chained(self._layers(response, result, start_index, recovered), recovered)

    async def _process_callback_output(  # type: ignore[override]
        self, response: Response, result: AsyncIterator[_T],
    ) -> AsyncIterator[_T]:
        recovered, inner = Recovered(), Recovered()
        result = self._evaluate_iterable(response, result, 0, recovered)  # type: ignore[arg-type]
        return chained(self._layers(response, result, 0, inner), inner, recovered)


def use_lean_spidermw(manager: Any) -> bool:
    """Make a scraper's spider-middleware manager lean when it is Scrapy's own class; whether it is."""
    if type(manager) is SpiderMiddlewareManager:
        manager.__class__ = LeanSpiderMiddlewareManager
    return isinstance(manager, LeanSpiderMiddlewareManager)
