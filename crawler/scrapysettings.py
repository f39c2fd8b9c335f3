"""Scrapy's standard settings the crawler replaces, and how it reads them (:data:`TABLE`).

A team's project keeps its settings: :func:`translate` (run by the add-on)
turns each Scrapy setting the project or the command line gives into the
crawler's own, logging one line for each value it reads differently than
Scrapy would, and neutralizes Scrapy's setting where Scrapy's component would
otherwise act a second time (``DOWNLOAD_DELAY`` is per host across every
worker in the frontier; Scrapy's per-slot delay would add to it). A crawler
setting the project gives itself wins over the Scrapy one, with a warning.

The docs' table (``docs/reference/scrapy-settings.md``) is generated from
:data:`TABLE` (``python -m crawler.scrapysettings``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings

from crawler.exceptions import ConfigurationError

logger = logging.getLogger(__name__)

#: Translation of one Scrapy setting: its value -> the crawler's settings to set.
Rule = Callable[[BaseSettings, Any], dict[str, Any]]

_NO_CHANGE = object()


@dataclass(frozen=True)
class Mapping:
    scrapy: str
    crawler: str
    how: str
    rule: Rule | None = None
    #: What Scrapy's setting becomes once translated (``_NO_CHANGE``: left as given).
    neutral: Any = _NO_CHANGE


def _number(settings: BaseSettings, name: str) -> float:
    try:
        return float(settings.get(name))
    except (TypeError, ValueError):
        raise ConfigurationError(name, f"not a number: {settings.get(name)!r}") from None


def _autothrottle(settings: BaseSettings, value: Any) -> dict[str, Any]:
    if not settings.getbool("AUTOTHROTTLE_ENABLED"):
        return {}
    target = _number(settings, "AUTOTHROTTLE_TARGET_CONCURRENCY")
    if target <= 0:
        raise ConfigurationError("AUTOTHROTTLE_TARGET_CONCURRENCY", f"must be > 0, not {target}")
    return {"FRONTIER_DELAY_FACTOR": 1.0 / target, "FRONTIER_MAX_DELAY": _number(settings, "AUTOTHROTTLE_MAX_DELAY")}


def _retry_enabled(settings: BaseSettings, value: Any) -> dict[str, Any]:
    return {} if settings.getbool("RETRY_ENABLED") else {"RETRY_MAX_RETRIES": 0, "RETRY_MAX_THROTTLED": 0}


def _retry_codes(settings: BaseSettings, value: Any) -> dict[str, Any]:
    try:
        codes = sorted({int(code) for code in settings.getlist("RETRY_HTTP_CODES")})
    except ValueError:
        raise ConfigurationError("RETRY_HTTP_CODES", f"not a list of status codes: {value!r}") from None
    return {"RETRY_HTTP_STATUSES": codes}


def _depth(settings: BaseSettings, value: Any) -> dict[str, Any]:
    limit = settings.getint("DEPTH_LIMIT")
    return {"URL_MAX_DEPTH": limit} if limit > 0 else {}


def _per_domain(settings: BaseSettings, value: Any) -> dict[str, Any]:
    per_key = int(_number(settings, "CONCURRENT_REQUESTS_PER_DOMAIN"))
    if per_key < 1:
        raise ConfigurationError("CONCURRENT_REQUESTS_PER_DOMAIN", f"must be >= 1, not {per_key}")
    return {"FRONTIER_CONCURRENCY_PER_KEY": per_key}


def _per_ip(settings: BaseSettings, value: Any) -> dict[str, Any]:
    per_key = int(_number(settings, "CONCURRENT_REQUESTS_PER_IP"))
    if per_key < 0:
        raise ConfigurationError("CONCURRENT_REQUESTS_PER_IP", f"must be >= 0, not {per_key}")
    return {"FRONTIER_POLITENESS_KEY": "ip", "FRONTIER_CONCURRENCY_PER_KEY": per_key} if per_key else {}


def _redis_host(settings: BaseSettings, value: Any) -> dict[str, Any]:
    if settings.get("REDIS_URL"):
        return {}
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.getint("REDIS_PORT") or 6379
    return {"REDIS_URL": f"redis://{host}:{port}"}


TABLE: tuple[Mapping, ...] = (
    Mapping("SCHEDULER", "(the frontier)", "Replaced: the Redis frontier is the scheduler, shared by every worker. "
            "A project that names another one (scrapy-redis's) gets an error naming the setting."),
    Mapping("DUPEFILTER_CLASS", "(the seen set)", "Replaced: the frontier's Bloom filter and exact set, shared by "
            "every worker (`SEEN_*`). `dont_filter=True` still skips it."),
    Mapping("JOBDIR", "`CRAWL_DATA_DIR`", "The frontier persists in Redis; with `JOBDIR` and no `REDIS_URL` the "
            "embedded Redis keeps its data in `JOBDIR/redis`."),
    Mapping("DOWNLOAD_DELAY", "`FRONTIER_MIN_DELAY`", "Read as the minimum delay between two requests to one host, "
            "across every worker; Scrapy's own per-slot delay is set to 0 so the two do not add up.",
            lambda s, v: {"FRONTIER_MIN_DELAY": _number(s, "DOWNLOAD_DELAY")}, 0),
    Mapping("AUTOTHROTTLE_ENABLED", "`FRONTIER_DELAY_FACTOR`, `FRONTIER_MAX_DELAY`",
            "With AutoThrottle on, the delay after a fetch is its latency / `AUTOTHROTTLE_TARGET_CONCURRENCY` "
            "(the delay factor) up to `AUTOTHROTTLE_MAX_DELAY`, per host across workers; Scrapy's AutoThrottle "
            "is turned off.", _autothrottle, False),
    Mapping("CONCURRENT_REQUESTS_PER_IP", "`FRONTIER_POLITENESS_KEY`, `FRONTIER_CONCURRENCY_PER_KEY`", "Non-zero: "
            "read as `FRONTIER_POLITENESS_KEY = \"ip\"` with that many requests in flight per address across "
            "every worker; as in Scrapy, it wins over `CONCURRENT_REQUESTS_PER_DOMAIN`.", _per_ip),
    Mapping("CONCURRENT_REQUESTS_PER_DOMAIN", "`FRONTIER_CONCURRENCY_PER_KEY`", "Read as the requests in flight "
            "per host (per `FRONTIER_POLITENESS_KEY`) across every worker (Scrapy's default of 8 is not: unset, "
            "one at a time); their starts are spaced by the delay, as Scrapy's download slots space theirs "
            "(Scrapy's own per-slot limit keeps the value and never binds: a worker holds no more); they overlap "
            "only when the delay is shorter than the answers take: lower `FRONTIER_DELAY_FACTOR` "
            "(`AUTOTHROTTLE_TARGET_CONCURRENCY = k`).", _per_domain),
    Mapping("ROBOTSTXT_OBEY", "`ROBOTS_ENABLED`", "Read as `ROBOTS_ENABLED`: the crawler's robots.txt (RFC 9309, "
            "fetched once per host across workers, before its pages) replaces Scrapy's middleware.",
            lambda s, v: {"ROBOTS_ENABLED": s.getbool("ROBOTSTXT_OBEY")}),
    Mapping("ROBOTSTXT_USER_AGENT", "`ROBOTSTXT_USER_AGENT`", "Honoured: the token matched against `User-agent` "
            "lines (then `ROBOTS_USER_AGENT_TOKEN`, then the product token of `USER_AGENT`)."),
    Mapping("ROBOTSTXT_PARSER", "(protego)", "Replaced: protego with the crawler's RFC 9309 pre-pass."),
    Mapping("RETRY_ENABLED", "`RETRY_MAX_RETRIES`, `RETRY_MAX_THROTTLED`", "`False` is read as no retries. Retries "
            "go back through the frontier with backoff and `Retry-After`; Scrapy's middleware is replaced.",
            _retry_enabled),
    Mapping("RETRY_TIMES", "`RETRY_MAX_RETRIES`", "Read as `RETRY_MAX_RETRIES`.",
            lambda s, v: {"RETRY_MAX_RETRIES": s.getint("RETRY_TIMES")}),
    Mapping("RETRY_HTTP_CODES", "`RETRY_HTTP_STATUSES`", "Read as the statuses retried (429 and 503 as throttling: "
            "the host backs off, `Retry-After` honoured). Unset: every 5xx and 429.", _retry_codes),
    Mapping("DEPTH_LIMIT", "`URL_MAX_DEPTH`", "Honoured by Scrapy's depth middleware (kept by the add-on) and read "
            "as `URL_MAX_DEPTH` by the frontier's filter.", _depth),
    Mapping("HTTPPROXY_ENABLED", "(Scrapy's)", "Honoured, with `http_proxy` / `https_proxy`: Scrapy's proxy "
            "middleware is kept; requests through a proxy take the aiohttp client."),
    Mapping("REDIS_HOST", "`REDIS_URL`", "scrapy-redis's: read as `REDIS_URL = redis://host:port` when "
            "`REDIS_URL` is not given.", _redis_host),
    Mapping("REDIS_PORT", "`REDIS_URL`", "scrapy-redis's: see `REDIS_HOST`.", _redis_host),
    Mapping("SCHEDULER_PERSIST", "(always)", "scrapy-redis's: the frontier always persists; start over with "
            "`FRONTIER_RESET_ON_START = True` or `scrapy frontier reset`."),
    Mapping("SCHEDULER_FLUSH_ON_START", "`FRONTIER_RESET_ON_START`", "scrapy-redis's: read as "
            "`FRONTIER_RESET_ON_START`.",
            lambda s, v: {"FRONTIER_RESET_ON_START": s.getbool("SCHEDULER_FLUSH_ON_START")}),
)

_GIVEN = SETTINGS_PRIORITIES["project"]


def given(settings: BaseSettings, name: str) -> bool:
    """Whether the project, a spider or the command line set ``name`` (not a default)."""
    return name in settings and (settings.getpriority(name) or 0) >= _GIVEN


def translate(settings: BaseSettings, *, log: bool = True) -> list[str]:
    """Read the Scrapy settings of :data:`TABLE` that are given as the crawler's; the lines (logged if ``log``)."""
    lines: list[str] = []
    for mapping in TABLE:
        if mapping.rule is None or not given(settings, mapping.scrapy):
            continue
        value = settings.get(mapping.scrapy)
        priority = settings.getpriority(mapping.scrapy) or _GIVEN
        for name, new in mapping.rule(settings, value).items():
            if given(settings, name) and settings.get(name) != new:
                lines.append(f"{mapping.scrapy} = {value!r} ignored for {name}: {name} = {settings.get(name)!r} "
                             "is set")
                continue
            if settings.get(name) != new:
                lines.append(f"{mapping.scrapy} = {value!r} read as {name} = {new!r}")
            settings.set(name, new, priority)
        if mapping.neutral is not _NO_CHANGE and settings.get(mapping.scrapy) != mapping.neutral:
            settings.set(mapping.scrapy, mapping.neutral, priority)
    for line in lines if log else ():
        logger.warning("Scrapy setting: %s (docs: Scrapy's settings)", line)
    return lines


def reference() -> str:
    """The docs' table, Markdown."""
    out = [
        "# Scrapy's settings",
        "",
        "Generated from `crawler/scrapysettings.py` (`python -m crawler.scrapysettings`). The Scrapy settings "
        "the crawler replaces, and how the add-on reads a value a project gives (one warning line each, "
        "`Scrapy setting: ...`). A crawler setting the project sets itself wins. Every other Scrapy setting "
        "works as Scrapy documents it.",
        "",
        "| Scrapy setting | the crawler's | how it is read |",
        "|---|---|---|",
    ]
    out += [f"| `{m.scrapy}` | {m.crawler} | {m.how} |" for m in TABLE]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
