"""The crawler as a Scrapy add-on: ``ADDONS = {"crawler.addon.CrawlerAddon": 0}``.

A Scrapy project that lists this add-on runs every one of its spiders on the
shared Redis frontier (:mod:`crawler.frontier`), with the crawler's
robots.txt (RFC 9309), per-host politeness across workers, retries with
backoff, fetch limits and the address guard, the archive of every response
(WARC, duplicates, URL metadata, recrawl), and its progress line, report and
metrics. It changes nothing else: Scrapy's offsite filter, HTTP error
handling, redirects, ``Referer``, depth, cookies and proxies work as Scrapy
documents them.

The add-on runs after the project's and the spider's settings are read. It
translates Scrapy's standard settings the crawler replaces
(:mod:`crawler.scrapysettings`: ``DOWNLOAD_DELAY``, ``AUTOTHROTTLE_*``,
``ROBOTSTXT_OBEY``, ``RETRY_*``...), with a warning line for each one given,
then sets its components. A project that still names another scheduler or
duplicate filter (scrapy-redis's, say) gets a clear error naming the setting.
This repository's own project uses the add-on too (``crawler/settings.py``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.settings import SETTINGS_PRIORITIES, BaseSettings
from scrapy.utils.python import global_object_name

from crawler import defaults as crawler_defaults
from crawler.exceptions import ConfigurationError
from crawler.scrapysettings import translate
from crawler.secrets import install as install_redaction

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from scrapy.settings import Settings

logger = logging.getLogger(__name__)

SCHEDULER = "crawler.frontier.scheduler.FrontierScheduler"
#: Duplicate filtering is the frontier's seen set, shared by every worker.
DUPEFILTER = "scrapy.dupefilters.BaseDupeFilter"
#: Schedulers and filters a project may name that the add-on replaces without a word (Scrapy's defaults).
_REPLACEABLE = {
    "SCHEDULER": {"scrapy.core.scheduler.Scheduler", SCHEDULER},
    "DUPEFILTER_CLASS": {"scrapy.dupefilters.RFPDupeFilter", DUPEFILTER},
}

#: Scrapy settings the add-on sets (at the add-on's priority: a project's or spider's own value wins).
SETTINGS: dict[str, Any] = {
    # Requests in flight per worker. A polite broad crawl spends most of a
    # request's life waiting: on the network, on servers that accept and
    # never answer (FETCH_FIRST_BYTE_TIMEOUT), in the queue for the CPU. The
    # frontier opens as many hosts as these slots need (benchmarks/polite.py).
    "CONCURRENT_REQUESTS": 512,
    # Scrapy's per-domain slots must never hold a request back: the frontier
    # already keeps one request per host in flight across all workers.
    "CONCURRENT_REQUESTS_PER_DOMAIN": 512,
    # Scrapy's downloader, starting in place a request its slot would start at once
    # (no slot queue, Deferred and task per page: crawler/downloader/direct.py).
    "DOWNLOADER": "crawler.downloader.direct.DirectDownloader",
    # Scrapy's item pipeline manager with a lean loop (crawler/pipelines/manager.py).
    "ITEM_PROCESSOR": "crawler.pipelines.manager.DirectItemPipelineManager",
    # One item at a time per response: the default (100) spawns ~100 tasks per
    # response for nothing (a measured ~1.6 ms per page).
    "CONCURRENT_ITEMS": 1,
    # A broad crawl cannot wait 3 minutes for one server: 30 s per request, body included.
    "DOWNLOAD_TIMEOUT": 30,
    # Bodies are cut at 16 MiB (also after decompression); counted above 4 MiB.
    "DOWNLOAD_MAXSIZE": 16 * 1024 * 1024,
    "DOWNLOAD_WARNSIZE": 4 * 1024 * 1024,
    # A truncated body is an error, retried, never parsed as if complete.
    "DOWNLOAD_FAIL_ON_DATALOSS": True,
    # Retries go back through the frontier after a backoff (30 s, 60 s, 120 s): a third one costs
    # the host nothing at once, and rides out a server's restart.
    "RETRY_TIMES": 3,
    # Neither a telnet console nor a remote-control port on every worker:
    # operators use `scrapy frontier` and the metrics endpoint.
    "TELNETCONSOLE_ENABLED": False,
    "REMOTE_CONTROL_ENABLED": False,
    # Scrapy re-parses the callback's source on every response to warn about
    # `return` in generators (its cache misses for bound methods): pure overhead.
    "WARN_ON_GENERATOR_RETURN_VALUE": False,
    # Scrapy's default collector adds ~2.5 us of wrapper to every counter update.
    "STATS_CLASS": "crawler.extensions.statscollector.LeanStatsCollector",
    # Scrapy's messages; the per-page DEBUG ones are built only when DEBUG is on.
    "LOG_FORMATTER": "crawler.logformatter.LeanLogFormatter",
}

#: The crawler's components, by component dictionary (Scrapy's ones it replaces get ``None``).
COMPONENTS: dict[str, dict[str, int | None]] = {
    "DOWNLOADER_MIDDLEWARES": {
        # The crawler's own, in order from the engine to the network:
        "crawler.middlewares.identity.IdentityGuardMiddleware": 50,
        # RFC 9309 robots.txt, fetched once per host across workers, before its pages.
        "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
        "crawler.middlewares.robots.RobotsTxtMiddleware": 100,
        # Scrapy's timeout, default-headers and User-Agent middlewares in one call.
        "scrapy.downloadermiddlewares.downloadtimeout.DownloadTimeoutMiddleware": None,
        "scrapy.downloadermiddlewares.defaultheaders.DefaultHeadersMiddleware": None,
        "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
        "crawler.middlewares.requestdefaults.RequestDefaultsMiddleware": 400,
        "crawler.middlewares.conditional.ConditionalRequestMiddleware": 540,
        # Retries through the frontier with backoff and Retry-After.
        "scrapy.downloadermiddlewares.retry.RetryMiddleware": None,
        "crawler.middlewares.retry.RetryMiddleware": 550,
        # Pages of hosts that need JavaScript, rendered in headless Chromium (after decompression).
        "crawler.middlewares.render.RenderMiddleware": 570,
        # Scrapy's redirects, each hop archived (Scrapy's own would consume it unarchived).
        "scrapy.downloadermiddlewares.redirect.MetaRefreshMiddleware": None,
        "crawler.middlewares.redirect.ArchivingMetaRefreshMiddleware": 580,
        "scrapy.downloadermiddlewares.redirect.RedirectMiddleware": None,
        "crawler.middlewares.redirect.ArchivingRedirectMiddleware": 600,
        "crawler.middlewares.fetchlimits.FetchLimitsMiddleware": 580,
        # Scrapy's decompression (bounded by DOWNLOAD_MAXSIZE), counting bombs.
        "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
        "crawler.middlewares.fetchlimits.BoundedHttpCompressionMiddleware": 590,
        # Same counters as DownloaderStats, without re-serializing every request.
        "scrapy.downloadermiddlewares.stats.DownloaderStats": None,
        "crawler.middlewares.stats.FetchStats": 850,
    },
    "SPIDER_MIDDLEWARES": {
        # Start requests marked as Scrapy's StartSpiderMiddleware marks them, without its pass-through of every
        # callback's output (one layer of asynchronous generators per response).
        "scrapy.spidermiddlewares.start.StartSpiderMiddleware": None,
        "crawler.middlewares.start.StartRequestsMiddleware": 25,
        # Every response any spider receives is archived (WARC, duplicates, URL metadata, recrawl).
        "crawler.middlewares.archive.ArchiveMiddleware": 10,
    },
    "ITEM_PIPELINES": {
        # The archive stages, in order (crawler/archiving.py): dedup -> WARC -> URL metadata -> recrawl.
        # They act on PageItems only; a team's items pass through untouched.
        "crawler.pipelines.dedup.DedupPipeline": 300,
        "crawler.pipelines.warc.WarcPipeline": 400,
        "crawler.pipelines.metadata.UrlMetadataPipeline": 500,
        "crawler.pipelines.recrawl.RecrawlPipeline": 550,
        # What index consumers get: primary, new, 2xx HTML pages (consumers go after 600).
        "crawler.pipelines.index_gate.IndexGatePipeline": 600,
    },
    "EXTENSIONS": {
        "crawler.extensions.tuning.RuntimeTuning": 0,
        "crawler.extensions.progress.ProgressReporter": 100,
        "crawler.extensions.metrics.MetricsEndpoint": 110,
    },
}

#: Connect timeout, first-byte timeout, a DNS cache with a TTL, the address guard, the lean HTTP client.
DOWNLOAD_HANDLERS = {
    "http": "crawler.downloader.handler.CrawlerDownloadHandler",
    "https": "crawler.downloader.handler.CrawlerDownloadHandler",
}


class CrawlerAddon:
    """Runs a Scrapy project's spiders on the crawler (see the module's docstring)."""

    def __init__(self, crawler: Crawler | None = None) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CrawlerAddon:
        return cls(crawler)

    @classmethod
    def update_pre_crawler_settings(cls, settings: BaseSettings) -> None:
        # Scrapy's Twisted reactor stays on, as Scrapy has it, so that a project's components that
        # use Twisted (deferLater, deferToThread: scrapy-redis's RedisPipeline) work unchanged; the
        # crawler runs on its asyncio loop. Measured: no cost (benchmarks/throughput.py
        # --compare-reactor, docs/own-project.md). A reactor other than the asyncio one is refused.
        check_reactor(settings)

    def update_settings(self, settings: BaseSettings) -> None:
        spider = getattr(self.crawler, "spider", None)
        if spider is not None:
            take_crawl_id(settings, getattr(spider, "crawl_id", None))
        apply(settings)


ASYNCIO_REACTOR = "twisted.internet.asyncioreactor.AsyncioSelectorReactor"


def check_reactor(settings: BaseSettings) -> None:
    """The crawler is asyncio code: with the Twisted reactor on, it must be Scrapy's asyncio reactor."""
    if not settings.getbool("TWISTED_REACTOR_ENABLED", True):
        return
    reactor = settings.get("TWISTED_REACTOR")
    if reactor is not None and not isinstance(reactor, str):
        reactor = global_object_name(reactor)
    if reactor != ASYNCIO_REACTOR:
        raise ConfigurationError(
            "TWISTED_REACTOR",
            f"{reactor or 'None (Twisted picks its own)'} cannot run the crawler, which runs on asyncio: "
            "remove the line (Scrapy's default is "
            f"{ASYNCIO_REACTOR}), or set TWISTED_REACTOR_ENABLED = False",
        )


def take_crawl_id(settings: BaseSettings, crawl_id: object) -> None:
    """The spider argument ``crawl_id`` (``-a crawl_id=X``, Scrapyd's ``schedule.json``) is the crawl's
    ``FRONTIER_CRAWL_ID``; without it a crawl's id is its spider's name. Given both, they must agree."""
    if crawl_id is None or crawl_id == "":
        return
    configured = settings.get("FRONTIER_CRAWL_ID")
    if configured and settings.getpriority("FRONTIER_CRAWL_ID") == SETTINGS_PRIORITIES["cmdline"] \
            and str(configured) != str(crawl_id):
        raise ConfigurationError("FRONTIER_CRAWL_ID", f"-s FRONTIER_CRAWL_ID={configured} and -a crawl_id={crawl_id} "
                                 "disagree: give one")
    settings.set("FRONTIER_CRAWL_ID", str(crawl_id), "cmdline")


def apply(settings: BaseSettings, *, log: bool = True) -> None:
    """Put the crawler in ``settings`` (what :class:`CrawlerAddon` does); ``log``: say what it translated."""
    for name, replaceable in _REPLACEABLE.items():
        value = settings.get(name)
        if not isinstance(value, str):
            value = global_object_name(value)
        if value not in replaceable:
            raise ConfigurationError(
                name,
                f"{value!r} would replace the crawler's frontier; remove the {name} line "
                "(the add-on sets it: the frontier is the scheduler and its seen set the duplicate filter)",
            )
    # The crawler's own settings, so that ``settings.get`` answers for each (the project's values stay).
    for name in crawler_defaults.names():
        if name not in settings:
            settings.set(name, getattr(crawler_defaults, name), "default")
    translate(settings, log=log)
    # Before Scrapy logs "Overridden settings": no secret of these settings reaches a log.
    install_redaction(settings)
    settings.set("SCHEDULER", SCHEDULER, "addon")
    settings.set("DUPEFILTER_CLASS", DUPEFILTER, "addon")
    for name, value in SETTINGS.items():
        settings.set(name, value, "addon")
    for name, components in COMPONENTS.items():
        current = settings.getdict(name)
        for path, order in components.items():
            # A project's or spider's own entry for the same component wins.
            if path not in current:
                current[path] = order
        settings.set(name, current, settings.getpriority(name) or 0)
    handlers = settings["DOWNLOAD_HANDLERS"]
    for scheme, path in DOWNLOAD_HANDLERS.items():
        if scheme not in handlers:
            # At the project's priority: Scrapy sets its reactorless defaults in
            # DOWNLOAD_HANDLERS_BASE at that priority, after the add-ons run.
            handlers.set(scheme, path, "project")


def enabled(settings: BaseSettings) -> bool:
    """Whether ``settings`` list the add-on in ``ADDONS``."""
    for addon, order in settings.getdict("ADDONS").items():
        if order is None:
            continue
        if addon is CrawlerAddon or addon == f"{__name__}.CrawlerAddon":
            return True
    return False


def effective(settings: Settings | BaseSettings) -> BaseSettings:
    """``settings`` as a crawler will see them: with the add-on applied if it is enabled (for checks)."""
    copy = settings.copy()
    if enabled(copy):
        CrawlerAddon.update_pre_crawler_settings(copy)
        apply(copy, log=False)
    return copy
