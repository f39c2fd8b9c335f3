"""scrapy-redis's ``REDIS_PARAMS``, read for the frontier's connections with scrapy-redis's meaning.

scrapy-redis passes ``REDIS_PARAMS`` as keyword arguments to redis-py's
client (``redis.Redis(**REDIS_PARAMS)``, or ``Redis.from_url(REDIS_URL,
**REDIS_PARAMS)``). The crawler reads the same dict for the frontier's
connections, so one setting configures both (a password, a database, TLS,
timeouts), and a RedisSpider's start URLs and the frontier live on one server:

* connection keys (:data:`CONNECTION_KEYS`: ``password``, ``username``,
  ``db``, the ``ssl*`` options, socket timeouts and keep-alive,
  ``health_check_interval``, ``client_name``, ``retry_on_timeout``,
  ``max_connections``) apply to the frontier's connections;
* where the server is (:data:`WHERE_KEYS`: ``url``, ``host``, ``port``,
  ``unix_socket_path``) is read as ``REDIS_URL`` when ``REDIS_URL`` is not
  given, as scrapy-redis reads it;
* the keys only scrapy-redis's own client uses (:data:`SPIDER_KEYS`:
  ``encoding``, ``decode_responses``, ``redis_cls``...) are left to it (the
  frontier reads bytes);
* any other key is an error naming the setting, before the crawl starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import dict_value

SETTING = "REDIS_PARAMS"

#: Keyword arguments of redis-py's client that the frontier's connections take as given.
CONNECTION_KEYS = frozenset({
    "password", "username", "db", "socket_timeout", "socket_connect_timeout", "socket_keepalive",
    "socket_keepalive_options", "health_check_interval", "client_name", "retry_on_timeout", "max_connections",
    "ssl", "ssl_keyfile", "ssl_certfile", "ssl_cert_reqs", "ssl_ca_certs", "ssl_ca_path", "ssl_ca_data",
    "ssl_check_hostname", "ssl_password", "ssl_min_version", "ssl_ciphers",
})
#: Where the server is: read as REDIS_URL when that is not given.
WHERE_KEYS = frozenset({"url", "host", "port", "unix_socket_path"})
#: scrapy-redis's own client's keys, which the frontier leaves to it.
SPIDER_KEYS = frozenset({"encoding", "encoding_errors", "decode_responses", "redis_cls", "socket_read_size",
                         "single_connection_client", "protocol"})


def parse_params(value: object) -> dict[str, Any]:
    """``REDIS_PARAMS`` as a dict, every key known (a clear error naming the setting otherwise)."""
    given = dict_value(value, SETTING)
    if given is None:
        return {}
    params = {str(key): inner for key, inner in given.items()}
    unknown = set(params) - CONNECTION_KEYS - WHERE_KEYS - SPIDER_KEYS
    if unknown:
        raise ConfigurationError(SETTING, f"unknown key(s) {sorted(unknown)}; known: "
                                          f"{', '.join(sorted(CONNECTION_KEYS | WHERE_KEYS | SPIDER_KEYS))}")
    db = params.get("db")
    if db is not None and (isinstance(db, bool) or not isinstance(db, int) or db < 0):
        raise ConfigurationError(SETTING, f"db must be a database number >= 0, got {db!r}")
    for key in ("socket_timeout", "socket_connect_timeout", "health_check_interval"):
        inner = params.get(key)
        if inner is not None and (isinstance(inner, bool) or not isinstance(inner, (int, float)) or inner < 0):
            raise ConfigurationError(SETTING, f"{key} must be a number of seconds >= 0, got {inner!r}")
    port = params.get("port")
    if port is not None and (isinstance(port, bool) or not str(port).isdigit() or not 0 < int(port) < 65536):
        raise ConfigurationError(SETTING, f"port must be a TCP port, got {port!r}")
    return params


def connection_kwargs(params: Mapping[str, Any], *, cluster: bool = False) -> dict[str, Any]:
    """The keyword arguments of the frontier's connections (redis-py's names). ``ssl`` is the URL's
    scheme for one server (``rediss://``, :func:`tls_url`), an argument for a cluster."""
    skip = {"max_connections"} if cluster else {"max_connections", "ssl"}
    return {key: value for key, value in params.items() if key in CONNECTION_KEYS and key not in skip}


def tls_url(url: str, params: Mapping[str, Any]) -> str:
    """``url`` with ``ssl: True`` of ``REDIS_PARAMS`` as its scheme (``redis://`` -> ``rediss://``)."""
    if params.get("ssl") and url.startswith("redis://"):
        return "rediss://" + url[len("redis://"):]
    return url


def url_of(params: Mapping[str, Any]) -> str | None:
    """The server ``REDIS_PARAMS`` names, as a URL (``None``: it names none)."""
    if params.get("url"):
        return str(params["url"])
    if params.get("unix_socket_path"):
        return f"unix://{quote(str(params['unix_socket_path']))}"
    if params.get("host") or params.get("port"):
        scheme = "rediss" if params.get("ssl") else "redis"
        return f"{scheme}://{params.get('host') or 'localhost'}:{int(params.get('port') or 6379)}"
    return None


def check_for_url(params: Mapping[str, Any], url: str) -> None:
    """``REDIS_PARAMS`` must fit the server's URL: TLS options need TLS (``rediss://`` or ``ssl: True``)."""
    tls = url.startswith("rediss://") or bool(params.get("ssl"))
    stray = sorted(key for key in params if key.startswith("ssl_") and not tls)
    if stray:
        raise ConfigurationError(SETTING, f"{', '.join(stray)} need TLS: a rediss:// URL or ssl: True")
    if url.startswith("unix://") and tls:
        raise ConfigurationError(SETTING, "TLS options do not apply to a unix socket")
