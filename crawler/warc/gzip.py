"""How each WARC record is gzipped: the library and its level (``WARC_GZIP_LIBRARY``, ``WARC_GZIP_LEVEL``).

Every record is a gzip member of its own (what replay tools and the CDXJ
offsets need); any library writing standard gzip members will do, and warcio,
zlib and ``gzip`` read them all the same.

* ``isal`` (default): Intel's ISA-L (igzip, the ``isal`` package), levels 0-3,
  default 2. On 80 real HTML pages of 46 KB on average, level 2 took
  0.070 ms per page against zlib level 6's 0.84 ms (12x less CPU) for
  members 16% larger (0.216 of the page against 0.186).
* ``zlib``: Python's zlib, levels 1-9, default 6 (the classic balance; the
  choice when storage costs more than the crawl's CPU).

Measured by ``python benchmarks/gzip_levels.py`` (docs/benchmarks.md).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from isal import isal_zlib

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_choice, get_int, setting

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

#: Window bits for a gzip wrapper (one gzip member per call).
GZIP_WBITS = zlib.MAX_WBITS | 16


class GzipLibrary(Enum):
    ISAL = "isal"
    ZLIB = "zlib"


#: Each library's (lowest, highest, default) level.
LEVELS: dict[GzipLibrary, tuple[int, int, int]] = {
    GzipLibrary.ISAL: (0, 3, 2),
    GzipLibrary.ZLIB: (1, 9, 6),
}

_COMPRESS: dict[GzipLibrary, Callable[..., bytes]] = {
    GzipLibrary.ISAL: isal_zlib.compress,
    GzipLibrary.ZLIB: zlib.compress,
}


@dataclass(frozen=True)
class Gzip:
    """A library and a level: ``gzip(data)`` is one gzip member."""

    library: GzipLibrary = GzipLibrary.ISAL
    level: int | None = None

    def __post_init__(self) -> None:
        low, high, default = LEVELS[self.library]
        if self.level is None:
            object.__setattr__(self, "level", default)
        elif not low <= self.level <= high:
            raise ConfigurationError(
                "WARC_GZIP_LEVEL",
                f"{self.library.value} has levels {low}-{high}, got {self.level}"
                + (" (WARC_GZIP_LIBRARY = 'zlib' has 1-9)" if self.library is GzipLibrary.ISAL else ""),
            )

    def __call__(self, data: bytes) -> bytes:
        return _COMPRESS[self.library](data, self.level, wbits=GZIP_WBITS)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> Gzip:
        library = get_choice(settings, "WARC_GZIP_LIBRARY", GzipLibrary)
        level = None if setting(settings, "WARC_GZIP_LEVEL") is None else get_int(settings, "WARC_GZIP_LEVEL")
        return cls(library, level)
