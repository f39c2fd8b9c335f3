"""Which discovered URLs are worth a fetch: filters and trap defences (pure, no I/O).

:class:`UrlFilter` normalizes a URL and applies the rules below in order; the
first rule that refuses it names the :class:`DropReason` (counted by the
scheduler in ``urls/dropped/<reason>``). Page budgets (``HOST_PAGE_BUDGET``,
``DOMAIN_PAGE_BUDGET``) are the frontier's, counted in Redis so they hold
across workers.

==================  ==============================================================
rule                setting (default)
==================  ==============================================================
scheme              ``URL_ALLOWED_SCHEMES`` (http, https)
malformed           the URL cannot be normalized (:mod:`crawler.urls.normalize`)
length              ``URL_MAX_LENGTH`` (2,048 characters, normalized)
extension           ``URL_DENY_EXTENSIONS`` (none; the web spider: images, media,
                    archives, PDF, office documents...), minus
                    ``URL_ALLOW_EXTENSIONS`` (a module that handles a type
                    re-enables it there)
blocked host        ``URL_BLOCKED_HOSTS`` and the file ``URL_BLOCKED_HOSTS_FILE``
                    (one host per line; a host blocks its subdomains too)
blocked pattern     ``URL_BLOCKED_PATTERNS`` and the file ``URL_BLOCKED_PATTERNS_FILE``
                    (regular expressions, searched in the normalized URL)
scope               ``URL_ALLOWED_DOMAINS`` (a domain allows its subdomains) and
                    ``URL_ALLOWED_PREFIXES``; both empty: no scope limit
depth               ``URL_MAX_DEPTH`` (25 links from a seed; 0: no limit)
repeated segments   ``URL_MAX_SEGMENT_REPEATS`` (2): a path segment, or a pair of
                    them, repeated 3 or more times in a row (``/a/a/a``,
                    ``/a/b/a/b/a/b``) is a trap
==================  ==============================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_int, get_list
from crawler.urls.normalize import DEFAULT_CONFIG, EncodedHostError, NormalizationConfig, UrlError, normalize_url_parts

#: The web spider's ``URL_DENY_EXTENSIONS``: what a broad crawl of pages does not enqueue.
BROAD_CRAWL_DENY_EXTENSIONS = [
    # images
    "jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp", "svg", "ico", "heic", "avif", "psd", "raw",
    # audio and video
    "mp3", "wav", "ogg", "oga", "flac", "aac", "m4a", "wma", "mp4", "m4v", "mkv", "webm", "avi", "mov", "wmv",
    "flv", "mpg", "mpeg", "3gp",
    # archives and binaries
    "zip", "rar", "7z", "tar", "gz", "tgz", "bz2", "xz", "zst", "iso", "dmg", "exe", "msi", "bin", "apk", "deb",
    "rpm", "jar",
    # documents
    "pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "rtf", "epub", "ps",
    # fonts, styles and scripts
    "woff", "woff2", "ttf", "otf", "eot", "css", "js",
]


class DropReason(StrEnum):
    SCHEME = "scheme"
    MALFORMED = "malformed"
    #: A percent-encoded host that does not decode to a valid host.
    ENCODED_HOST = "encoded_host"
    LENGTH = "length"
    EXTENSION = "extension"
    BLOCKED_HOST = "blocked_host"
    BLOCKED_PATTERN = "blocked_pattern"
    OUT_OF_SCOPE = "out_of_scope"
    DEPTH = "depth"
    REPEATED_SEGMENTS = "repeated_segments"
    HOST_BUDGET = "host_budget"
    DOMAIN_BUDGET = "domain_budget"


def _lines(path: str | None, setting: str) -> list[str]:
    if not path:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(setting, f"cannot read {path!r}: {exc}") from None
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


@dataclass(frozen=True)
class FilterConfig:
    allowed_schemes: frozenset[str] = frozenset({"http", "https"})
    max_length: int = 2048
    deny_extensions: frozenset[str] = frozenset()
    blocked_hosts: frozenset[str] = frozenset()
    blocked_patterns: re.Pattern[str] | None = None
    allowed_domains: frozenset[str] = frozenset()
    allowed_prefixes: tuple[str, ...] = ()
    max_depth: int = 25
    max_segment_repeats: int = 2
    normalization: NormalizationConfig = field(default=DEFAULT_CONFIG)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> FilterConfig:
        deny = {e.lower().lstrip(".") for e in get_list(settings, "URL_DENY_EXTENSIONS")}
        deny -= {e.lower().lstrip(".") for e in get_list(settings, "URL_ALLOW_EXTENSIONS")}
        hosts = [h.lower().strip(".") for h in get_list(settings, "URL_BLOCKED_HOSTS")]
        hosts_file = settings.get("URL_BLOCKED_HOSTS_FILE")
        hosts += [h.lower().strip(".") for h in _lines(hosts_file, "URL_BLOCKED_HOSTS_FILE")]
        patterns = list(get_list(settings, "URL_BLOCKED_PATTERNS"))
        patterns += _lines(settings.get("URL_BLOCKED_PATTERNS_FILE"), "URL_BLOCKED_PATTERNS_FILE")
        compiled = None
        if patterns:
            for pattern in patterns:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigurationError(
                        "URL_BLOCKED_PATTERNS", f"bad regular expression {pattern!r}: {exc}"
                    ) from None
            compiled = re.compile("|".join(f"(?:{p})" for p in patterns))
        return cls(
            allowed_schemes=frozenset(s.lower() for s in get_list(settings, "URL_ALLOWED_SCHEMES")),
            max_length=get_int(settings, "URL_MAX_LENGTH", minimum=16),
            deny_extensions=frozenset(deny),
            blocked_hosts=frozenset(hosts),
            blocked_patterns=compiled,
            allowed_domains=frozenset(d.lower().strip(".") for d in get_list(settings, "URL_ALLOWED_DOMAINS")),
            allowed_prefixes=tuple(get_list(settings, "URL_ALLOWED_PREFIXES")),
            max_depth=get_int(settings, "URL_MAX_DEPTH", minimum=0),
            max_segment_repeats=get_int(settings, "URL_MAX_SEGMENT_REPEATS", minimum=1),
            normalization=NormalizationConfig.from_settings(settings),
        )


class Dropped(Exception):
    def __init__(self, reason: DropReason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}")


def _host_matches(host: str, domains: frozenset[str]) -> bool:
    if host in domains:
        return True
    dot = host.find(".")
    while dot >= 0:
        if host[dot + 1 :] in domains:
            return True
        dot = host.find(".", dot + 1)
    return False


def repeated_segments(path: str, max_repeats: int) -> bool:
    """True if a segment, or a pair of segments, repeats more than ``max_repeats`` times in a row.

    A chunk of ``period`` segments repeated ``r`` times in a row makes
    ``(r - 1) * period`` consecutive positions where a segment equals the one
    ``period`` before it; one linear scan per period finds that.
    """
    segments = [s for s in path.split("/") if s]
    if len(set(segments)) == len(segments):
        return False  # nothing repeats at all
    for period in (1, 2):
        run = 0
        for index in range(period, len(segments)):
            if segments[index] == segments[index - period]:
                run += 1
                if run >= max_repeats * period:
                    return True
            else:
                run = 0
    return False


class UrlFilter:
    def __init__(self, config: FilterConfig) -> None:
        self.config = config

    def check(self, url: str, depth: int = 0, *, by_extension: bool = True) -> tuple[str, str]:
        """``(normalized_url, host)`` of a URL worth fetching; raises :class:`Dropped` otherwise.

        ``by_extension=False`` skips the extension rule, for fetches whose type
        is known from elsewhere (a sitemap is often ``.xml.gz``).
        """
        config = self.config
        colon = url.find(":")
        if colon < 0 or url[:colon].strip().lower() not in config.allowed_schemes:
            raise Dropped(DropReason.SCHEME, url[:40])
        try:
            normalized, host, path = normalize_url_parts(url, config.normalization)
        except EncodedHostError as exc:
            raise Dropped(DropReason.ENCODED_HOST, str(exc)) from None
        except UrlError as exc:
            raise Dropped(DropReason.MALFORMED, str(exc)) from None
        if len(normalized) > config.max_length:
            raise Dropped(DropReason.LENGTH, str(len(normalized)))
        if config.max_depth and depth > config.max_depth:
            raise Dropped(DropReason.DEPTH, str(depth))
        last = path.rsplit("/", 1)[-1]
        dot = last.rfind(".")
        if by_extension and dot >= 0 and last[dot + 1 :].lower() in config.deny_extensions:
            raise Dropped(DropReason.EXTENSION, last[dot + 1 :])
        if config.blocked_hosts and _host_matches(host, config.blocked_hosts):
            raise Dropped(DropReason.BLOCKED_HOST, host)
        if config.blocked_patterns is not None and config.blocked_patterns.search(normalized):
            raise Dropped(DropReason.BLOCKED_PATTERN, normalized)
        if config.allowed_domains or config.allowed_prefixes:
            in_domain = bool(config.allowed_domains) and _host_matches(host, config.allowed_domains)
            in_prefix = bool(config.allowed_prefixes) and normalized.startswith(config.allowed_prefixes)
            if not (in_domain or in_prefix):
                raise Dropped(DropReason.OUT_OF_SCOPE, host)
        if path.count("/") > config.max_segment_repeats and repeated_segments(path, config.max_segment_repeats):
            raise Dropped(DropReason.REPEATED_SEGMENTS, path[:80])
        return normalized, host
