"""One Redis client per crawler, shared by every component that keeps state in Redis.

Components ask :meth:`RedisProvider.for_crawler` in ``from_crawler`` and
``await provider.client()`` when they open; the first call connects (starting
the embedded server when no ``REDIS_URL`` is configured). The provider closes
the client and stops an embedded server when the engine stops, after every
component has closed.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import socket
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.sentinel import MasterNotFoundError, Sentinel
from redis.driver_info import DriverInfo
from redis.exceptions import RedisError
from scrapy import signals

from crawler import __version__
from crawler.crawlstate.shards import ShardRouter
from crawler.exceptions import FrontierUnavailableError
from crawler.percrawler import PerCrawler
from crawler.redisconn import resp
from crawler.redisconn.batch import BatchedScripts
from crawler.redisconn.config import RedisConfig, parse_sentinel_url
from crawler.redisconn.embedded import EmbeddedRedisServer
from crawler.redisconn.functions import crawler_library
from crawler.redisconn.link import AnyRedis
from crawler.redisconn.outage import REDIS_DOWN, OutagePolicy
from crawler.redisconn.scrapyredis import share_embedded
from crawler.secrets import redact_url

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

@cache
def driver_info() -> DriverInfo:
    """What connections tell Redis (``CLIENT SETINFO``): built once per process.

    Left to itself redis-py reads its package metadata from disk for every
    new connection (milliseconds each, at every pool growth).
    """
    return DriverInfo().add_upstream_driver("crawler", __version__)


def worker_name() -> str:
    """This process's name in the crawl's shared records (progress samples, lease holders, the Lua
    library's users): ``<host>-<pid>``."""
    return f"{socket.gethostname().split('.')[0]}-{os.getpid()}"


def crawl_id_for(crawler: Crawler) -> str:
    """The crawl id: ``FRONTIER_CRAWL_ID``, or the spider's name."""
    name = getattr(crawler.spidercls, "name", None) or "crawl"
    return str(crawler.settings.get("FRONTIER_CRAWL_ID") or name)


class RedisProvider:
    def __init__(self, config: RedisConfig, outage: OutagePolicy | None = None, worker: str | None = None,
                 router: ShardRouter | None = None) -> None:
        """``worker``: this crawl's worker, which says it runs the crawler's Lua library
        (:mod:`crawler.redisconn.functions`); None for a command that only reads or seeds. ``router``: how
        the crawl's state is spread over this Redis (unless given, one shard of a crawl named "crawl": for
        tests and tools that route nothing)."""
        self.config = config
        #: Host -> shard of the crawl's state, shared by every component of the worker.
        self.router = router or ShardRouter("crawl")
        self.worker = worker
        #: How components wait out a Redis outage (``REDIS_OUTAGE_TIMEOUT``...).
        self.outage = outage or OutagePolicy()
        self.embedded: EmbeddedRedisServer | None = None
        self._client: AnyRedis | None = None
        self._batched: BatchedScripts | None = None
        self._given_up: FrontierUnavailableError | None = None
        self._lock = asyncio.Lock()
        #: Called with the embedded server once it has started (a RedisSpider is given it).
        self.embedded_started: list[Callable[[EmbeddedRedisServer], object]] = []

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> RedisProvider:
        return _providers(crawler)

    @property
    def url(self) -> str:
        """Where the crawl's Redis is, for messages: any password masked (``redis://:***@host``)."""
        if self.config.url is not None:
            return redact_url(self.config.url)
        if self.embedded is not None:
            return self.embedded.url
        return "(embedded, not started)"

    @property
    def cluster(self) -> bool:
        return bool(self.config.cluster_nodes)

    async def client(self) -> AnyRedis:
        """The shared client, connected and answering PING."""
        async with self._lock:
            if self._given_up is not None:
                # Waited out once already: the components closing after it are told at once.
                raise self._given_up
            if self._client is None:
                try:
                    self._client = client = await self._connect()
                    where = f"Redis at {self.url}"
                    await self.outage.call(where, lambda: crawler_library().ensure(client, self.worker, where))
                except REDIS_DOWN as exc:
                    self._given_up = FrontierUnavailableError(f"cannot reach Redis at {self.url}{self._waited}: {exc}")
                    raise self._given_up from None
                except FrontierUnavailableError as exc:
                    self._given_up = exc
                    raise
                if not resp.NATIVE:
                    logger.warning("Redis commands encoded in pure Python: crawler.redisconn._resp is not built (it "
                                   "needs a C compiler; `make venv` or `pip install` builds it). Same commands, "
                                   "about 0.03 ms more CPU per page.")
            return self._client

    async def batched(self) -> BatchedScripts:
        """The crawler's shared batcher for the few commands a component sends per host (robots.txt records,
        render marks): their calls in one turn of the event loop go to Redis in one write."""
        client = await self.client()
        if self._batched is None:  # (no await between the test and the set: components opening together share one)
            self._batched = BatchedScripts(client)
        return self._batched

    async def _connect(self) -> AnyRedis:
        url = self.config.url
        client: AnyRedis
        if self.config.cluster_nodes:
            client = RedisCluster(
                startup_nodes=[ClusterNode(host, port) for host, port in self.config.cluster_nodes],
                decode_responses=False,
                driver_info=driver_info(),
                **{"socket_connect_timeout": self.config.connect_timeout, "password": self.config.password,
                   **self.config.connection_kwargs()},
            )
            async def up() -> None:
                await client.initialize()
                await client.ping()

            try:
                await self.outage.call(f"Redis Cluster at {self.url}", up)
            except (RedisError, OSError) as exc:
                await client.aclose()
                raise FrontierUnavailableError(f"cannot reach the Redis Cluster at {self.url} (REDIS_CLUSTER_NODES)"
                                               f"{self._waited}: {exc}") from None
            logger.info("Frontier Redis Cluster: %s (%d primaries)", self.url, len(client.get_primaries()))
            return client
        if self.config.sentinels:
            return await self._connect_sentinel()
        if url is None:
            self.embedded = EmbeddedRedisServer(
                self.config.embedded_dir, self.config.server_binary, self.config.connect_timeout,
                self.config.embedded_memory,
            )
            await self.embedded.start()
            atexit.register(self.embedded.stop_now)
            url = self.embedded.url
            for started in self.embedded_started:
                started(self.embedded)
        # A blocking pool: with hundreds of requests in flight, a caller that finds every
        # connection busy waits for one (up to the connect timeout) instead of failing
        # with "Too many connections", which would read as an outage.
        options: dict[str, Any] = {"socket_connect_timeout": self.config.connect_timeout, "health_check_interval": 30}
        if self.config.url:
            # A server of ours: REDIS_PARAMS' options (scrapy-redis's), REDIS_PASSWORD_FILE's password.
            # (A password in the URL wins over both.)
            if self.config.password:
                options["password"] = self.config.password
            options.update(self.config.connection_kwargs())
        pool = BlockingConnectionPool.from_url(
            url,
            max_connections=self.config.max_connections,
            timeout=self.config.connect_timeout,
            decode_responses=False,
            driver_info=driver_info(),
            **options,
        )
        client = Redis.from_pool(pool)
        try:
            # The command's preflight reached this server a moment ago: an outage now (a
            # restart, a failover) is waited out like one in mid-crawl, with a line per try.
            await self.outage.call(f"Redis at {self.url}", client.ping)
        except REDIS_DOWN as exc:
            await client.aclose()
            raise FrontierUnavailableError(
                f"cannot reach Redis at {self.url} (REDIS_URL){self._waited}: {exc}") from None
        except RedisError as exc:
            await client.aclose()
            raise FrontierUnavailableError(f"Redis at {self.url} refused the connection: {exc}") from None
        logger.info("Frontier Redis: %s", self.url)
        return client

    async def _connect_sentinel(self) -> AnyRedis:
        """A client of the primary the sentinels name for the service; after a failover it asks them again."""
        assert self.config.url is not None
        _sentinels, service, db, password = parse_sentinel_url(self.config.url)
        options: dict[str, Any] = {"socket_connect_timeout": self.config.connect_timeout, "health_check_interval": 30,
                                   **self.config.connection_kwargs()}
        options.setdefault("password", password or self.config.password)
        sentinel = Sentinel(list(self.config.sentinels), sentinel_kwargs={  # type: ignore[no-untyped-call]
            "socket_connect_timeout": self.config.connect_timeout, "socket_timeout": self.config.connect_timeout})
        client: Redis = sentinel.master_for(service, db=db, decode_responses=False, driver_info=driver_info(),
                                            max_connections=self.config.max_connections, **options)
        try:
            await self.outage.call(f"Redis at {self.url}", client.ping)
        except (RedisError, OSError) as exc:
            await client.aclose()
            reason = "no sentinel named one" if isinstance(exc, MasterNotFoundError) else str(exc)
            raise FrontierUnavailableError(f"cannot reach the primary of {service!r} through the sentinels at "
                                           f"{self.url} (REDIS_URL){self._waited}: {reason}") from None
        logger.info("Frontier Redis: the primary of %r, through the sentinels at %s", service, self.url)
        return client

    @property
    def _waited(self) -> str:
        return f" after waiting REDIS_OUTAGE_TIMEOUT = {self.outage.timeout:g} s" if self.outage.timeout else ""

    async def close(self) -> None:
        if self._client is not None and self.worker is not None:
            await crawler_library().leave(self._client, self.worker)
        if self._batched is not None:
            await self._batched.close()
            self._batched = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.embedded is not None:
            await self.embedded.stop()
            atexit.unregister(self.embedded.stop_now)
            self.embedded = None


def _provider_of(crawler: Crawler) -> RedisProvider:
    crawl_id = crawl_id_for(crawler)
    config = RedisConfig.from_settings(crawler.settings, crawl_id)
    router = ShardRouter.from_settings(crawler.settings, crawl_id, cluster=bool(config.cluster_nodes))
    provider = RedisProvider(config, OutagePolicy.from_settings(crawler.settings), worker_name(), router)
    crawler.signals.connect(provider.close, signal=signals.engine_stopped)
    # A RedisSpider that names no Redis reads its start URLs from the embedded server, beside the frontier.
    provider.embedded_started.append(lambda server: share_embedded(crawler.spider, str(server.socket_path)))
    return provider


_providers: PerCrawler[RedisProvider] = PerCrawler(_provider_of)
