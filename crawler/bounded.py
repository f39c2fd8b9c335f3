"""Bounded in-process collections."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any


class BoundedSet:
    """A set that forgets its oldest half when full.

    Holds at most ``max_size`` entries in two generations: when the current
    generation reaches ``max_size // 2`` entries it becomes the old one and the
    previous old one is dropped. Membership answers "added recently", which is
    all a pre-filter needs: a forgotten entry is checked again by the exact
    store behind it. ``max_size == 0`` disables it. No TTL: entries are only
    evicted by newer ones.
    """

    __slots__ = ("_current", "_half", "_previous")

    def __init__(self, max_size: int) -> None:
        self._half = max(max_size // 2, 0)
        self._current: set[Hashable] = set()
        self._previous: set[Hashable] = set()

    def __contains__(self, item: Hashable) -> bool:
        return item in self._current or item in self._previous

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)

    def add(self, item: Hashable) -> None:
        if not self._half:
            return
        current = self._current
        current.add(item)
        if len(current) >= self._half:
            self._previous = current
            self._current = set()


class BoundedMap:
    """A mapping that forgets its oldest half when full, as :class:`BoundedSet` does (``max_size == 0``
    keeps nothing)."""

    __slots__ = ("_current", "_half", "_previous")

    def __init__(self, max_size: int) -> None:
        self._half = max(max_size // 2, 0)
        self._current: dict[Hashable, Any] = {}
        self._previous: dict[Hashable, Any] = {}

    def __len__(self) -> int:
        return len(self._current) + len(self._previous)

    def get(self, key: Hashable) -> Any:
        found = self._current.get(key)
        return self._previous.get(key) if found is None else found

    def put(self, key: Hashable, value: Any) -> None:
        if not self._half:
            return
        current = self._current
        current[key] = value
        if len(current) >= self._half:
            self._previous = current
            self._current = {}
