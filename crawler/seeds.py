"""Seed URLs from a file (``-a seeds=FILE``) or the command line (``-a urls=...``), read as a stream.

A seeds file may hold millions of URLs (a domain list, a previous crawl's
URLs): :func:`iter_seeds` reads it a line at a time, so nothing holds the
whole list; :func:`seed_hosts` checks every line before a crawl starts (one
clear line for a missing file, an empty one or a line that is not an http(s)
URL) and keeps one URL per host (what the identity check needs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from crawler.exceptions import ConfigurationError
from crawler.urls import UrlError, normalize_url

_SPLIT = re.compile(r"[\s,]+")


def _check(url: str, where: str, argument: str) -> tuple[str, str]:
    try:
        return url, normalize_url(url)[1]
    except UrlError:
        raise ConfigurationError(argument, f"{where}: {url!r} is not an http(s) URL") from None


def _file_lines(seeds: str) -> Iterator[tuple[int, str]]:
    path = Path(seeds)
    if not path.is_file():
        raise ConfigurationError("seeds", f"seeds file {seeds!r} does not exist")
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                line = line.strip()
                if line and not line.startswith("#"):
                    yield number, line
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError("seeds", f"cannot read seeds file {seeds!r}: {exc}") from None


def iter_seeds(seeds: str | None, urls: str | None) -> Iterator[str]:
    """The seed URLs in the order given, the file a line at a time (repeats are the seen set's to drop)."""
    if seeds is not None:
        for _, line in _file_lines(seeds):
            yield line
    if urls is not None:
        yield from (part for part in _SPLIT.split(urls) if part)


def seed_hosts(seeds: str | None, urls: str | None) -> list[str]:
    """Check every seed (a clear error naming the argument otherwise); the first URL of each host.

    The file holds one URL per line; blank lines and lines starting with ``#``
    are ignored. A missing or empty file, and anything that is not an http(s)
    URL, raise :class:`ConfigurationError` naming the argument.
    """
    first: dict[str, str] = {}
    if seeds is not None:
        found = False
        for number, line in _file_lines(seeds):
            url, host = _check(line, f"line {number} of {seeds}", "seeds")
            first.setdefault(host, url)
            found = True
        if not found:
            raise ConfigurationError("seeds", f"seeds file {seeds!r} contains no URLs")
    if urls is not None:
        given = [part for part in _SPLIT.split(urls) if part]
        if not given:
            raise ConfigurationError("urls", "no URLs given")
        for part in given:
            url, host = _check(part, "urls", "urls")
            first.setdefault(host, url)
    return list(first.values())


def load_seeds(seeds: str | None, urls: str | None) -> list[str]:
    """Every seed URL in the order given, without repeats, each checked (small lists: tests, commands)."""
    seed_hosts(seeds, urls)
    return list(dict.fromkeys(iter_seeds(seeds, urls)))
