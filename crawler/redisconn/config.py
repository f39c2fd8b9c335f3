"""Where the crawl's Redis is: a server (``REDIS_URL``), a cluster, or an embedded server.

* ``REDIS_URL`` (setting or environment variable): one Redis server.
* ``REDIS_CLUSTER_NODES`` (setting or environment variable; ``host:port`` pairs
  separated by commas), or a ``REDIS_URL`` of the form
  ``redis+cluster://host:port[,host:port...]``: a Redis Cluster, reached
  through any of these nodes (the client learns the rest).
* ``REDIS_URL = redis+sentinel://[:password@]host:port[,host:port...]/service[/db]``:
  one primary with replicas under Redis Sentinel; the client asks the
  sentinels where the primary of ``service`` is, and again after a failover.
* scrapy-redis's ``REDIS_PARAMS`` (:mod:`crawler.redisconn.params`): its
  connection options (password, db, TLS, timeouts) apply to the frontier's
  connections; a server it names (``url``, ``host``/``port``,
  ``unix_socket_path``) is read as ``REDIS_URL`` when that is not given.
* None of these: a private ``redis-server`` started for the crawl (the embedded default).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.policy.memory import parse_size
from crawler.redisconn.params import check_for_url, connection_kwargs, parse_params, tls_url, url_of
from crawler.secrets import read_secret_file, redact_url
from crawler.settings_parsing import get_float, get_int, setting

_SCHEMES = ("redis", "rediss", "unix")
CLUSTER_SCHEME = "redis+cluster"
SENTINEL_SCHEME = "redis+sentinel"


def parse_sentinel_url(url: str) -> tuple[tuple[tuple[str, int], ...], str, int, str | None]:
    """``redis+sentinel://[:password@]host:port,host:port/service[/db]`` -> (sentinels, service, db, password)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    password = None
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        password = unquote(userinfo.split(":", 1)[1]) if ":" in userinfo else unquote(userinfo)
    sentinels = parse_cluster_nodes(netloc, "REDIS_URL")
    path = [part for part in parts.path.split("/") if part]
    if not path or len(path) > 2:
        raise ConfigurationError("REDIS_URL", f"{redact_url(url)!r} names no Sentinel service "
                                 "(redis+sentinel://host:port,host:port/service_name[/db])")
    if len(path) == 2 and not path[1].isdigit():
        raise ConfigurationError("REDIS_URL", f"{redact_url(url)!r}: {path[1]!r} is not a database number")
    return sentinels, path[0], int(path[1]) if len(path) == 2 else 0, password or None


def parse_cluster_nodes(text: str, setting: str) -> tuple[tuple[str, int], ...]:
    """``host:port,host:port`` -> ((host, port), ...); a clear error naming ``setting`` otherwise."""
    nodes = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigurationError(setting, f"{part!r} is not host:port")
        nodes.append((host.strip("[]"), int(port)))
    if not nodes:
        raise ConfigurationError(setting, "names no cluster node (expected host:port,host:port)")
    return tuple(nodes)


@dataclass(frozen=True)
class RedisConfig:
    #: The server to use; ``None`` means start a private one (the embedded default).
    url: str | None
    #: Where the embedded server keeps its data, socket and log.
    embedded_dir: Path
    #: The ``redis-server`` program for the embedded default.
    server_binary: str
    #: Seconds to wait for a connection (and for the embedded server to start).
    connect_timeout: float
    #: Nodes of a Redis Cluster to start from (empty: not a cluster).
    cluster_nodes: tuple[tuple[str, int], ...] = ()
    #: Connections to one server a worker opens at most; more callers wait for one.
    max_connections: int = 64
    #: The password from ``REDIS_PASSWORD_FILE`` (a password in ``REDIS_URL`` wins); never printed.
    password: str | None = field(default=None, repr=False)
    #: ``REDIS_MEMORY_LIMIT`` in bytes (0: unset: the server's maxmemory).
    memory_limit: int = 0
    #: The embedded server's memory limit (its maxmemory): ``REDIS_MEMORY_LIMIT``, or
    #: ``REDIS_EMBEDDED_MEMORY_SHARE`` of the machine's RAM.
    embedded_memory: int = 0
    #: Connection options from ``REDIS_PARAMS`` (redis-py's keyword arguments); never printed.
    params: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The sentinels to ask for the primary of the URL's service (empty: no Sentinel).
    sentinels: tuple[tuple[str, int], ...] = ()

    def connection_kwargs(self) -> dict[str, Any]:
        """What the frontier's connections to a server of ours (not the embedded one) are given."""
        return connection_kwargs(self.params, cluster=bool(self.cluster_nodes))

    @classmethod
    def from_settings(cls, settings: BaseSettings, crawl_id: str) -> RedisConfig:
        params = parse_params(settings.get("REDIS_PARAMS"))
        url = settings.get("REDIS_URL") or os.environ.get("REDIS_URL") or url_of(params) or None
        cluster_nodes: tuple[tuple[str, int], ...] = ()
        nodes_text = settings.get("REDIS_CLUSTER_NODES") or os.environ.get("REDIS_CLUSTER_NODES") or None
        if url is not None and str(url).startswith(CLUSTER_SCHEME + "://"):
            cluster_nodes = parse_cluster_nodes(str(url)[len(CLUSTER_SCHEME) + 3 :].split("/", 1)[0], "REDIS_URL")
        elif nodes_text is not None:
            if url is not None:
                raise ConfigurationError("REDIS_CLUSTER_NODES", "set either REDIS_URL or REDIS_CLUSTER_NODES, not both")
            cluster_nodes = parse_cluster_nodes(str(nodes_text), "REDIS_CLUSTER_NODES")
        sentinels: tuple[tuple[str, int], ...] = ()
        if url is not None and str(url).startswith(SENTINEL_SCHEME + "://"):
            sentinels = parse_sentinel_url(str(url))[0]
            url = str(url)
        elif cluster_nodes:
            url = f"{CLUSTER_SCHEME}://" + ",".join(f"{host}:{port}" for host, port in cluster_nodes)
            if params.get("db"):
                raise ConfigurationError("REDIS_PARAMS", f"a Redis Cluster has only database 0, not db={params['db']}")
        elif url is not None:
            url = tls_url(str(url), params)
            check_for_url(params, url)
            scheme = urlsplit(url).scheme
            if scheme not in _SCHEMES:
                raise ConfigurationError(
                    "REDIS_URL",
                    f"{redact_url(url)!r} is not a Redis URL (expected redis://host:port/db, rediss://..., "
                    "unix:///path or redis+cluster://host:port,host:port)",
                )
            parts = urlsplit(url)
            try:
                parts.port  # noqa: B018 - validates the port
            except ValueError:
                raise ConfigurationError("REDIS_URL", f"{redact_url(url)!r}: invalid port") from None
            if scheme != "unix" and not parts.hostname:
                raise ConfigurationError("REDIS_URL", f"{redact_url(url)!r} names no host")
        jobdir = settings.get("JOBDIR")
        data_root = Path(setting(settings, "CRAWL_DATA_DIR"))
        default_dir = Path(jobdir) / "redis" if jobdir else data_root / crawl_id / "redis"
        embedded_dir = Path(settings.get("REDIS_EMBEDDED_DIR") or default_dir)
        raw_limit = settings.get("REDIS_MEMORY_LIMIT")
        limit = parse_size(raw_limit, "REDIS_MEMORY_LIMIT") if raw_limit not in (None, "") else 0
        share = get_float(settings, "REDIS_EMBEDDED_MEMORY_SHARE", minimum=0.01)
        if share > 0.95:
            raise ConfigurationError("REDIS_EMBEDDED_MEMORY_SHARE", f"at most 0.95 of the RAM, got {share}")
        return cls(
            url=url,
            embedded_dir=embedded_dir,
            server_binary=str(setting(settings, "REDIS_SERVER_BINARY")),
            connect_timeout=get_float(settings, "REDIS_CONNECT_TIMEOUT", minimum=0.1),
            cluster_nodes=cluster_nodes,
            max_connections=int(params["max_connections"]) if params.get("max_connections")
            else get_int(settings, "REDIS_MAX_CONNECTIONS", minimum=4),
            password=_password(settings),
            memory_limit=limit,
            embedded_memory=limit or int(machine_memory() * share),
            params=params,
            sentinels=sentinels,
        )

    def describe(self) -> str:
        return redact_url(self.url) if self.url else f"embedded redis-server in {self.embedded_dir}"


def machine_memory() -> int:
    """This machine's RAM in bytes (0 if the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def _password(settings: BaseSettings) -> str | None:
    """The password ``REDIS_PASSWORD_FILE`` names (its first line), or None."""
    path = settings.get("REDIS_PASSWORD_FILE") or os.environ.get("REDIS_PASSWORD_FILE") or None
    if path is None:
        return None
    try:
        return read_secret_file(str(path)) or None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError("REDIS_PASSWORD_FILE", f"cannot read {path!r}: {exc.__class__.__name__}") from None
