"""Where the crawl's Redis is: ``REDIS_URL`` (setting or environment) or an embedded server."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_float

_SCHEMES = ("redis", "rediss", "unix")


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

    @classmethod
    def from_settings(cls, settings: BaseSettings, crawl_id: str) -> RedisConfig:
        url = settings.get("REDIS_URL") or os.environ.get("REDIS_URL") or None
        if url is not None:
            url = str(url)
            scheme = urlsplit(url).scheme
            if scheme not in _SCHEMES:
                raise ConfigurationError(
                    "REDIS_URL",
                    f"{url!r} is not a Redis URL (expected redis://host:port/db, rediss://... or unix:///path)",
                )
            parts = urlsplit(url)
            try:
                parts.port  # noqa: B018 - validates the port
            except ValueError:
                raise ConfigurationError("REDIS_URL", f"{url!r} has an invalid port") from None
            if scheme != "unix" and not parts.hostname:
                raise ConfigurationError("REDIS_URL", f"{url!r} names no host")
        jobdir = settings.get("JOBDIR")
        data_root = Path(settings.get("CRAWL_DATA_DIR") or "crawl-data")
        default_dir = Path(jobdir) / "redis" if jobdir else data_root / crawl_id / "redis"
        embedded_dir = Path(settings.get("REDIS_EMBEDDED_DIR") or default_dir)
        return cls(
            url=url,
            embedded_dir=embedded_dir,
            server_binary=str(settings.get("REDIS_SERVER_BINARY") or "redis-server"),
            connect_timeout=get_float(settings, "REDIS_CONNECT_TIMEOUT", 10.0, minimum=0.1),
        )

    def describe(self) -> str:
        return self.url or f"embedded redis-server in {self.embedded_dir}"
