"""Reading typed values out of Scrapy settings, with errors that name the setting.

Components parse their settings once, in ``from_crawler``, into frozen
dataclasses; every function here raises :class:`ConfigurationError` naming the
setting instead of letting a bad value surface later as a ``TypeError``.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any, TypeVar

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError

E = TypeVar("E", bound=Enum)


def _check_range(name: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise ConfigurationError(name, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(name, f"must be at most {maximum}, got {value}")


def get_float(
    settings: BaseSettings, name: str, default: float, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    raw = settings.get(name, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigurationError(name, f"expected a number, got {raw!r}") from None
    if value != value:  # NaN
        raise ConfigurationError(name, "expected a number, got NaN")
    _check_range(name, value, minimum, maximum)
    return value


def get_int(
    settings: BaseSettings, name: str, default: int, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = settings.get(name, default)
    if isinstance(raw, bool):
        raise ConfigurationError(name, f"expected an integer, got {raw!r}")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ConfigurationError(name, f"expected an integer, got {raw!r}") from None
    if isinstance(raw, float) and raw != value:
        raise ConfigurationError(name, f"expected an integer, got {raw!r}")
    _check_range(name, value, minimum, maximum)
    return value


def get_bool(settings: BaseSettings, name: str, default: bool) -> bool:
    try:
        return settings.getbool(name, default)
    except ValueError:
        raise ConfigurationError(name, f"expected a boolean, got {settings.get(name)!r}") from None


def get_int_list(settings: BaseSettings, name: str, default: Sequence[int], *, minimum: int) -> tuple[int, ...]:
    raw: Any = settings.get(name, default)
    if isinstance(raw, str):
        raw = [part.strip() for part in raw.split(",") if part.strip()]
    if not isinstance(raw, (list, tuple)):
        raise ConfigurationError(name, f"expected a list of integers, got {raw!r}")
    values = []
    for item in raw:
        try:
            value = int(item)
        except (TypeError, ValueError):
            raise ConfigurationError(name, f"expected a list of integers, got {raw!r}") from None
        if value < minimum:
            raise ConfigurationError(name, f"every value must be at least {minimum}, got {raw!r}")
        values.append(value)
    return tuple(values)


def parse_choice(choices: type[E], value: object, name: str) -> E:
    """The member of the string Enum ``choices`` whose value is ``value`` (any case)."""
    try:
        return choices(str(value).strip().lower())
    except ValueError:
        known = ", ".join(str(choice.value) for choice in choices)
        raise ConfigurationError(name, f"expected one of {known}, got {value!r}") from None


def get_choice(settings: BaseSettings, name: str, choices: type[E], default: E) -> E:
    return parse_choice(choices, settings.get(name, default.value), name)
