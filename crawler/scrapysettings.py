"""Scrapy's and scrapy-redis's settings around the components the crawler replaces, and how each is read.

A team's project keeps its settings. Every setting of :data:`TABLE` is one of:

* **translated** (:attr:`Reading.TRANSLATED`): :func:`translate` (run by the
  add-on) turns the value the project or the command line gives into the
  crawler's own settings, one ``Scrapy setting: ...`` line each, and
  neutralizes Scrapy's setting where Scrapy's component would otherwise act
  a second time (``DOWNLOAD_DELAY`` is per host across every worker in the
  frontier; Scrapy's per-slot delay would add to it). A crawler setting the
  project gives itself wins over the Scrapy one, with a warning;
* **honoured** (:attr:`Reading.HONOURED`): read with Scrapy's (or
  scrapy-redis's) meaning, by the Scrapy component the add-on keeps or by the
  crawler's component that replaces it;
* **not read** (:attr:`Reading.NOT_READ`): the component that read it is
  replaced and nothing reads it; a project that gives one gets it named, with
  what to use instead, in one start-up warning (``Scrapy settings not read:
  ...``).

Settings of the crawler's own that were renamed (:data:`RENAMED`) are still
read under their old name for one release, with a deprecation warning.

The docs' table (``docs/reference/scrapy-settings.md``) is generated from this
module (``python -m crawler.scrapysettings``).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.settings import default_settings as scrapy_defaults

from crawler.exceptions import ConfigurationError

logger = logging.getLogger(__name__)

#: Translation of one Scrapy setting: its value -> the crawler's settings to set.
Rule = Callable[[BaseSettings, Any], dict[str, Any]]

_NO_CHANGE = object()


class Reading(Enum):
    TRANSLATED = "read as the crawler's"
    HONOURED = "honoured"
    NOT_READ = "not read"


@dataclass(frozen=True)
class Mapping:
    scrapy: str
    crawler: str
    how: str
    rule: Rule | None = None
    #: What Scrapy's setting becomes once translated (``_NO_CHANGE``: left as given).
    neutral: Any = _NO_CHANGE
    #: Whether a value given is read (translated, or honoured as it is), or only named in a warning.
    read: bool = True

    @property
    def reading(self) -> Reading:
        if not self.read:
            return Reading.NOT_READ
        return Reading.TRANSLATED if self.rule is not None else Reading.HONOURED


@dataclass(frozen=True)
class Renamed:
    """A setting of the crawler's own that has a new name; the old one is read, with a warning, until 0.2."""

    old: str
    new: str
    why: str


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
    return {} if settings.getbool("RETRY_ENABLED") else {"RETRY_TIMES": 0, "RETRY_MAX_THROTTLED": 0}


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


def _randomize(settings: BaseSettings, value: Any) -> dict[str, Any]:
    try:
        return {"FRONTIER_RANDOMIZE_DELAY": settings.getbool("RANDOMIZE_DOWNLOAD_DELAY")}
    except ValueError:
        raise ConfigurationError("RANDOMIZE_DOWNLOAD_DELAY", f"expected a boolean, got {value!r}") from None


def _download_delay(settings: BaseSettings, value: Any) -> dict[str, Any]:
    delay = {"FRONTIER_MIN_DELAY": _number(settings, "DOWNLOAD_DELAY")}
    if given(settings, "FRONTIER_MIN_DELAY"):
        return delay  # (ignored, and said so: the crawler's own minimum is not randomized for it)
    # As in Scrapy, a download delay is randomized (RANDOMIZE_DOWNLOAD_DELAY, default True) unless told not to.
    return {**delay, **_randomize(settings, value)}


def _redis_host(settings: BaseSettings, value: Any) -> dict[str, Any]:
    if settings.get("REDIS_URL"):
        return {}
    host = settings.get("REDIS_HOST") or "localhost"
    port = settings.getint("REDIS_PORT") or 6379
    return {"REDIS_URL": f"redis://{host}:{port}"}


def _idle_before_close(settings: BaseSettings, value: Any) -> dict[str, Any]:
    seconds = _number(settings, "SCHEDULER_IDLE_BEFORE_CLOSE")
    if seconds < 0:
        raise ConfigurationError("SCHEDULER_IDLE_BEFORE_CLOSE", f"must be >= 0, not {seconds}")
    return {"FRONTIER_IDLE_BEFORE_CLOSE": seconds}


_SCHEDULER_QUEUES = ("Not read: the frontier keeps its own queues in Redis (front queues by priority, one back "
                     "queue per host); `FRONTIER_QUEUE_WEIGHTS` sets the levels.")

TABLE: tuple[Mapping, ...] = (
    # -- the scheduler and the duplicate filter: the frontier ----------------------------------
    Mapping("SCHEDULER", "(the frontier)", "Replaced: the Redis frontier is the scheduler, shared by every worker. "
            "A project that names another one (scrapy-redis's) gets an error naming the setting."),
    Mapping("DUPEFILTER_CLASS", "(the seen set)", "Replaced: the frontier's Bloom filter and exact set, shared by "
            "every worker (`SEEN_*`). `dont_filter=True` still skips it."),
    Mapping("DUPEFILTER_DEBUG", "`frontier/duplicate`", "Not read: duplicates are counted in `frontier/duplicate`; "
            "`scrapy frontier url URL` says whether a URL was seen.", read=False),
    Mapping("SCHEDULER_DEBUG", "`frontier/local`, `frontier/meta_dropped`", "Not read: a request the frontier "
            "cannot store is logged once per callback and counted (`frontier/local`).", read=False),
    Mapping("SCHEDULER_PRIORITY_QUEUE", "`FRONTIER_QUEUE_WEIGHTS`", _SCHEDULER_QUEUES, read=False),
    Mapping("SCHEDULER_DISK_QUEUE", "`FRONTIER_QUEUE_WEIGHTS`", _SCHEDULER_QUEUES, read=False),
    Mapping("SCHEDULER_MEMORY_QUEUE", "`FRONTIER_QUEUE_WEIGHTS`", _SCHEDULER_QUEUES, read=False),
    Mapping("SCHEDULER_START_DISK_QUEUE", "`FRONTIER_QUEUE_WEIGHTS`", _SCHEDULER_QUEUES, read=False),
    Mapping("SCHEDULER_START_MEMORY_QUEUE", "`FRONTIER_QUEUE_WEIGHTS`", _SCHEDULER_QUEUES, read=False),
    Mapping("JOBDIR", "`CRAWL_DATA_DIR`", "The frontier persists in Redis; with `JOBDIR` and no `REDIS_URL` the "
            "embedded Redis keeps its data in `JOBDIR/redis`."),
    Mapping("DEPTH_PRIORITY", "(the priority levels)", "Honoured by Scrapy's depth middleware, which adjusts "
            "`Request.priority` by depth; the frontier then adds its priority score, clamps the sum to "
            "`[PRIORITY_MIN, PRIORITY_MAX]` (-2..1) and serves the levels by weight (`FRONTIER_QUEUE_WEIGHTS`, "
            "8:4:2:1), not strictly: `DEPTH_PRIORITY = 1` makes deeper pages come later, not breadth-first order "
            "(see Priority)."),
    # -- politeness: download slots, delays, AutoThrottle -------------------------------------
    Mapping("DOWNLOAD_DELAY", "`FRONTIER_MIN_DELAY`", "Read as the minimum delay between two requests to one host, "
            "across every worker, randomized as Scrapy does (0.5x to 1.5x) unless `RANDOMIZE_DOWNLOAD_DELAY = "
            "False`; Scrapy's own per-slot delay is set to 0 so the two do not add up.", _download_delay, 0),
    Mapping("RANDOMIZE_DOWNLOAD_DELAY", "`FRONTIER_RANDOMIZE_DELAY`", "Read as `FRONTIER_RANDOMIZE_DELAY`: the "
            "minimum delay of a host (`DOWNLOAD_DELAY`) is drawn from 0.5x to 1.5x of it for each request, as "
            "Scrapy draws it; the delay from the fetch time and `Crawl-delay` are not randomized. Scrapy's "
            "default (`True`) applies when the project gives `DOWNLOAD_DELAY`.", _randomize),
    Mapping("AUTOTHROTTLE_ENABLED", "`FRONTIER_DELAY_FACTOR`, `FRONTIER_MAX_DELAY`",
            "With AutoThrottle on, the delay after a fetch is its latency / `AUTOTHROTTLE_TARGET_CONCURRENCY` "
            "(the delay factor) up to `AUTOTHROTTLE_MAX_DELAY`, per host across workers; Scrapy's AutoThrottle "
            "is turned off.", _autothrottle, False),
    Mapping("AUTOTHROTTLE_START_DELAY", "`FRONTIER_MIN_DELAY`", "Not read: before a host's first answer the "
            "frontier waits `FRONTIER_MIN_DELAY` (`DOWNLOAD_DELAY`).", read=False),
    Mapping("AUTOTHROTTLE_DEBUG", "`scrapy frontier host`", "Not read: `scrapy frontier host HOST` shows a host's "
            "delay, floor and backoff.", read=False),
    Mapping("CONCURRENT_REQUESTS_PER_IP", "`FRONTIER_POLITENESS_KEY`, `FRONTIER_CONCURRENCY_PER_KEY`", "Non-zero: "
            "read as `FRONTIER_POLITENESS_KEY = \"ip\"` with that many requests in flight per address across "
            "every worker; as in Scrapy, it wins over `CONCURRENT_REQUESTS_PER_DOMAIN`.", _per_ip),
    Mapping("CONCURRENT_REQUESTS_PER_DOMAIN", "`FRONTIER_CONCURRENCY_PER_KEY`", "Read as the requests in flight "
            "per host (per `FRONTIER_POLITENESS_KEY`) across every worker, up to k at once (Scrapy's default of 8 "
            "is not read: unset, one at a time). The k slots share the host's politeness budget: each slot waits "
            "the politeness delay after its own answer, so the host gets at most k times the load of one slot "
            "(see Good citizenship). Scrapy's own per-slot limit keeps the value and never binds.", _per_domain),
    Mapping("DOWNLOAD_SLOTS", "(per-host overrides)", "Honoured, for every worker: each entry's `delay` (the key's "
            "minimum delay), `concurrency` (its requests in flight) and `randomize_delay` are kept in the shared "
            "frontier and applied to that host (or politeness key); a malformed entry is an error naming the "
            "setting before the crawl starts."),
    # -- robots.txt --------------------------------------------------------------------------
    Mapping("ROBOTSTXT_OBEY", "`ROBOTS_ENABLED`", "Read as `ROBOTS_ENABLED`: the crawler's robots.txt (RFC 9309, "
            "fetched once per host across workers, before its pages) replaces Scrapy's middleware, and writes its "
            "stats keys (`robotstxt/*`).",
            lambda s, v: {"ROBOTS_ENABLED": s.getbool("ROBOTSTXT_OBEY")}),
    Mapping("ROBOTSTXT_USER_AGENT", "`ROBOTSTXT_USER_AGENT`", "Honoured: the token matched against `User-agent` "
            "lines (then `ROBOTS_USER_AGENT_TOKEN`, then the product token of `USER_AGENT`)."),
    Mapping("ROBOTSTXT_PARSER", "(protego)", "Not read: protego with the crawler's RFC 9309 pre-pass parses every "
            "robots.txt.", read=False),
    # -- retries -------------------------------------------------------------------------------
    Mapping("RETRY_ENABLED", "`RETRY_TIMES`, `RETRY_MAX_THROTTLED`", "`False` is read as no retries. Retries "
            "go back through the frontier with backoff and `Retry-After`; Scrapy's middleware is replaced, and its "
            "stats keys (`retry/count`, `retry/reason_count/*`, `retry/max_reached`) kept.", _retry_enabled),
    Mapping("RETRY_TIMES", "`RETRY_TIMES`", "Honoured: retries of a URL at most (of 429 and 503: "
            "`RETRY_MAX_THROTTLED`); `meta[\"max_retry_times\"]` too. The add-on sets 3."),
    Mapping("RETRY_HTTP_CODES", "`RETRY_HTTP_STATUSES`", "Read as the statuses retried (429 and 503 as throttling: "
            "the host backs off, `Retry-After` honoured). Unset: every 5xx and 429.", _retry_codes),
    Mapping("RETRY_GIVE_UP_LOG_LEVEL", "`RETRY_GIVE_UP_LOG_LEVEL`", "Honoured: the level of the line that says a "
            "URL is out of retries (the `web` spider sets INFO: a broad crawl's dead letters are counted)."),
    Mapping("RETRY_PRIORITY_ADJUST", "(the URL's level)", "Not read: a retry goes back to its host's queue at its "
            "level, after its backoff (`RETRY_BASE_DELAY`).", read=False),
    Mapping("RETRY_EXCEPTIONS", "(the retry table)", "Not read: the crawler retries timeouts, refused and reset "
            "connections, truncated bodies and names that do not resolve, and dead-letters the rest (see Good "
            "citizenship).", read=False),
    Mapping("DEPTH_LIMIT", "`URL_MAX_DEPTH`", "Honoured by Scrapy's depth middleware (kept by the add-on) and read "
            "as `URL_MAX_DEPTH` by the frontier's filter.", _depth),
    # -- the download handler: DNS, TLS ----------------------------------------------------------
    Mapping("DNSCACHE_ENABLED", "`DNSCACHE_ENABLED`", "Honoured by the crawler's resolver: `False` caches no "
            "answer (each connection looks its name up)."),
    Mapping("DNSCACHE_SIZE", "`DNSCACHE_SIZE`", "Honoured: names the resolver keeps at most (LRU); answers are "
            "kept `DNS_CACHE_TTL` seconds, failures `DNS_NEGATIVE_TTL`."),
    Mapping("DNS_TIMEOUT", "`DNS_TIMEOUT`", "Honoured: seconds one lookup may take (`dns/timeouts`)."),
    Mapping("DNS_RESOLVER", "`DNS_HOSTS_FILE`", "Not read: the crawler's download handler resolves with its own "
            "bounded cache and address guard; `DNS_HOSTS_FILE` pins names.", read=False),
    Mapping("DOWNLOADER_CLIENTCONTEXTFACTORY", "`FETCH_HTTP_CLIENT`", "Not read by the crawler's download handler "
            "(certificates are verified); your own `DOWNLOAD_HANDLERS` entry for https takes Scrapy's back.",
            read=False),
    Mapping("DOWNLOADER_CLIENT_TLS_METHOD", "`FETCH_HTTP_CLIENT`", "Not read by the crawler's download handler "
            "(TLS 1.2 or newer, the system's defaults).", read=False),
    Mapping("DOWNLOADER_CLIENT_TLS_CIPHERS", "`FETCH_HTTP_CLIENT`", "Not read by the crawler's download handler "
            "(the system's cipher list).", read=False),
    Mapping("HTTPPROXY_ENABLED", "(Scrapy's)", "Honoured, with `http_proxy` / `https_proxy`: Scrapy's proxy "
            "middleware is kept; requests through a proxy take the aiohttp client."),
    # -- scrapy-redis ------------------------------------------------------------------------------
    Mapping("REDIS_HOST", "`REDIS_URL`", "scrapy-redis's: read as `REDIS_URL = redis://host:port` when "
            "`REDIS_URL` is not given.", _redis_host),
    Mapping("REDIS_PORT", "`REDIS_URL`", "scrapy-redis's: see `REDIS_HOST`.", _redis_host),
    Mapping("REDIS_PARAMS", "(the Redis connection)", "scrapy-redis's: honoured by the frontier's connection and by "
            "RedisSpider's alike: `password`, `username`, `db`, `ssl*`, `socket_timeout`, "
            "`socket_connect_timeout`, `socket_keepalive`, `health_check_interval`, `client_name`, "
            "`retry_on_timeout`... (the keyword arguments of redis-py's client); an unknown key is an error naming "
            "the setting."),
    Mapping("SCHEDULER_PERSIST", "(always)", "scrapy-redis's: the frontier always persists; start over with "
            "`FRONTIER_RESET_ON_START = True` or `scrapy frontier reset`."),
    Mapping("SCHEDULER_FLUSH_ON_START", "`FRONTIER_RESET_ON_START`", "scrapy-redis's: read as "
            "`FRONTIER_RESET_ON_START`.",
            lambda s, v: {"FRONTIER_RESET_ON_START": s.getbool("SCHEDULER_FLUSH_ON_START")}),
    Mapping("SCHEDULER_IDLE_BEFORE_CLOSE", "`FRONTIER_IDLE_BEFORE_CLOSE`", "scrapy-redis's: read as "
            "`FRONTIER_IDLE_BEFORE_CLOSE`: the crawl closes once the frontier has been drained that many seconds "
            "(URLs that other workers or a `scrapy frontier seed` add meanwhile are crawled).", _idle_before_close),
    Mapping("SCHEDULER_QUEUE_CLASS", "`FRONTIER_QUEUE_WEIGHTS`", "scrapy-redis's: " + _SCHEDULER_QUEUES,
            read=False),
    Mapping("SCHEDULER_QUEUE_KEY", "`FRONTIER_CRAWL_ID`", "scrapy-redis's: not read; the frontier's keys are "
            "named by the crawl id.", read=False),
    Mapping("SCHEDULER_SERIALIZER", "(msgpack)", "scrapy-redis's: not read; the frontier stores requests as "
            "msgpack with callbacks by name, never pickle.", read=False),
    Mapping("SCHEDULER_DUPEFILTER_CLASS", "(the seen set)", "scrapy-redis's: not read; the frontier's seen set is "
            "the duplicate filter (`SEEN_*`).", read=False),
    Mapping("SCHEDULER_DUPEFILTER_KEY", "`FRONTIER_CRAWL_ID`", "scrapy-redis's: not read; see "
            "`SCHEDULER_QUEUE_KEY`.", read=False),
    Mapping("DUPEFILTER_KEY", "`FRONTIER_CRAWL_ID`", "scrapy-redis's: not read; see `SCHEDULER_QUEUE_KEY`.",
            read=False),
)

#: Settings of the crawler's own with a new name (the old one read, with a warning, until 0.2).
RENAMED: tuple[Renamed, ...] = (
    Renamed("RETRY_MAX_RETRIES", "RETRY_TIMES", "Scrapy's name for the same thing"),
    Renamed("DNS_CACHE_SIZE", "DNSCACHE_SIZE", "Scrapy's name for the same thing"),
    Renamed("FEED_PAGE_BODY", "WEB_FEED_PAGE_BODY", "the web spider's setting, not one of Scrapy's feed exports'"),
)

_GIVEN = SETTINGS_PRIORITIES["project"]


def given(settings: BaseSettings, name: str) -> bool:
    """Whether the project, a spider or the command line set ``name`` (not a default)."""
    return name in settings and (settings.getpriority(name) or 0) >= _GIVEN


def translate(settings: BaseSettings, *, log: bool = True) -> list[str]:
    """Read the settings of :data:`RENAMED` and :data:`TABLE` that are given; the lines (logged if ``log``)."""
    lines = _rename(settings, log=log)
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
    unread = not_read(settings)
    if unread and log:
        logger.warning("Scrapy settings not read by the crawler (docs: Scrapy's settings): %s", "; ".join(unread))
    return lines


def not_read(settings: BaseSettings) -> list[str]:
    """The settings of :data:`TABLE` that nothing reads, given with a value of their own: "NAME (use X)"."""
    out = []
    for mapping in TABLE:
        if mapping.read or not given(settings, mapping.scrapy):
            continue
        value = settings.get(mapping.scrapy)
        if hasattr(scrapy_defaults, mapping.scrapy) and value == getattr(scrapy_defaults, mapping.scrapy):
            continue
        out.append(f"{mapping.scrapy} (instead: {mapping.crawler.replace('`', '')})")
    return out


def _rename(settings: BaseSettings, *, log: bool) -> list[str]:
    """Each old name given is read as its new one (unless the new one is given too), with a warning."""
    for renamed in RENAMED:
        if settings.get(renamed.old) is None:
            continue
        value = settings.get(renamed.old)
        if given(settings, renamed.new) and settings.get(renamed.new) != value:
            line = (f"{renamed.old} is deprecated and ignored: {renamed.new} = {settings.get(renamed.new)!r} is set "
                    f"({renamed.why})")
        else:
            settings.set(renamed.new, value, settings.getpriority(renamed.old) or _GIVEN)
            line = f"{renamed.old} is deprecated: read as {renamed.new} = {value!r}; rename it ({renamed.why})"
        if log:
            logger.warning("Deprecated setting: %s (CHANGELOG.md)", line)
    return []


def reference() -> str:
    """The docs' table, Markdown."""
    out = [
        "# Scrapy's settings",
        "",
        "Generated from `crawler/scrapysettings.py` (`python -m crawler.scrapysettings`). Scrapy's and "
        "scrapy-redis's settings around the components the crawler replaces, and how each is read when a "
        "project gives it: *read as the crawler's* (one `Scrapy setting: ...` warning line each; a crawler "
        "setting the project sets itself wins), *honoured* (read with Scrapy's meaning), or *not read* (named, "
        "with what to use instead, in one start-up warning: `Scrapy settings not read by the crawler: ...`). "
        "Every other Scrapy setting works as Scrapy documents it.",
        "",
        "| Scrapy setting | reading | the crawler's | how it is read |",
        "|---|---|---|---|",
    ]
    out += [f"| `{m.scrapy}` | {m.reading.value} | {m.crawler} | {m.how} |" for m in TABLE]
    out += [
        "",
        "## Renamed settings",
        "",
        "Settings of the crawler's own that were renamed in 0.1.0; the old name is still read, with a "
        "`Deprecated setting: ...` warning, until 0.2.",
        "",
        "| old name | new name | why |",
        "|---|---|---|",
    ]
    out += [f"| `{r.old}` | `{r.new}` | {r.why} |" for r in RENAMED]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
