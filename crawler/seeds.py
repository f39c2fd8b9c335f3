"""Seed URLs from a file (``-a seeds=FILE``) or the command line (``-a urls=...``)."""

from __future__ import annotations

import re
from pathlib import Path

from crawler.exceptions import ConfigurationError
from crawler.urls import UrlError, normalize_url

_SPLIT = re.compile(r"[\s,]+")


def _check(url: str, where: str, argument: str) -> str:
    try:
        normalize_url(url)
    except UrlError:
        raise ConfigurationError(argument, f"{where}: {url!r} is not an http(s) URL") from None
    return url


def load_seeds(seeds: str | None, urls: str | None) -> list[str]:
    """Seed URLs in the order given, without repeats.

    The file holds one URL per line; blank lines and lines starting with ``#``
    are ignored. Raises :class:`ConfigurationError` naming the argument for a
    missing or empty file and for anything that is not an http(s) URL.
    """
    found: list[str] = []
    if seeds is not None:
        path = Path(seeds)
        if not path.is_file():
            raise ConfigurationError("seeds", f"seeds file {seeds!r} does not exist")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError("seeds", f"cannot read seeds file {seeds!r}: {exc}") from None
        for number, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(_check(line, f"line {number} of {seeds}", "seeds"))
        if not found:
            raise ConfigurationError("seeds", f"seeds file {seeds!r} contains no URLs")
    if urls is not None:
        given = [part for part in _SPLIT.split(urls) if part]
        if not given:
            raise ConfigurationError("urls", "no URLs given")
        found += [_check(url, "urls", "urls") for url in given]
    return list(dict.fromkeys(found))
