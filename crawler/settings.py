"""Scrapy settings of the crawler project.

Every value that differs from Scrapy's default carries the reason. The
project's own settings are grouped by prefix (``FRONTIER_*``, ``REDIS_*``...)
and documented in the README.
"""

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
# Redis to keep the frontier in; unset means an embedded redis-server per job
# (the environment variable REDIS_URL works too).
REDIS_URL = None
# Default crawl id: the spider's name.
FRONTIER_CRAWL_ID = None
# Politeness: next fetch from a host >= completion + max(MIN_DELAY, FACTOR x fetch time).
FRONTIER_MIN_DELAY = 1.0
FRONTIER_DELAY_FACTOR = 10.0
FRONTIER_MAX_DELAY = 300.0
# Front-queue weights, highest priority first: 8:4:2:1 of the picks when all
# levels have URLs, so low priority keeps draining.
FRONTIER_QUEUE_WEIGHTS = [8, 4, 2, 1]
# How many hosts hold a back queue is decided by need: a claim that finds
# fewer ready hosts than free fetch slots opens more (see the README's
# "How many hosts are active"). This only bounds the awake ones, for memory
# (about 200 bytes of Redis each).
FRONTIER_ACTIVE_HOSTS = 200_000
# A host that must wait longer than this (robots.txt retry, backoff, parking,
# Retry-After, a long Crawl-delay) sleeps outside the awake set until then,
# its queue kept.
FRONTIER_SLEEP_HORIZON = 30.0
FRONTIER_LEASE_TIMEOUT = 60.0
FRONTIER_IDLE_POLL = 1.0

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
FETCH_CONNECT_TIMEOUT = 10
# A server that accepts the connection and sends nothing for this long is
# taken for dead (its host is parked at once): waiting the whole
# DOWNLOAD_TIMEOUT on it would hold a download slot for nothing.
FETCH_FIRST_BYTE_TIMEOUT = 10
# The crawler's lean HTTP/1.1 client ("aiohttp": Scrapy's aiohttp handler);
# idle keep-alive connections: 0 = 4 x CONCURRENT_REQUESTS, closed after 15 s.
FETCH_HTTP_CLIENT = "lean"
FETCH_MAX_IDLE_CONNECTIONS = 0
FETCH_KEEPALIVE_TIMEOUT = 15
# Bodies are cut at 16 MiB (also after decompression); counted above 4 MiB.
DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024
# Bodies of other types stop downloading when their headers arrive.
FETCH_ALLOWED_CONTENT_TYPES = ["text/html", "application/xhtml+xml"]
# Never connect to private, loopback, link-local (cloud metadata), multicast or
# reserved addresses, checked after DNS. Tests and intranet crawls turn this
# on, or list ranges in PRIVATE_NETWORKS_ALLOWLIST.
ALLOW_PRIVATE_NETWORKS = False
PRIVATE_NETWORKS_ALLOWLIST: list[str] = []
DNS_CACHE_TTL = 300
DNS_NEGATIVE_TTL = 30
DNS_CACHE_SIZE = 10_000

# --- robots.txt (RFC 9309) ----------------------------------------------------------
ROBOTS_ENABLED = True
# The product token our robots.txt group is looked up by; unset: the product
# token of USER_AGENT, the header we send (Scrapy's ROBOTSTXT_USER_AGENT wins if set).
ROBOTS_USER_AGENT_TOKEN = None
ROBOTS_CACHE_TTL = 24 * 3600
ROBOTS_MAX_CRAWL_DELAY = 60
ROBOTS_MAX_BYTES = 500 * 1024
ROBOTS_RETRY_DELAY = 60
ROBOTS_RETRY_MAX_DELAY = 24 * 3600
ROBOTS_MAX_FAILURES = 5

# --- Retries and backoff (see crawler/politeness/backoff.py) ------------------------
RETRY_MAX_RETRIES = 3
RETRY_MAX_THROTTLED = 10
RETRY_BASE_DELAY = 30
RETRY_MAX_DELAY = 3600
BACKOFF_BASE_DELAY = 5
BACKOFF_MAX_DELAY = 3600
HOST_PARK_AFTER = 5
HOST_PARK_BASE_DELAY = 60
HOST_PARK_MAX_DELAY = 6 * 3600
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
    "crawler.identity.IdentityGuardMiddleware": 50,
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
# Where WARC files go: a directory (default crawl-data/<crawl id>/warc/),
# file:///dir, or s3://bucket/prefix (WARC_S3_ENDPOINT_URL for any S3-compatible store).
WARC_STORE = None
WARC_S3_ENDPOINT_URL = None
# Rotate at 1 GB, the usual size of archive WARC files.
WARC_MAX_SIZE = 1_000_000_000
# gzip level of each record (1-9); 6 is zlib's default balance of speed and size.
WARC_GZIP_LEVEL = 6
WARC_METADATA_RECORDS = True
DEDUP_SIMHASH_DISTANCE = 3
DEDUP_MAX_WORDS = 2000
METADATA_CHANGE_DISTANCE = 3
# Every step after the HTML parser is a module; PNG_MODULE_ENABLED turns on the example one.
WEB_PAGE_MODULES = {
    "crawler.modules.links.LinksModule": 100,
    "crawler.modules.png.PngImagesModule": 200,
    "crawler.modules.text.TextModule": 900,
}
PNG_MODULE_ENABLED = False

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
# A progress line every 30 s (0: none), and the crawl's shared totals and
# timeline in Redis; the crawl report at the end (crawl-data/<crawl id>/report.html).
PROGRESS_INTERVAL = 30.0
REPORT_ENABLED = True
REPORT_PATH = None
# Prometheus endpoint: off unless a port is given (METRICS_PORT = 9410, say).
METRICS_PORT = 0
METRICS_HOST = "127.0.0.1"
METRICS_REFRESH_INTERVAL = 10.0
# See crawler/extensions/tuning.py: freeze start-up objects out of the GC,
# collect generation 0 every 50,000 allocations instead of 700, and stop
# building log records below LOG_LEVEL.
TUNING_GC_FREEZE = True
TUNING_GC_GEN0_THRESHOLD = 50_000
TUNING_LOG_GATE = True
# Scrapy's default collector adds ~2.5 us of wrapper to every counter update.
STATS_CLASS = "crawler.stats.LeanStatsCollector"
# Scrapy's messages; the per-page DEBUG ones are built only when DEBUG is on.
LOG_FORMATTER = "crawler.logformatter.LeanLogFormatter"

LOG_LEVEL = "INFO"
