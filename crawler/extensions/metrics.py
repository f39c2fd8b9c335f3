"""The Prometheus endpoint of a worker (``METRICS_*``; off by default): where it listens, how Prometheus finds it.

* ``METRICS_PORT``: a port (``9410``) or a range (``"9410-9419"``): the first
  port of the range free on ``METRICS_HOST`` is taken, so that several workers
  (Scrapyd jobs) on one machine each export. The port is bound when the
  crawler is built, before the crawl starts: a port that cannot be had is one
  clear line naming the setting, and the crawl does not start unwatched
  unless ``METRICS_REQUIRED = False`` (then: one warning, no endpoint).
* ``METRICS_TARGETS_FILE``: where the worker writes its target for Prometheus'
  file-based service discovery (``file_sd_configs``), a JSON file with
  ``{worker}`` in its name (one file per worker; a directory: ``<dir>/crawler-{worker}.json``),
  written once the port is bound and removed when the worker stops.
* The metrics (:mod:`crawler.ops.metrics`): a worker's own counters, and the
  crawl-wide gauges from the one worker that holds the crawl's lease for them
  (``lua/lead.lua``, renewed every ``METRICS_REFRESH_INTERVAL``, taken over by
  another worker when it lapses), so that a fleet's ``sum()`` is the crawl's.

The HTTP server is prometheus-client's, in its own thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from redis.exceptions import RedisError
from scrapy import signals
from scrapy.exceptions import NotConfigured

from crawler.exceptions import ConfigurationError
from crawler.ops.metrics import CrawlCollector
from crawler.ops.view import frontier_figures
from crawler.redisconn.functions import crawler_library
from crawler.redisconn.provider import RedisProvider, crawl_id_for, worker_name
from crawler.settings_parsing import get_bool, get_float, setting

if TYPE_CHECKING:
    from typing import Self

    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def parse_ports(value: object) -> tuple[int, int]:
    """``METRICS_PORT``: 0 (off), a port, or ``"first-last"`` -> (first, last)."""
    text = str(value).strip()
    first, sep, last = text.partition("-")
    try:
        ports = (int(first), int(last) if sep else int(first))
    except ValueError:
        raise ConfigurationError("METRICS_PORT", f"not a TCP port nor a range of them (9410-9419): {value!r}") from None
    if ports == (0, 0):
        return ports
    if not all(0 < port < 65536 for port in ports):
        raise ConfigurationError("METRICS_PORT", f"not a TCP port: {value!r}")
    if ports[1] < ports[0]:
        raise ConfigurationError("METRICS_PORT", f"an empty range: {value!r}")
    return ports


@dataclass(frozen=True)
class MetricsConfig:
    #: The ports to try, first to last.
    ports: tuple[int, int]
    host: str
    refresh: float
    #: Where the worker's service-discovery file goes (``{worker}`` replaced); None: none is written.
    targets_file: str | None
    #: A port that cannot be had stops the crawl from starting (else: a warning, and no endpoint).
    required: bool

    @classmethod
    def from_settings(cls, settings: Any) -> MetricsConfig | None:
        """The endpoint's configuration; None when it is off (``METRICS_PORT = 0``)."""
        ports = parse_ports(setting(settings, "METRICS_PORT"))
        if ports == (0, 0):
            return None
        targets = settings.get("METRICS_TARGETS_FILE") or None
        if targets is not None:
            targets = target_template(str(targets))
        return cls(ports, str(setting(settings, "METRICS_HOST")),
                   get_float(settings, "METRICS_REFRESH_INTERVAL", minimum=0.1), targets,
                   get_bool(settings, "METRICS_REQUIRED"))

    def target(self, port: int) -> str:
        """``host:port`` as Prometheus reaches this worker (the machine's name when listening on all addresses)."""
        host = socket.getfqdn() if self.host in ("", "0.0.0.0", "::") else self.host
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def target_template(value: str) -> str:
    """``METRICS_TARGETS_FILE`` as a path template with ``{worker}``, its directory checked writable."""
    path = value if value.endswith(".json") else os.path.join(value, "crawler-{worker}.json")
    if "{worker}" not in path:
        raise ConfigurationError("METRICS_TARGETS_FILE", f"{value!r} names one file for every worker: put {{worker}} "
                                 "in its name (crawler-{worker}.json), or give a directory")
    directory = Path(path).parent
    if not directory.is_dir() or not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigurationError("METRICS_TARGETS_FILE", f"directory {str(directory)!r} does not exist or is not "
                                 "writable by this process")
    return path


def bind(config: MetricsConfig, registry: CollectorRegistry) -> tuple[Any, int]:
    """Start the HTTP server on the first free port of the range: (server, port)."""
    first, last = config.ports
    failure: OSError | None = None
    for port in range(first, last + 1):
        try:
            server, _thread = start_http_server(port, addr=config.host, registry=registry)
        except OSError as exc:
            failure = exc
            continue
        return server, port
    span = str(first) if first == last else f"{first}-{last}"
    raise ConfigurationError("METRICS_PORT", f"cannot listen on {config.host}:{span}: "
                             f"{(failure.strerror if failure else None) or failure}")


class MetricsEndpoint:
    def __init__(self, crawler: Crawler, config: MetricsConfig, server: Any, port: int) -> None:
        self.crawler = crawler
        self.config = config
        self.port = port
        self.crawl_id = crawl_id_for(crawler)
        self.worker = worker_name()
        self.provider = RedisProvider.for_crawler(crawler)
        self.router = RedisProvider.for_crawler(crawler).router
        self.collector = CrawlCollector(self.crawl_id, crawler.stats)
        self.collector.crawl_wide = False  # until this worker holds the crawl's lease for it
        self._server = server
        self._targets: Path | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = MetricsConfig.from_settings(crawler.settings)
        if config is None:
            raise NotConfigured
        registry = CollectorRegistry(auto_describe=False)
        try:
            server, port = bind(config, registry)
        except ConfigurationError as exc:
            if config.required:
                raise
            logger.warning("%s; the crawl goes on without a metrics endpoint (METRICS_REQUIRED = False)", exc)
            raise NotConfigured from None
        endpoint = cls(crawler, config, server, port)
        registry.register(endpoint.collector)
        crawler.signals.connect(endpoint.engine_started, signal=signals.engine_started)
        crawler.signals.connect(endpoint.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(endpoint.engine_stopped, signal=signals.engine_stopped)
        return endpoint

    def engine_started(self) -> None:
        logger.info("Metrics: http://%s/metrics", self.config.target(self.port))
        if self.config.targets_file is not None:
            self._write_targets(Path(self.config.targets_file.replace("{worker}", self.worker)))
        self._task = asyncio.ensure_future(self._refresh_loop())

    def _write_targets(self, path: Path) -> None:
        """This worker's target, for Prometheus' file_sd_configs (written whole, then renamed into place)."""
        document = [{"targets": [self.config.target(self.port)],
                     "labels": {"crawl": self.crawl_id, "worker": self.worker}}]
        partial = path.with_name(path.name + ".partial")
        try:
            partial.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
            partial.replace(path)
        except OSError as exc:
            logger.error("METRICS_TARGETS_FILE: cannot write %s (%s): Prometheus will not find this worker", path, exc)
            return
        self._targets = path
        logger.info("Metrics target written to %s", path)

    async def _refresh_loop(self) -> None:
        key = self.router.crawl_keys.crawl_key("metrics_leader")
        lease_ms = int(self.config.refresh * 3000)
        while True:
            try:
                client = await self.provider.client()
                held = bool(await crawler_library().call(client, "lead", [key], self.worker, lease_ms))
                self.collector.crawl_wide = held
                if held:
                    self.collector.frontier = await frontier_figures(client, self.router,
                                                                     self.provider.config.memory_limit,
                                                                     self.collector.frontier)
            except (RedisError, OSError) as exc:
                logger.debug("Metrics: frontier figures unavailable (%s)", exc)
            await asyncio.sleep(self.config.refresh)

    async def spider_closed(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self.collector.crawl_wide:
            # Another worker still crawling takes the crawl-wide gauges over at its next refresh.
            try:
                client = await self.provider.client()
                await crawler_library().call(client, "lead", [self.router.crawl_keys.crawl_key("metrics_leader")],
                                            self.worker, 0)
            except (RedisError, OSError):
                pass  # the lease lapses by itself
            self.collector.crawl_wide = False

    def engine_stopped(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._targets is not None:
            self._targets.unlink(missing_ok=True)
            self._targets = None
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
