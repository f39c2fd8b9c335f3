"""Reading typed values out of Scrapy settings, with errors that name the setting.

Components parse their settings once, in ``from_crawler``, into frozen
dataclasses; every function here raises :class:`ConfigurationError` naming the
setting instead of letting a bad value surface later as a ``TypeError``.

A setting that is not set takes its default from :mod:`crawler.defaults` (the
crawler's own settings) or Scrapy's ``default_settings`` (Scrapy's): one
default per setting, never one written where it is read. A name with neither
is a programming error (``KeyError``), which ``tests/test_units.py`` rules out
for every name the code reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import Enum
from typing import Any, TypeVar

from scrapy.settings import BaseSettings
from scrapy.settings import default_settings as scrapy_defaults

from crawler import defaults as project_defaults
from crawler.exceptions import ConfigurationError

E = TypeVar("E", bound=Enum)


def default_of(name: str) -> Any:
    """The default of a setting: the crawler's own (:mod:`crawler.defaults`), else Scrapy's."""
    for module in (project_defaults, scrapy_defaults):
        if hasattr(module, name):
            return getattr(module, name)
    raise KeyError(f"setting {name} has no default (add it to crawler/defaults.py)")


def is_set(settings: BaseSettings, name: str) -> bool:
    """Whether a setting has a value (for settings whose default is derived from others)."""
    return settings.get(name) is not None


def setting(settings: BaseSettings, name: str) -> Any:
    """A setting's value, or its default when it is not set (``None`` counts as not set)."""
    value = settings.get(name)
    return default_of(name) if value is None else value


def get_list(settings: BaseSettings, name: str) -> list[Any]:
    """A list setting (a list, or a string of comma-separated values, as Scrapy's ``getlist``)."""
    value = setting(settings, name)
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    try:
        return list(value)
    except TypeError:
        raise ConfigurationError(name, f"expected a list, got {value!r}") from None


def get_dict(settings: BaseSettings, name: str) -> dict[str, Any]:
    """A dict setting (a dict, or a JSON object in a string, as Scrapy's ``getdict``)."""
    if settings.get(name) is None:
        return dict(default_of(name) or {})
    try:
        return dict(settings.getdict(name))
    except (TypeError, ValueError):
        raise ConfigurationError(name, f"expected a dict (or a JSON object), got {settings.get(name)!r}") from None


def dict_value(value: object, name: str) -> Mapping[str, Any] | None:
    """A dict setting's value as a mapping (a dict, Scrapy's BaseSettings, or a JSON object in a string,
    as ``-s NAME='{...}'`` gives it); None when unset; a clear error naming the setting otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise ConfigurationError(name, f"expected a dict (or a JSON object), got {value!r}") from None
    if hasattr(value, "copy_to_dict"):  # Scrapy's BaseSettings
        value = value.copy_to_dict()
    if not isinstance(value, Mapping):
        raise ConfigurationError(name, f"expected a dict (or a JSON object), got {value!r}")
    return value


def _check_range(name: str, value: float, minimum: float | None, maximum: float | None) -> None:
    if minimum is not None and value < minimum:
        raise ConfigurationError(name, f"must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ConfigurationError(name, f"must be at most {maximum}, got {value}")


def get_float(
    settings: BaseSettings, name: str, *, minimum: float | None = None, maximum: float | None = None
) -> float:
    raw = setting(settings, name)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ConfigurationError(name, f"expected a number, got {raw!r}") from None
    if value != value:  # NaN
        raise ConfigurationError(name, "expected a number, got NaN")
    _check_range(name, value, minimum, maximum)
    return value


def get_int(
    settings: BaseSettings, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    raw = setting(settings, name)
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


def get_bool(settings: BaseSettings, name: str) -> bool:
    try:
        return settings.getbool(name, default_of(name))
    except ValueError:
        raise ConfigurationError(name, f"expected a boolean, got {settings.get(name)!r}") from None


def get_int_list(settings: BaseSettings, name: str, *, minimum: int) -> tuple[int, ...]:
    raw: Any = setting(settings, name)
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


def get_choice(settings: BaseSettings, name: str, choices: type[E]) -> E:
    return parse_choice(choices, setting(settings, name), name)
