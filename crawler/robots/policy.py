"""robots.txt policy (RFC 9309): what a fetch result means, and the rules. No I/O.

Status semantics (RFC 9309 2.3.1; Scrapy's own middleware allows all on any failure):

============================  ======================================================
fetch result                  decision
============================  ======================================================
2xx                           parse the first ``ROBOTS_MAX_BYTES`` (500 KiB)
3xx                           follow up to 5 redirects (any host); more: as 4xx
429                           *too fast*: like 5xx (below), the retry not before
                              ``Retry-After`` (capped at ``ROBOTS_RETRY_MAX_DELAY``)
4xx, including 401 and 403    *unavailable*: allow everything. 401/403 are treated
                              like any 4xx, as RFC 9309 and Google do: a server that
                              protects its robots.txt has not published rules
5xx, timeout, network error   *unreachable*: disallow everything for the host, and
                              fetch robots.txt again after a backoff
                              (``ROBOTS_RETRY_DELAY`` doubling up to
                              ``ROBOTS_RETRY_MAX_DELAY``); after
                              ``ROBOTS_MAX_FAILURES`` consecutive failures the host's
                              URLs go to the dead-letter queue
============================  ======================================================

**The group** (RFC 9309 2.2.1, :func:`prepare_robots`): the groups whose
``User-agent`` product token equals ours (:func:`robots_token`), whole and
case-insensitively, combined; else those for ``*``; else none. protego then
reads that group's rules: longest match wins, ``Allow`` wins ties.
``Crawl-delay`` becomes the host's minimum delay (capped at
``ROBOTS_MAX_CRAWL_DELAY``). docs/citizenship.md has the whole contract:
tokens, the file as the real web writes it, and where it differs from
Google's parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any
from urllib.parse import urlsplit

import msgpack
from protego import Protego
from scrapy.settings import BaseSettings

from crawler.policy.backoff import capped_exponential
from crawler.settings_parsing import get_bool, get_float, get_int

RECORD_VERSION = 1
#: A product token as the real web writes it: a value's first word, up to "/" (a version) and
#: other separators; RFC 9309 (2.2.1) allows only letters, "-" and "_" in it.
_PRODUCT_TOKEN = re.compile(r"[^\s/;,()*]+")
_RFC_TOKEN = re.compile(r"[A-Za-z_-]+")
#: Directives protego understands (its spellings and misspellings), lowercase.
_USER_AGENT_KEYS = frozenset({"user-agent", "useragent", "user agent"})
#: Lines that belong to no group (they neither start nor end one).
_SITE_WIDE_KEYS = frozenset({"sitemap", "sitemaps", "site-map", "host"})
_KNOWN_KEYS = _USER_AGENT_KEYS | _SITE_WIDE_KEYS | frozenset({
    "allow", "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw",
    "crawl-delay", "crawl delay", "request-rate", "request rate", "visit-time", "visit time",
})
#: A UTF-8 byte-order mark, and the cut pieces of one a server may send.
_BOMS = (b"\xef\xbb\xbf", b"\xef\xbb", b"\xef")


def product_token(value: str) -> str:
    """The product token at the start of ``value``: its first word, up to a version or comment
    (``"mybot/1.0 (+url)"`` -> ``"mybot"``, ``"MJ12bot/1.7"`` -> ``"MJ12bot"``), or ``""``."""
    match = _PRODUCT_TOKEN.match(value.strip())
    return match.group(0) if match else ""


def is_rfc_token(token: str) -> bool:
    """True if ``token`` has RFC 9309's syntax for a product token: letters, ``-`` and ``_``."""
    return _RFC_TOKEN.fullmatch(token) is not None


def robots_token(settings: BaseSettings) -> str:
    """The token our robots.txt group is looked up by: ``ROBOTSTXT_USER_AGENT``, ``ROBOTS_USER_AGENT_TOKEN``,
    the product token of ``USER_AGENT``, ``BOT_NAME``, in that order."""
    for name in ("ROBOTSTXT_USER_AGENT", "ROBOTS_USER_AGENT_TOKEN"):
        value = settings.get(name)
        if value:
            return product_token(str(value)) or str(value).strip()
    return product_token(str(settings.get("USER_AGENT") or "")) or str(settings.get("BOT_NAME") or "crawler")


def prepare_robots(body: bytes, token: str) -> str:
    """robots.txt as protego should read it for ``token`` (see the module's docstring): the rules
    of the groups that apply to us, under ``user-agent: *``, then the sitemaps. No byte-order mark,
    no line protego would read differently from RFC 9309."""
    for bom in _BOMS:
        if body.startswith(bom):
            body = body[len(bom):]
            break
    text = body.decode("utf-8", "replace").lstrip("\ufeff")
    wanted = token.lower()
    ours: list[str] = []
    everyone: list[str] = []
    sitemaps: list[str] = []
    named_us = named_everyone = False
    #: The group being read: does it name us, does it name everyone; None before the first
    #: User-agent line (rules there belong to no group and are ignored).
    group: tuple[bool, bool] | None = None
    agents_open = False
    for line in text.splitlines():
        directive = _directive(line.split("#", 1)[0])
        if directive is None:
            continue
        key, value = directive
        if key in _USER_AGENT_KEYS:
            us, star = group if agents_open and group is not None else (False, False)
            if _is_star(value):
                star = named_everyone = True
            elif product_token(value).lower() == wanted:
                us = named_us = True
            group, agents_open = (us, star), True
        elif key in _SITE_WIDE_KEYS:
            if key != "host":
                sitemaps.append(f"sitemap: {value}")
        else:
            agents_open = False
            if group is not None:
                if group[0]:
                    ours.append(f"{key}: {value}")
                if group[1]:
                    everyone.append(f"{key}: {value}")
    # RFC 9309 2.2.1: the groups naming our token, combined; else those naming "*"; else none.
    if named_us:
        return "\n".join(["user-agent: *", *ours, *sitemaps])
    if named_everyone:
        return "\n".join(["user-agent: *", *everyone, *sitemaps])
    return "\n".join(sitemaps)


def _is_star(value: str) -> bool:
    """``*`` alone, or followed by a space and more (as Google's parser reads it)."""
    return value == "*" or (value.startswith("*") and value[1:2].isspace())


def _directive(line: str) -> tuple[str, str] | None:
    """A known directive's key (lowercase) and value, read as protego reads them: ``key: value``, or
    ``key value`` without the colon; None for anything else."""
    key, colon, value = line.partition(":")
    if colon and key.strip().lower() in _KNOWN_KEYS:
        return key.strip().lower(), value.strip()
    words = line.split()
    for count in (1, 2):
        candidate = " ".join(words[:count]).lower()
        if candidate in _KNOWN_KEYS:
            return candidate, " ".join(words[count:])
    return None
ROBOTS_PATH = "/robots.txt"
MAX_REDIRECTS = 5


class RobotsState(IntEnum):
    #: 2xx: the rules in ``body`` apply.
    RULES = 0
    #: 4xx (or too many redirects): everything is allowed.
    ALLOW_ALL = 1
    #: 5xx or a network error: nothing is allowed until ``expires_at``.
    UNREACHABLE = 2


@dataclass(frozen=True)
class RobotsConfig:
    enabled: bool
    user_agent_token: str
    cache_ttl: float
    max_crawl_delay: float
    max_bytes: int
    retry_delay: float
    retry_max_delay: float
    max_failures: int
    local_cache_size: int
    max_sitemaps: int

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> RobotsConfig:
        token = robots_token(settings)
        return cls(
            enabled=get_bool(settings, "ROBOTS_ENABLED"),
            user_agent_token=token,
            cache_ttl=get_float(settings, "ROBOTS_CACHE_TTL", minimum=1.0),
            max_crawl_delay=get_float(settings, "ROBOTS_MAX_CRAWL_DELAY", minimum=0.0),
            max_bytes=get_int(settings, "ROBOTS_MAX_BYTES", minimum=1024),
            retry_delay=get_float(settings, "ROBOTS_RETRY_DELAY", minimum=0.0),
            retry_max_delay=get_float(settings, "ROBOTS_RETRY_MAX_DELAY", minimum=0.0),
            max_failures=get_int(settings, "ROBOTS_MAX_FAILURES", minimum=1),
            local_cache_size=get_int(settings, "ROBOTS_LOCAL_CACHE_SIZE", minimum=1),
            max_sitemaps=get_int(settings, "ROBOTS_MAX_SITEMAPS", minimum=0),
        )

    def retry_after(self, failures: int) -> float:
        """Seconds before robots.txt is fetched again after ``failures`` (>= 1) in a row."""
        return capped_exponential(self.retry_delay, self.retry_max_delay, failures - 1)


@dataclass(frozen=True)
class RobotsRecord:
    """The robots.txt decision for one origin, as shared by every worker."""

    state: RobotsState
    fetched_at: float
    expires_at: float
    status: int = 0
    body: bytes = b""
    failures: int = 0
    error: str = ""
    truncated: bool = False

    def expired(self, now: float) -> bool:
        return now >= self.expires_at

    def encode(self) -> bytes:
        blob: bytes = msgpack.packb(
            [RECORD_VERSION, int(self.state), self.fetched_at, self.expires_at, self.status, self.body,
             self.failures, self.error, self.truncated],
            use_bin_type=True,
        )
        return blob

    @classmethod
    def decode(cls, blob: bytes) -> RobotsRecord | None:
        """The record, or None for bytes this version cannot read (it is then fetched again)."""
        try:
            fields = msgpack.unpackb(blob, raw=False)
        except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
            return None
        if not isinstance(fields, list) or len(fields) != 9 or fields[0] != RECORD_VERSION:
            return None
        _, state, fetched_at, expires_at, status, body, failures, error, truncated = fields
        return cls(RobotsState(state), fetched_at, expires_at, status, body, failures, error, truncated)


def record_for_response(
    config: RobotsConfig, status: int, body: bytes, now: float, previous: RobotsRecord | None,
    retry_after: float | None = None,
) -> RobotsRecord:
    """The decision for a final (non-redirect) HTTP answer to robots.txt (``retry_after``: the
    answer's ``Retry-After``, in seconds, if any)."""
    if status == 429:
        record = record_for_failure(config, "HTTP 429", now, previous, status)
        if retry_after is not None:
            wait = min(max(retry_after, 0.0), config.retry_max_delay)
            record = replace(record, expires_at=max(record.expires_at, now + wait))
        return record
    if 200 <= status < 300:
        truncated = len(body) > config.max_bytes
        return RobotsRecord(RobotsState.RULES, now, now + config.cache_ttl, status, body[: config.max_bytes],
                            truncated=truncated)
    if 300 <= status < 500:  # 4xx, or a 3xx we could not follow: unavailable
        return RobotsRecord(RobotsState.ALLOW_ALL, now, now + config.cache_ttl, status)
    return record_for_failure(config, f"HTTP {status}", now, previous, status)


def record_for_failure(
    config: RobotsConfig, error: str, now: float, previous: RobotsRecord | None, status: int = 0
) -> RobotsRecord:
    """The decision when robots.txt is unreachable (5xx, timeout, network error)."""
    failures = previous.failures + 1 if previous is not None and previous.state is RobotsState.UNREACHABLE else 1
    return RobotsRecord(RobotsState.UNREACHABLE, now, now + config.retry_after(failures), status, failures=failures,
                        error=error)


def record_for_too_many_redirects(config: RobotsConfig, now: float, status: int) -> RobotsRecord:
    return replace(record_for_response(config, 404, b"", now, None), status=status)


def robots_url(url: str) -> str:
    """The robots.txt URL of a URL's origin (scheme, host and port)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{ROBOTS_PATH}"


def origin_of(url: str) -> str:
    """``scheme://netloc`` of an absolute URL, without parsing the rest."""
    start = url.find("://")
    if start < 0:
        return url
    end = url.find("/", start + 3)
    query = url.find("?", start + 3)
    if query >= 0 and (end < 0 or query < end):
        end = query
    return url if end < 0 else url[:end]


@dataclass
class RobotsRules:
    """A record made usable: is a URL allowed, what delay, which sitemaps."""

    record: RobotsRecord
    user_agent_token: str
    _parser: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.record.state is RobotsState.RULES:
            self._parser = Protego.parse(prepare_robots(self.record.body, self.user_agent_token))

    def allowed(self, url: str) -> bool:
        state = self.record.state
        if state is RobotsState.ALLOW_ALL:
            return True
        path_start = url.find("/", url.find("://") + 3)
        if path_start >= 0 and url.startswith(ROBOTS_PATH, path_start) and len(url) == path_start + len(ROBOTS_PATH):
            return True
        if state is RobotsState.UNREACHABLE:
            return False
        return bool(self._parser.can_fetch(url, self.user_agent_token))

    def deciding_rule(self, url: str) -> str | None:
        """The line of our group that decides ``url`` (``"disallow: /private/"``), or None when no
        rule matches (allowed). For an operator's question, not the fetch path: one parse per rule."""
        if self.record.state is not RobotsState.RULES:
            return None
        best: tuple[int, bool, str] | None = None
        for line in prepare_robots(self.record.body, self.user_agent_token).splitlines():
            key, _, pattern = line.partition(": ")
            if key not in ("allow", "disallow") or not pattern:
                continue
            if Protego.parse(f"user-agent: *\ndisallow: {pattern}").can_fetch(url, "*"):
                continue  # the pattern does not match
            candidate = (len(pattern), key == "allow", line)
            if best is None or candidate[:2] > best[:2]:
                best = candidate
        return best[2] if best else None

    def crawl_delay(self, cap: float) -> tuple[float | None, bool]:
        """(delay in seconds or None, whether it was capped)."""
        if self._parser is None:
            return None, False
        delay = self._parser.crawl_delay(self.user_agent_token)
        if delay is None:
            return None, False
        delay = float(delay)
        if delay > cap:
            return cap, True
        return max(delay, 0.0), False

    def sitemaps(self, limit: int) -> list[str]:
        if self._parser is None:
            return []
        return list(self._parser.sitemaps)[:limit]
