"""Scrapy's item pipeline manager, with a lean loop over the pipelines.

Scrapy's :class:`~scrapy.pipelines.ItemPipelineManager` takes an item through
its pipelines' ``process_item`` in order, and for each one formats the
method's name (for a warning it only gives about a Deferred), checks the
answer against ``Deferred`` and the ``Awaitable`` ABC, and wraps an answer
given at once in a coroutine to await: five pipelines a page, 1.5 items a page.
:class:`DirectItemPipelineManager` is the same manager (the same pipelines,
order, spider argument, ``open_spider``/``close_spider``) with a loop that
awaits a coroutine (an ``async def`` pipeline) as it is and takes an answer
given at once (the item, another object) at its word. A Deferred or another
awaitable goes Scrapy's way, with Scrapy's deprecation warning. The add-on
names it in ``ITEM_PROCESSOR``; a project's own processor wins.
"""

from __future__ import annotations

from inspect import isawaitable
from types import CoroutineType
from typing import Any

from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.defer import ensure_awaitable
from scrapy.utils.python import global_object_name


class DirectItemPipelineManager(ItemPipelineManager):
    """See the module's docstring."""

    async def process_item_async(self, item: Any) -> Any:
        needs_spider = self._mw_methods_requiring_spider
        for method in self.methods["process_item"]:
            assert method is not None
            answer = method(item, self._spider) if method in needs_spider else method(item)
            if type(answer) is CoroutineType:
                item = await answer
            elif isawaitable(answer):  # a Deferred (Scrapy warns) or another awaitable
                item = await ensure_awaitable(answer, _warn=global_object_name(method))
            else:
                item = answer
        return item
