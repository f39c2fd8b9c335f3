"""Scrapy settings of the crawler project.

The crawler's own settings (``FRONTIER_*``, ``REDIS_*``, ``ROBOTS_*``...) are
defined, each with its default and reason, in :mod:`crawler.defaults` and
imported here, so ``scrapy settings --get NAME`` answers for every one. What
follows are Scrapy's settings the project changes, each with the reason.
"""

from crawler.defaults import *  # noqa: F403

BOT_NAME = "crawler"
SPIDER_MODULES = ["crawler.spiders"]
NEWSPIDER_MODULE = "crawler.spiders"
# Our `crawl` command checks settings, spider arguments and Redis before the
# crawl starts, so a configuration mistake is one line, not a traceback.
COMMANDS_MODULE = "crawler.commands"

# Identify the crawler with a contact URL (operators: set your own).
USER_AGENT = "crawler/0.1 (+https://example.invalid/crawler; set USER_AGENT to a page about your crawl)"

# --- The frontier -------------------------------------------------------------------
SCHEDULER = "crawler.frontier.scheduler.FrontierScheduler"
# Duplicate filtering is the frontier's seen set, shared by every worker.
DUPEFILTER_CLASS = "scrapy.dupefilters.BaseDupeFilter"

# --- Concurrency: the frontier decides per-host politeness --------------------------
# Requests in flight per worker. A polite broad crawl spends most of a
# request's life waiting: on the network (the real web answers in ~0.5 s),
# on servers that accept and never answer (FETCH_FIRST_BYTE_TIMEOUT), in the
# queue for the CPU. Slots are cheap (asyncio, a socket each); with 32, a web
# where a sixth of the hosts are silent fills them all (benchmarks/polite.py).
# The frontier opens as many hosts as these slots need.
CONCURRENT_REQUESTS = 512
# Scrapy's per-domain slots must never hold a request back: the frontier
# already guarantees one request per host across all workers.
CONCURRENT_REQUESTS_PER_DOMAIN = 512
DOWNLOAD_DELAY = 0
DOWNLOAD_DELAY_JITTER = 0
AUTOTHROTTLE_ENABLED = False
# One item at a time per response: the default (100) spawns ~100 tasks per
# response for nothing (a measured ~1.6 ms per page).
CONCURRENT_ITEMS = 1

# --- Fetching -----------------------------------------------------------------------
# Total time of one request, body included (a slow-drip server is cut here):
# a broad crawl cannot wait 3 minutes for one server.
DOWNLOAD_TIMEOUT = 30
# Bodies are cut at 16 MiB (also after decompression); counted above 4 MiB.
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024

# --- Redirects, retries and robots.txt: the crawler's own ---------------------------
# Broad crawls do not keep sessions.
COOKIES_ENABLED = False
# Redirects are recorded and followed as new URLs by the spider, through the
# frontier (robots.txt, politeness, seen set), not re-fetched at once by the
# middleware; REDIRECT_MAX_TIMES still bounds a chain.
REDIRECT_ENABLED = False
METAREFRESH_ENABLED = False
REDIRECT_MAX_TIMES = 5
# Scrapy's retry and robots.txt middlewares are replaced by the crawler's own
# (retries through the frontier with backoff; RFC 9309 robots.txt).
RETRY_ENABLED = False
ROBOTSTXT_OBEY = False
# A truncated body (Content-Length not reached, connection cut) is an error,
# retried, never parsed as if complete.
DOWNLOAD_FAIL_ON_DATALOSS = True
# Every middleware costs time on every page; these do nothing a broad crawl
# needs (scope rules are the crawler's own; no proxies or HTTP auth by
# default: re-enable HttpProxyMiddleware here to crawl through a proxy).
DOWNLOADER_MIDDLEWARES = {
    "scrapy.downloadermiddlewares.offsite.OffsiteMiddleware": None,
    "scrapy.downloadermiddlewares.httpauth.HttpAuthMiddleware": None,
    "scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware": None,
    # The crawler's own, in order from the engine to the network:
    "crawler.middlewares.identity.IdentityGuardMiddleware": 50,
    "crawler.middlewares.robots.RobotsTxtMiddleware": 100,
    # Scrapy's timeout, default-headers and User-Agent middlewares in one call.
    "scrapy.downloadermiddlewares.downloadtimeout.DownloadTimeoutMiddleware": None,
    "scrapy.downloadermiddlewares.defaultheaders.DefaultHeadersMiddleware": None,
    "scrapy.downloadermiddlewares.useragent.UserAgentMiddleware": None,
    "crawler.middlewares.defaults.RequestDefaultsMiddleware": 400,
    "crawler.middlewares.conditional.ConditionalRequestMiddleware": 540,
    "crawler.middlewares.retry.RetryMiddleware": 550,
    "crawler.middlewares.fetchlimits.FetchLimitsMiddleware": 580,
    # Scrapy's decompression (bounded by DOWNLOAD_MAXSIZE), counting bombs.
    "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
    "crawler.middlewares.fetchlimits.BoundedHttpCompressionMiddleware": 590,
    # Same counters as DownloaderStats, without re-serializing every request.
    "scrapy.downloadermiddlewares.stats.DownloaderStats": None,
    "crawler.middlewares.stats.FetchStats": 850,
}
# Connect timeout, a DNS cache with a TTL, and the private-network guard.
DOWNLOAD_HANDLERS = {
    "http": "crawler.downloader.handler.CrawlerDownloadHandler",
    "https": "crawler.downloader.handler.CrawlerDownloadHandler",
}
# The web spider handles every status itself (HTTPERROR_ALLOW_ALL), sets the
# depth of its requests, and URL limits are the crawler's own filters; each
# spider middleware wraps every callback's output, so unused ones go.
SPIDER_MIDDLEWARES = {
    "scrapy.spidermiddlewares.httperror.HttpErrorMiddleware": None,
    "scrapy.spidermiddlewares.referer.RefererMiddleware": None,
    "scrapy.spidermiddlewares.urllength.UrlLengthMiddleware": None,
    "scrapy.spidermiddlewares.depth.DepthMiddleware": None,
    "scrapy.spidermiddlewares.metacopy.MetaCopyDetectionMiddleware": None,
}

# --- The event loop -----------------------------------------------------------------
# Plain asyncio, no Twisted reactor: Scrapy's asyncio download handler
# (aiohttp) costs less CPU per page than the Twisted HTTP client.
TWISTED_REACTOR_ENABLED = False
# Scrapy re-parses the source of the callback on every response to warn about
# `return` in generators (its cache misses for bound methods): pure overhead.
WARN_ON_GENERATOR_RETURN_VALUE = False

# --- Storage and dedup: item pipelines --------------------------------------------
# dedup -> WARC -> URL metadata -> index gate; index consumers go after 600.
ITEM_PIPELINES = {
    "crawler.pipelines.dedup.DedupPipeline": 300,
    "crawler.pipelines.warc.WarcPipeline": 400,
    "crawler.pipelines.metadata.UrlMetadataPipeline": 500,
    "crawler.pipelines.recrawl.RecrawlPipeline": 550,
    "crawler.pipelines.index_gate.IndexGatePipeline": 600,
}

# --- Extensions ---------------------------------------------------------------------
# Neither a telnet console nor a remote-control HTTP port on every worker:
# operators use the frontier command and the metrics endpoint.
TELNETCONSOLE_ENABLED = False
REMOTE_CONTROL_ENABLED = False
EXTENSIONS = {
    "crawler.extensions.tuning.RuntimeTuning": 0,
    "crawler.extensions.progress.ProgressReporter": 100,
    "crawler.extensions.metrics.MetricsEndpoint": 110,
}
# Scrapy's default collector adds ~2.5 us of wrapper to every counter update.
STATS_CLASS = "crawler.extensions.statscollector.LeanStatsCollector"
# Scrapy's messages; the per-page DEBUG ones are built only when DEBUG is on.
LOG_FORMATTER = "crawler.logformatter.LeanLogFormatter"

LOG_LEVEL = "INFO"
