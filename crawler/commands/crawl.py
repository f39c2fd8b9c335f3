"""``scrapy crawl``, with the crawler's checks before the crawl starts.

Scrapy's own ``crawl`` command reports a bad setting, a missing seeds file or
an unreachable Redis as a traceback from deep inside the engine. This command
checks them first and prints one line naming the problem (exit status 2).
The spider argument ``crawl_id`` is taken as the ``FRONTIER_CRAWL_ID``
setting (Scrapyd passes spider arguments more easily than settings).
Everything else is Scrapy's command unchanged.
"""

from __future__ import annotations

import shutil
import socket
import sys
from typing import TYPE_CHECKING, Any

import redis
import redis.sentinel
from redis.cluster import ClusterNode
from scrapy.commands.crawl import Command as ScrapyCrawlCommand
from scrapy.spiderloader import get_spider_loader

from crawler.addon import effective, take_crawl_id
from crawler.crawlstate.shards import shard_count
from crawler.downloader.dns import read_hosts_file
from crawler.downloader.netguard import AddressPolicy
from crawler.exceptions import ConfigurationError
from crawler.extensions.metrics import MetricsConfig
from crawler.frontier import CrawlSizes, FrontierConfig, SeenConfig, check_fits, planned_sizes
from crawler.middlewares.identity import check_identity
from crawler.policy.backoff import BackoffPolicy
from crawler.redisconn.config import RedisConfig, parse_sentinel_url
from crawler.redisconn.memory import ServerMemory
from crawler.robots.policy import RobotsConfig
from crawler.secrets import redact, redact_url
from crawler.urls import host_of
from crawler.urls.filters import FilterConfig

if TYPE_CHECKING:
    import argparse

    from scrapy.settings import BaseSettings


def check_metrics_port(settings: BaseSettings) -> None:
    """``METRICS_PORT``: a port of the range this machine lets the crawl listen on (unless
    ``METRICS_REQUIRED = False``); ``METRICS_TARGETS_FILE``: a writable directory."""
    config = MetricsConfig.from_settings(settings)
    if config is None:
        return
    first, last = config.ports
    failure: OSError | None = None
    for port in range(first, last + 1):
        try:
            with socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((config.host, port))
            return
        except OSError as exc:
            failure = exc
    if config.required:
        span = str(first) if first == last else f"{first}-{last}"
        raise ConfigurationError("METRICS_PORT", f"cannot listen on {config.host}:{span}: "
                                 f"{(failure.strerror if failure else None) or failure}")


def preflight(settings: BaseSettings, spider_cls: type, spider_name: str, spider_args: dict[str, str]) -> None:
    """Raise :class:`ConfigurationError` for anything that would stop the crawl at start.

    Checks the settings as the crawler will see them: the spider's
    ``custom_settings`` and the crawler add-on applied.
    """
    settings = settings.copy()
    update = getattr(spider_cls, "update_settings", None)
    if callable(update):
        update(settings)
    settings = effective(settings)
    validate = getattr(spider_cls, "validate_arguments", None)
    seeds: list[str] = []
    if callable(validate):
        seeds = list(validate(**spider_args) or [])
    check_identity(settings, [host_of(url) for url in seeds])
    AddressPolicy.from_settings(settings)
    RobotsConfig.from_settings(settings)
    BackoffPolicy.from_settings(settings)
    FilterConfig.from_settings(settings)
    SeenConfig.from_settings(settings)
    hosts_file = settings.get("DNS_HOSTS_FILE")
    if hosts_file:
        try:
            read_hosts_file(str(hosts_file))
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigurationError("DNS_HOSTS_FILE", f"cannot read {hosts_file!r}: {exc}") from None
    check_metrics_port(settings)
    if settings.get("SCHEDULER") != "crawler.frontier.scheduler.FrontierScheduler":
        return
    crawl_id = str(settings.get("FRONTIER_CRAWL_ID") or spider_name)
    FrontierConfig.from_settings(settings, crawl_id)
    redis_config = RedisConfig.from_settings(settings, crawl_id)
    shards = shard_count(settings, cluster=bool(redis_config.cluster_nodes))
    planned_sizes(settings, shards, shards, 0)  # each shard's Bloom filter fits a Redis bitmap
    if redis_config.url is None:
        if shutil.which(redis_config.server_binary) is None:
            raise ConfigurationError(
                "REDIS_SERVER_BINARY",
                f"{redis_config.server_binary!r} not found: install redis-server "
                "(apt-get install redis-server) or set REDIS_URL",
            )
        return
    try:
        if redis_config.cluster_nodes:
            cluster = redis.RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in redis_config.cluster_nodes],  # type: ignore[no-untyped-call]
                socket_connect_timeout=3, socket_timeout=3, password=redis_config.password,
            )
            cluster.ping()
            cluster.close()
            return
        options: dict[str, Any] = {"socket_connect_timeout": 3, "socket_timeout": 3,
                                   **redis_config.connection_kwargs()}
        if redis_config.password:
            options.setdefault("password", redis_config.password)
        if redis_config.sentinels:
            _, service, db, password = parse_sentinel_url(redis_config.url)
            if password:
                options["password"] = password
            sentinel = redis.sentinel.Sentinel(list(redis_config.sentinels), sentinel_kwargs={  # type: ignore[no-untyped-call]
                "socket_connect_timeout": 3, "socket_timeout": 3})
            client = sentinel.master_for(service, db=db, **options)  # type: ignore[no-untyped-call]
        else:
            client = redis.Redis.from_url(redis_config.url, **options)
        client.ping()
        info = client.info("memory")
        client.close()
    except redis.sentinel.MasterNotFoundError:
        raise ConfigurationError("REDIS_URL", f"no sentinel at {redact_url(redis_config.url)} named a primary for "
                                 "its service (are the sentinels up, and the service's name right?)") from None
    except (redis.exceptions.RedisError, OSError, ValueError) as exc:
        raise ConfigurationError("REDIS_URL", f"cannot reach Redis at {redact_url(redis_config.url)}: {exc}") from None
    # The server's memory: an evicting policy, or a limit too small for the crawl's fixed costs,
    # stop the crawl here in one line (the scheduler checks again, with the crawl's recorded sizes).
    memory = ServerMemory(redact_url(redis_config.url), int(info.get("used_memory", 0)),
                          int(info.get("maxmemory", 0)), str(info.get("maxmemory_policy", "noeviction")))
    memory.check_policy()
    limit = memory.limit(redis_config.memory_limit)
    seen, cells = planned_sizes(settings, shards, shards, limit)
    check_fits(CrawlSizes(seen, cells, limit), shards, memory.server)


class Command(ScrapyCrawlCommand):
    def process_options(self, args: list[str], opts: argparse.Namespace) -> None:
        # Checked here, before Scrapy sets up logging and the crawler process,
        # so that a mistake is the only line printed.
        super().process_options(args, opts)
        if len(args) != 1:
            return
        assert self.settings is not None
        try:
            # ``-a crawl_id=X`` (handy from Scrapyd's schedule.json) is FRONTIER_CRAWL_ID, here for the
            # checks below; in any project the add-on reads it from the spider.
            take_crawl_id(self.settings, opts.spargs.pop("crawl_id", None))
        except ConfigurationError as exc:
            print(f"error: {redact(str(exc))}", file=sys.stderr)
            sys.exit(2)
        loader = get_spider_loader(self.settings)
        try:
            spider_cls = loader.load(args[0])
        except KeyError:
            print(f"error: no spider named {args[0]!r} (available: {', '.join(loader.list())})", file=sys.stderr)
            sys.exit(2)
        try:
            preflight(self.settings, spider_cls, args[0], dict(opts.spargs))
        except ConfigurationError as exc:
            print(f"error: {redact(str(exc))}", file=sys.stderr)
            sys.exit(2)
