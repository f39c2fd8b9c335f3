"""Sitemaps (sitemaps.org protocol): parsing with hard limits, no I/O.

A sitemap body may be gzipped (detected by its magic bytes, whatever the
headers say); it is decompressed to at most ``SITEMAP_MAX_BYTES`` (50 MB, the
protocol's limit) and parsed with Scrapy's sitemap parser (lxml, entities not
resolved, broken XML recovered as far as possible), keeping at most
``SITEMAP_MAX_URLS`` (50,000) entries. A ``sitemapindex`` lists further
sitemaps; a ``urlset`` lists pages, each with its optional ``lastmod``.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from enum import StrEnum

from lxml.etree import LxmlError
from scrapy.settings import BaseSettings
from scrapy.utils.sitemap import Sitemap

from crawler.exceptions import CrawlerError
from crawler.requestmeta import SITEMAP_META
from crawler.settings_parsing import get_bool, get_int

GZIP_MAGIC = b"\x1f\x8b"


class SitemapKind(StrEnum):
    INDEX = "sitemapindex"
    URLSET = "urlset"


class SitemapError(CrawlerError):
    """A sitemap that cannot be used (too large, not a sitemap, corrupt)."""


@dataclass(frozen=True)
class SitemapEntry:
    loc: str
    lastmod: str | None = None


@dataclass(frozen=True)
class SitemapContent:
    kind: SitemapKind
    entries: list[SitemapEntry] = field(default_factory=list)
    #: True when entries beyond ``max_urls`` were left out.
    truncated: bool = False


def gunzip_bounded(data: bytes, max_bytes: int) -> bytes:
    """Decompress a gzip body, refusing more than ``max_bytes`` of output."""
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = decompressor.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise SitemapError(f"corrupt gzip: {exc}") from None
    if len(out) > max_bytes or decompressor.unconsumed_tail:
        raise SitemapError(f"more than {max_bytes} bytes once decompressed")
    return out


def parse_sitemap(body: bytes, max_urls: int = 50_000, max_bytes: int = 50 * 1024 * 1024) -> SitemapContent:
    if body.startswith(GZIP_MAGIC):
        body = gunzip_bounded(body, max_bytes)
    if len(body) > max_bytes:
        raise SitemapError(f"more than {max_bytes} bytes")
    if not body.strip():
        raise SitemapError("empty body")
    try:
        sitemap = Sitemap(body)
        kind = SitemapKind(sitemap.type)
    except (LxmlError, StopIteration, ValueError) as exc:
        raise SitemapError(f"not a sitemap: {exc}") from None
    entries: list[SitemapEntry] = []
    truncated = False
    try:
        for element in sitemap:
            loc = element.get("loc")
            if not loc:
                continue
            if len(entries) >= max_urls:
                truncated = True
                break
            entries.append(SitemapEntry(loc.strip(), (element.get("lastmod") or "").strip() or None))
    except LxmlError as exc:
        if not entries:
            raise SitemapError(f"broken sitemap: {exc}") from None
    return SitemapContent(kind, entries, truncated)




def sitemap_meta(max_bytes: int) -> dict[str, object]:
    """The meta of a sitemap request: marked, and allowed up to ``max_bytes``."""
    return {SITEMAP_META: True, "download_maxsize": max_bytes}


@dataclass(frozen=True)
class SitemapSettings:
    #: Fetch the sitemaps robots.txt lists (``SITEMAPS_ENABLED``).
    enabled: bool = True
    #: Try ``/sitemap.xml`` when robots.txt lists none (``SITEMAPS_FALLBACK``).
    fallback: bool = False
    max_urls: int = 50_000
    max_bytes: int = 50 * 1024 * 1024
    #: Scrapy priority of sitemap fetches and of the URLs they list (``SITEMAP_PRIORITY``).
    priority: int = 1

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SitemapSettings:
        return cls(
            enabled=get_bool(settings, "SITEMAPS_ENABLED"),
            fallback=get_bool(settings, "SITEMAPS_FALLBACK"),
            max_urls=get_int(settings, "SITEMAP_MAX_URLS", minimum=1),
            max_bytes=get_int(settings, "SITEMAP_MAX_BYTES", minimum=1024),
            priority=get_int(settings, "SITEMAP_PRIORITY"),
        )
