"""The default of every setting of the crawler's own, in one place (Scrapy's ``default_settings.py`` model).

Grouped by subsystem prefix; each value carries its reason. Components read
their settings through :mod:`crawler.settings_parsing`, which falls back to
these values (and to Scrapy's defaults for Scrapy's settings), never to a
default written at the call site. ``crawler/settings.py`` imports them all, so
``scrapy settings --get NAME`` answers for every one; the settings reference
in the docs is generated from this file (``python -m crawler.defaults``).

A value of ``None`` means "unset": the reading component derives it (the
docstring of the setting's comment says from what).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import Any

# --- Redis: where the frontier lives (crawler/redisconn) ----------------------------
# Redis to keep the frontier in; unset means an embedded redis-server per crawl
# id (the environment variable REDIS_URL works too); redis+cluster://h:p,... for a cluster.
REDIS_URL = None
# host:port,host:port of a Redis Cluster (setting or environment variable).
REDIS_CLUSTER_NODES = None
# A file whose first line is the Redis password (or the environment variable of this
# name): keeps it off command lines, Scrapyd's job list and logs (a password in REDIS_URL wins).
REDIS_PASSWORD_FILE = None
# Seconds to wait for Redis (and for the embedded server to start).
REDIS_CONNECT_TIMEOUT = 10.0
# Connections a worker opens to one Redis server at most; a caller that finds
# them all busy waits for one (up to REDIS_CONNECT_TIMEOUT), never fails.
REDIS_MAX_CONNECTIONS = 64
# Components wait out a Redis outage this long before giving up on an operation.
REDIS_OUTAGE_TIMEOUT = 300.0
# Backoff between retries during an outage.
REDIS_RETRY_DELAY = 0.5
REDIS_RETRY_MAX_DELAY = 10.0
# The program of the embedded default.
REDIS_SERVER_BINARY = "redis-server"
# Redis memory the crawl lives within (bytes, or with a unit: "512mb", "8gb"); near it the
# crawl admits fewer new URLs instead of failing (docs/sizing.md). Unset: the server's
# maxmemory; for the embedded server, REDIS_EMBEDDED_MEMORY_SHARE of this machine's RAM
# (also its maxmemory). On a cluster, per primary.
REDIS_MEMORY_LIMIT = None
# The embedded server's share of the machine's RAM when REDIS_MEMORY_LIMIT is unset: half
# leaves the other half to the workers, the browser and the page cache.
REDIS_EMBEDDED_MEMORY_SHARE = 0.5
# Data directory of the embedded server; unset: crawl-data/<crawl id>/redis (JOBDIR/redis with JOBDIR).
REDIS_EMBEDDED_DIR = None
# Root of per-crawl data (WARC files, the embedded Redis, the report).
CRAWL_DATA_DIR = "crawl-data"

# --- The frontier (crawler/frontier) ------------------------------------------------
# Namespace of the crawl's keys; workers with the same id cooperate. Unset: the spider's name.
FRONTIER_CRAWL_ID = None
# Frontier shards, fixed for the life of a crawl; unset: 1 on one Redis, 16 on a cluster.
FRONTIER_SHARDS = None
# Politeness: next fetch from a host >= completion + max(MIN_DELAY, min(FACTOR x fetch time, MAX_DELAY)).
FRONTIER_MIN_DELAY = 1.0
FRONTIER_DELAY_FACTOR = 10.0
# A 60 s fetch must not park a host for 10 minutes.
FRONTIER_MAX_DELAY = 300.0
# Draw a host's minimum delay from 0.5x to 1.5x of FRONTIER_MIN_DELAY for each request, as Scrapy's
# RANDOMIZE_DOWNLOAD_DELAY does (read as this when a project gives DOWNLOAD_DELAY). Off: a broad
# crawl's delay is mostly 10x the fetch time, and the 1 s floor stays a floor.
FRONTIER_RANDOMIZE_DELAY = False
# Front-queue weights, highest priority first: 8:4:2:1 of the picks when all
# levels have URLs, so low priority keeps draining (3 to 16 levels).
FRONTIER_QUEUE_WEIGHTS = [8, 4, 2, 1]
# How many hosts hold a back queue is decided by need: a claim that finds
# fewer ready hosts than free fetch slots opens more. This only bounds the
# awake ones, for memory (about 650 bytes of Redis each with a queued URL).
FRONTIER_ACTIVE_HOSTS = 200_000
# A host that must wait longer than this many seconds (robots.txt retry,
# backoff, parking, Retry-After, a long Crawl-delay) sleeps outside the awake
# set until then, its queue kept.
FRONTIER_SLEEP_HORIZON = 30.0
# One request at a time and one clock per "host", registered "domain" or "ip" address.
FRONTIER_POLITENESS_KEY = "host"
# Requests in flight at once per politeness key (FRONTIER_POLITENESS_KEY), across every
# worker. Above 1, the delay spaces the key's request starts, as Scrapy's download slots
# do; a project's CONCURRENT_REQUESTS_PER_DOMAIN (or non-zero _PER_IP) is read as it.
FRONTIER_CONCURRENCY_PER_KEY = 1
# Seconds a claimed URL stays leased without renewal (renewed every third of it):
# a worker that dies gives its URLs back after this.
FRONTIER_LEASE_TIMEOUT = 60.0
# Seconds an idle worker waits before looking again for work from others.
FRONTIER_IDLE_POLL = 1.0
# Seconds a worker in batch mode stays open once the frontier is drained (nothing queued, due or
# in flight), for URLs other workers or `scrapy frontier seed` may add; scrapy-redis's
# SCHEDULER_IDLE_BEFORE_CLOSE is read as it. 0: it closes at once.
FRONTIER_IDLE_BEFORE_CLOSE = 0.0
# Front-queue entries moved into back queues per claim, at most (bounds one script's run).
FRONTIER_REFILL_BATCH = 1000
# Requests per enqueue script call (bounds one script's run).
FRONTIER_ENQUEUE_BATCH = 500
# Fingerprints remembered in-process to skip sending known duplicates to Redis (0 disables).
FRONTIER_LOCAL_SEEN_SIZE = 200_000
# Delete the crawl's frontier (queues, seen set, revisits, dead letters) when a
# worker opens, to start over (scrapy-redis's SCHEDULER_FLUSH_ON_START). Only
# for a single worker: with many, use `scrapy frontier reset` before they start.
FRONTIER_RESET_ON_START = False
# Requests whose callback the frontier cannot store by name (a lambda, a
# function outside the spider) are fetched by the worker that made them,
# outside the frontier, with a warning; at most this many wait at once.
FRONTIER_LOCAL_REQUESTS = 10_000
# URLs enqueued per host / per registered domain, at most (0: none): the
# single most effective trap defence.
HOST_PAGE_BUDGET = 50_000
DOMAIN_PAGE_BUDGET = 200_000
# The seen set's Bloom filter is sized for this many URLs at this false-positive
# rate (100 million at 1%: ~125 MiB of Redis), fixed when the crawl starts.
SEEN_EXPECTED_URLS = 100_000_000
SEEN_FALSE_POSITIVE_RATE = 0.01
# The Bloom filter takes at most this share of the Redis memory limit (a small Redis gets a
# smaller filter, which answers "maybe" more often: the exact store keeps it right).
SEEN_BLOOM_SHARE = 0.125
# Bloom hashes (bits) per URL, 1-32, fixed when the crawl starts: each is a bit Redis sets for every new
# URL and reads for every known one. The filter is sized so this many give the false-positive rate:
# 4 take 10.5 bits per URL at 1%, 10% more than the fewest (9.6 bits, 7 hashes), for 5% fewer Redis
# instructions per page.
# The in-link sketch counts a URL in its first four positions (fewer below 4).
SEEN_BLOOM_HASHES = 4
# Seconds between two looks at Redis memory (the admission of new URLs near the limit).
FRONTIER_MEMORY_CHECK_INTERVAL = 5.0
# Bytes of Redis a queued URL will take once fetched (its record, duplicate index and
# schedule entries: 230 measured, docs/sizing.md): near the memory limit, the URLs
# already admitted must still fit.
FRONTIER_PAGE_BYTES = 300

# --- Priority (crawler/policy/priority.py) ------------------------------------------
# Weights of the priority signals (a dict; unset keys keep their defaults, see the docs).
PRIORITY_WEIGHTS: dict[str, float] = {}
# The priority score is clamped to [PRIORITY_MIN, PRIORITY_MAX] (Scrapy priorities).
PRIORITY_MIN = -2
PRIORITY_MAX = 1
# Per-host importance, 0..1: a dict, or a file of "host score" lines.
PRIORITY_HOST_IMPORTANCE: dict[str, float] = {}
PRIORITY_HOST_IMPORTANCE_FILE = None
# A host's error and near-duplicate rates count once it has this many fetches.
PRIORITY_MIN_HOST_PAGES = 20
# Hosts whose quality counters each worker caches.
PRIORITY_HOST_CACHE_SIZE = 10_000
# A sitemap lastmod within this many days makes a URL "fresh".
PRIORITY_SITEMAP_FRESH_DAYS = 7.0
# Cells of the in-link sketch per shard (8 bits each; 0: in-links not counted), at most a
# sixteenth of the Redis memory limit; fixed when the crawl starts.
PRIORITY_INLINK_CELLS = 4_194_304

# --- Freshness: recrawl by change rate (crawler/policy/recrawl.py) ------------------
# Schedule the next visit of every fetched page by its observed change rate.
RECRAWL_ENABLED = True
# "batch": the crawl ends when nothing is queued or due now; "continuous": it never ends by itself.
RECRAWL_MODE = "batch"
# Revisit interval bounds and the first interval, seconds.
RECRAWL_MIN_INTERVAL = 3600.0
RECRAWL_MAX_INTERVAL = 30 * 86400.0
RECRAWL_INITIAL_INTERVAL = 86400.0
# interval = fraction / change rate / (1 + boost x importance).
RECRAWL_CHANGE_FRACTION = 0.5
RECRAWL_IMPORTANCE_BOOST = 1.0
# Due revisits moved into the frontier per call; seconds between checks of the due set.
RECRAWL_DRAIN_BATCH = 500
RECRAWL_DRAIN_INTERVAL = 5.0
# The crawl clock (simulations): scale above 1 runs it faster than real time
# from the epoch (unset: when the process started), plus an offset in seconds.
RECRAWL_TIME_SCALE = 1.0
RECRAWL_TIME_EPOCH = None
RECRAWL_TIME_OFFSET = 0.0

# --- URLs: normalization, filters, traps (crawler/urls) ----------------------------
# Query parameters dropped by normalization: they only track campaigns and clicks ("utm_*": a prefix).
URL_TRACKING_PARAMS = [
    "utm_*", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "fbclid", "msclkid", "yclid", "twclid", "igshid",
    "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "__hssc", "__hstc", "__hsfp", "mkt_tok", "vero_id",
    "oly_anon_id", "oly_enc_id",
]
# Query and path (;name=value) parameters that carry a session id, dropped.
URL_SESSION_PARAMS = ["jsessionid", "phpsessid", "sid", "sessionid", "aspsessionid*", "cfid", "cftoken"]
# Sort query arguments (off: their order can matter to a server).
URL_SORT_QUERY = False
# Schemes enqueued, and the longest URL (characters, normalized).
URL_ALLOWED_SCHEMES = ["http", "https"]
URL_MAX_LENGTH = 2048
# File extensions not enqueued (a page module can ask for its media types); the
# web spider denies media, archives, documents, fonts, styles and scripts
# (crawler.urls.filters.BROAD_CRAWL_DENY_EXTENSIONS).
URL_DENY_EXTENSIONS: list[str] = []
# Extensions allowed even if denied above.
URL_ALLOW_EXTENSIONS: list[str] = []
# Blocks and scope (hosts with their subdomains; patterns are regular expressions).
URL_BLOCKED_HOSTS: list[str] = []
URL_BLOCKED_HOSTS_FILE = None
URL_BLOCKED_PATTERNS: list[str] = []
URL_BLOCKED_PATTERNS_FILE = None
URL_ALLOWED_DOMAINS: list[str] = []
URL_ALLOWED_PREFIXES: list[str] = []
# Trap rules: links from the seed, and repeats of one path segment.
URL_MAX_DEPTH = 25
URL_MAX_SEGMENT_REPEATS = 2

# --- Sitemaps (crawler/sitemaps.py) -------------------------------------------------
# Fetch the sitemaps robots.txt lists, through the frontier.
SITEMAPS_ENABLED = True
# Try /sitemap.xml when robots.txt lists none.
SITEMAPS_FALLBACK = False
# A sitemap's URLs and bytes (after decompression), at most (the protocol's limits).
SITEMAP_MAX_URLS = 50_000
SITEMAP_MAX_BYTES = 50 * 1024 * 1024
SITEMAP_PRIORITY = 1

# --- Fetching (crawler/downloader) -----------------------------------------------------
# Seconds to connect (DOWNLOAD_TIMEOUT, Scrapy's, is the whole exchange's).
FETCH_CONNECT_TIMEOUT = 10.0
# A server that accepts the connection and sends nothing for this long is
# taken for dead (its host is parked at once): waiting the whole
# DOWNLOAD_TIMEOUT on it would hold a download slot for nothing.
FETCH_FIRST_BYTE_TIMEOUT = 10.0
# The crawler's lean HTTP/1.1 client ("aiohttp": Scrapy's aiohttp handler).
FETCH_HTTP_CLIENT = "lean"
# Idle keep-alive connections kept (0: 4 x CONCURRENT_REQUESTS), closed after FETCH_KEEPALIVE_TIMEOUT s.
FETCH_MAX_IDLE_CONNECTIONS = 0
FETCH_KEEPALIVE_TIMEOUT = 15.0
# Bodies of other types stop downloading when their headers arrive; empty: every
# type (a spider gets the bodies it asks for; the web spider: HTML and XHTML).
FETCH_ALLOWED_CONTENT_TYPES: list[str] = []
# Never connect to private, loopback, link-local (cloud metadata), multicast or
# reserved addresses, checked after DNS. Tests and intranet crawls turn this
# on, or list ranges in PRIVATE_NETWORKS_ALLOWLIST.
ALLOW_PRIVATE_NETWORKS = False
PRIVATE_NETWORKS_ALLOWLIST: list[str] = []
# The DNS cache: answers kept this long (getaddrinfo gives no TTLs), failures (names at most:
# Scrapy's DNSCACHE_SIZE; none cached with DNSCACHE_ENABLED = False; a lookup's time: DNS_TIMEOUT).
DNS_CACHE_TTL = 300.0
DNS_NEGATIVE_TTL = 30.0
# Names answered from this hosts(5) file without a lookup (an intranet, a test web).
DNS_HOSTS_FILE = None

# --- Rendering hosts that need JavaScript (crawler/render) ---------------------------
# Detect pages built by JavaScript and render their hosts' pages in headless Chromium.
RENDER_ENABLED = True
# Hosts or domains (a domain covers its subdomains) always rendered / never rendered.
RENDER_HOSTS: list[str] = []
RENDER_NEVER_HOSTS: list[str] = []
# Pages of a host sampled before it is marked static; how long a detected mark stands.
RENDER_SAMPLE_PAGES = 3
RENDER_MARK_TTL = 86400.0
# A page needs a browser when it has scripts but less visible text than this
# (characters) and fewer links than this (or an empty app root, or a noscript asking for JS).
RENDER_DETECT_MIN_TEXT = 200
RENDER_DETECT_MIN_LINKS = 3
# The browser: Chromium's path (unset: chromium on the PATH), pages at once, seconds per
# page, the JavaScript heap of a page (MB), the rendered DOM kept (bytes), pages before a restart.
RENDER_BROWSER_PATH = ""
RENDER_CONCURRENCY = 2
RENDER_TIMEOUT = 30.0
RENDER_JS_HEAP_MB = 256
RENDER_MAX_DOM_BYTES = 5_000_000
RENDER_BROWSER_MAX_PAGES = 200
# Requests a rendered page may make (scripts, XHR, fetch; each paced by the politeness
# delay), resource types aborted, and hosts besides the page's own it may ask (a CDN).
RENDER_MAX_SUBREQUESTS = 30
RENDER_BLOCKED_RESOURCE_TYPES = ["image", "media", "font", "stylesheet", "texttrack", "eventsource", "websocket",
                                 "manifest", "other"]
RENDER_SUBREQUEST_HOSTS: list[str] = []
# Host marks kept by each worker, and for how long (seconds) before Redis is asked again.
RENDER_CACHE_SIZE = 100_000
RENDER_CACHE_SECONDS = 60.0

# --- robots.txt (RFC 9309; crawler/robots) ------------------------------------------
# Obey robots.txt (a host's robots.txt is then its first request).
ROBOTS_ENABLED = True
# The product token our robots.txt group is looked up by; unset: the product
# token of USER_AGENT, the header we send (Scrapy's ROBOTSTXT_USER_AGENT wins if set).
ROBOTS_USER_AGENT_TOKEN = None
# Seconds a decision is shared before robots.txt is fetched again.
ROBOTS_CACHE_TTL = 86400.0
# A Crawl-delay above this is crawled at this (and counted).
ROBOTS_MAX_CRAWL_DELAY = 60.0
# Bytes parsed (RFC 9309: at least 500 KiB).
ROBOTS_MAX_BYTES = 500 * 1024
# An unreachable robots.txt is tried again after this, doubling up to the max.
ROBOTS_RETRY_DELAY = 60.0
ROBOTS_RETRY_MAX_DELAY = 86400.0
# Unreachable this many times in a row: the host's URLs go to the dead letters.
ROBOTS_MAX_FAILURES = 5
# Parsed decisions each worker caches (LRU); sitemaps kept per host.
ROBOTS_LOCAL_CACHE_SIZE = 10_000
ROBOTS_MAX_SITEMAPS = 50

# --- Retries and backoff (crawler/policy/backoff.py) ------------------------------
# Per-URL retries of transient failures come after RETRY_BASE_DELAY x 2^(attempt-1), at most
# RETRY_TIMES (Scrapy's setting; the add-on sets 3) times.
RETRY_BASE_DELAY = 30.0
RETRY_MAX_DELAY = 3600.0
# Per-URL retries of 429/503.
RETRY_MAX_THROTTLED = 10
# The statuses retried (429 and 503 as throttling); unset: every 5xx and 429
# (Scrapy's RETRY_HTTP_CODES, given in a project, is read as this).
RETRY_HTTP_STATUSES = None
# Host backoff on 429/503 (also caps Retry-After).
BACKOFF_BASE_DELAY = 5.0
BACKOFF_MAX_DELAY = 3600.0
# Parking of a host that keeps failing at the connection level.
HOST_PARK_AFTER = 5
HOST_PARK_BASE_DELAY = 60.0
HOST_PARK_MAX_DELAY = 6 * 3600.0

# --- Storage: WARC, duplicates, URL metadata (crawler/warc, crawler/pipelines) ------
# Archive every response any spider receives (WARC, duplicates, metadata,
# recrawl), even when its callback yields no PageItem (a team's own spiders).
# False: only the PageItems spiders yield are archived.
ARCHIVE_RESPONSES = True
# A page's body in the web spider's feed exports (-O items.jsonl): "omit"
# (null), "text" (decoded as UTF-8, bad bytes replaced) or "base64".
WEB_FEED_PAGE_BODY = "omit"
# Archive every fetch in WARC files (with a CDXJ index beside each).
WARC_ENABLED = True
# Where WARC files go: a directory (default crawl-data/<crawl id>/warc/),
# file:///dir, or s3://bucket/prefix (WARC_S3_ENDPOINT_URL for any S3-compatible store).
WARC_STORE = None
WARC_S3_ENDPOINT_URL = None
# File name prefix; unset: the crawl id.
WARC_PREFIX = None
# Rotate at 1 GB, the usual size of archive WARC files.
WARC_MAX_SIZE = 1_000_000_000
# The library gzipping each record: "isal" (Intel ISA-L, levels 0-3; about 12x less CPU
# than zlib's level 6 for members ~16% larger) or "zlib" (levels 1-9).
WARC_GZIP_LIBRARY = "isal"
# Its level; unset: the library's default (isal 2, zlib 6).
WARC_GZIP_LEVEL = None
WARC_METADATA_RECORDS = True
# S3 uploads: retries of a failed upload, and timeouts of one upload and of the last ones at close.
WARC_UPLOAD_RETRY_DELAY = 1.0
WARC_UPLOAD_RETRY_MAX_DELAY = 300.0
WARC_UPLOAD_TIMEOUT = 60.0
WARC_UPLOAD_CLOSE_TIMEOUT = 60.0
# Exact (payload digest) and near (SimHash) duplicate detection.
DEDUP_ENABLED = True
# Near duplicates: SimHash distance at most this, over at most this many words.
DEDUP_SIMHASH_DISTANCE = 3
DEDUP_MAX_WORDS = 2000
# Boilerplate removal before the SimHash: only text blocks of at least this
# many words count (dates, banners, counters, session ids differ between
# copies of a page); 0: every word. Pages with little long text use all of it.
DEDUP_MIN_BLOCK_WORDS = 10
# The URL metadata store: per URL its state, fetch time, status, digests, validators, change history.
METADATA_ENABLED = True
# A fetch counts as a change when its SimHash is further than this from the last one.
METADATA_CHANGE_DISTANCE = 3
# Seconds within which the same status and payload again is a repeat delivery,
# not an observation; unset: half RECRAWL_MIN_INTERVAL, at most 600.
METADATA_REPEAT_WINDOW = None
# Stop duplicates before index consumers (pipelines after 600).
INDEX_GATE_ENABLED = True

# --- The web spider and its page modules (crawler/spiders, crawler/modules) ---------
# Every step after the HTML parser is a module; PNG_MODULE_ENABLED turns on the example one.
WEB_PAGE_MODULES = {
    "crawler.modules.links.LinksModule": 100,
    "crawler.modules.png.PngImagesModule": 200,
    "crawler.modules.text.TextModule": 900,
}
PNG_MODULE_ENABLED = False
# URLs the web spider remembers having followed, to skip building requests for repeats.
WEB_LINK_CACHE_SIZE = 200_000

# --- Operations (crawler/extensions) ------------------------------------------------
# A progress line every 30 s (0: none), and the crawl's shared totals and
# timeline in Redis (also sampled 1, 2, 4... s after the start); the crawl
# report at the end (crawl-data/<crawl id>/report.html).
PROGRESS_INTERVAL = 30.0
REPORT_ENABLED = True
REPORT_PATH = None
# Prometheus endpoint: off unless a port is given (METRICS_PORT = 9410), or a range of them
# ("9410-9419": the first one free, so that several workers of one machine each export).
METRICS_PORT = 0
METRICS_HOST = "127.0.0.1"
METRICS_REFRESH_INTERVAL = 10.0
# A port that cannot be had stops the crawl at start (one line): a crawl is not started
# unwatched unless this is False (then a warning, and no endpoint).
METRICS_REQUIRED = True
# Prometheus file-based service discovery: each worker writes its target to this JSON file
# (with {worker} in its name; or a directory: <dir>/crawler-{worker}.json) and removes it at close.
METRICS_TARGETS_FILE = None
# Write the final stats to this file as JSON when the spider closes (unset: only the log's dump).
STATS_JSON_FILE = None
# Freeze start-up objects out of the GC, collect generation 0 every 200,000
# allocations instead of 700 (measured in docs/benchmarks.md), and stop
# building log records below LOG_LEVEL.
TUNING_GC_FREEZE = True
TUNING_GC_GEN0_THRESHOLD = 200_000
TUNING_LOG_GATE = True
# With the crawler's downloader, each request's download, callback and release from the engine run in one
# task: no chain of Deferreds and no second task per request. With CONCURRENT_ITEMS = 1 the callback's
# output is taken in that task too, one object after the other (no queue and two tasks per response).
TUNING_ONE_TASK_PER_REQUEST = True
# Scrapy's signal manager with each receiver and the arguments it takes worked out once, not on every
# send, and no task for a receiver of an awaited send that returns a plain value: the same receivers,
# arguments, order and errors (crawler/extensions/signalmanager.py).
TUNING_LEAN_SIGNALS = True


def names() -> list[str]:
    """Every setting defined here."""
    return [name for name in globals() if name.isupper() and not name.startswith("_")]


def documented() -> list[tuple[str, Any, str]]:
    """(name, default, the comment above it) for every setting here, in order."""
    source = Path(__file__).read_text(encoding="utf-8")
    lines = source.splitlines()
    out: list[tuple[str, Any, str]] = []
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if not isinstance(target, ast.Name) or not target.id.isupper():
            continue
        comment: list[str] = []
        row = node.lineno - 2
        while row >= 0 and lines[row].startswith("# ") and not lines[row].startswith("# ---"):
            comment.insert(0, lines[row][2:])
            row -= 1
        # A setting without a comment of its own is one of a group: the comment above it says it.
        text = " ".join(comment) or (f"(with `{out[-1][0]}`) {out[-1][2]}".replace("(with", "(see", 1)
                                     if out else "")
        out.append((target.id, globals()[target.id], text))
    return out


def reference() -> str:
    """The settings reference, Markdown: one table per section of this file."""
    out = ["# Settings reference", "",
           "Generated from `crawler/defaults.py` (`python -m crawler.defaults`), the one place every "
           "setting of the crawler's own is defined. Scrapy's settings the crawler changes are in "
           "`crawler/addon.py`, each with its reason; how it reads Scrapy's standard settings is in "
           "[Scrapy's settings](scrapy-settings.md).", ""]
    source = Path(__file__).read_text(encoding="utf-8").splitlines()
    sections = {i + 1: line.strip("# -") for i, line in enumerate(source) if line.startswith("# ---")}
    entries = {name: (value, comment) for name, value, comment in documented()}
    current = None
    for number, line in enumerate(source, start=1):
        if number in sections:
            current = sections[number].strip()
            out += ["", f"## {current}", "", "| setting | default | meaning |", "|---|---|---|"]
            continue
        name = line.split(" ", 1)[0].split(":", 1)[0]
        if name in entries and current is not None:
            value, comment = entries.pop(name)
            shown = repr(value) if len(repr(value)) <= 60 else "see `crawler/defaults.py`"
            out.append(f"| `{name}` | `{shown}` | {comment or '(see above)'} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.stdout.write(reference())
