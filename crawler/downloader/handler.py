"""The crawler's HTTP(S) download handler (``DOWNLOAD_HANDLERS``).

Scrapy's asyncio download handler (aiohttp), with three changes a broad
crawler needs:

* a **connect timeout** (``FETCH_CONNECT_TIMEOUT``) besides the total one
  (``DOWNLOAD_TIMEOUT``, which covers the whole exchange, body included, so a
  server dripping one byte a second is cut at the total timeout);
* a **bounded DNS cache with a TTL** and negative caching
  (:mod:`crawler.downloader.dns`; Scrapy's own cache has no TTL and does not
  apply to this handler);
* the **address guard** (:mod:`crawler.netguard`): a URL whose host is an IP
  literal is checked here, a name is checked on the addresses it resolves to.

Scrapy marks its aiohttp handler experimental; this project pins the Scrapy
version and tests the handler end to end, so the start-up warning is off.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, ClassVar, cast

import aiohttp
import yarl
from scrapy.core.downloader.handlers._aiohttp import AiohttpDownloadHandler, _ClientResponse
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    UnsupportedURLSchemeError,
)
from scrapy.utils.httpobj import urlparse_cached

from crawler.downloader.dns import CachingGuardedResolver, DnsCacheConfig, read_hosts_file
from crawler.netguard import AddressPolicy, BlockedAddressError, parse_ip
from crawler.settings_parsing import get_float, get_int

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy import Request
    from scrapy.crawler import Crawler


class CrawlerDownloadHandler(AiohttpDownloadHandler):
    experimental: ClassVar[bool] = False

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        assert crawler.stats is not None
        self._stats = crawler.stats
        self._connect_timeout = get_float(settings, "FETCH_CONNECT_TIMEOUT", 10.0, minimum=0.1)
        self._policy = AddressPolicy.from_settings(settings)
        #: host -> refused, for IP-literal checks (at most 10,000 hosts, then cleared).
        self._literal_verdicts: dict[str, bool] = {}
        resolver = CachingGuardedResolver(
            DnsCacheConfig(
                ttl=get_float(settings, "DNS_CACHE_TTL", 300.0, minimum=0.0),
                negative_ttl=get_float(settings, "DNS_NEGATIVE_TTL", 30.0, minimum=0.0),
                max_size=get_int(settings, "DNS_CACHE_SIZE", 10_000, minimum=1),
                static=read_hosts_file(settings["DNS_HOSTS_FILE"]) if settings.get("DNS_HOSTS_FILE") else {},
            ),
            self._policy,
            crawler.stats,
        )
        # The same session Scrapy builds, with the caching, guarding resolver.
        self._unused_session = self._session
        connector = aiohttp.TCPConnector(
            local_addr=self._bind_address,
            limit=self._pool_size_total,
            limit_per_host=self._pool_size_per_host,
            resolver=resolver,
            use_dns_cache=False,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
            response_class=_ClientResponse,
            skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"),
        )

    def _refused_literal(self, host: str) -> bool:
        """Whether ``host`` is an IP literal the address policy refuses (bounded memo)."""
        refused = self._literal_verdicts.get(host)
        if refused is None:
            address = parse_ip(host)
            refused = address is not None and not self._policy.allowed(address)
            if len(self._literal_verdicts) >= 10_000:
                self._literal_verdicts.clear()
            self._literal_verdicts[host] = refused
        return refused

    @asynccontextmanager
    async def _make_request(self, request: Request, timeout: float) -> AsyncIterator[_ClientResponse]:
        host = urlparse_cached(request).hostname or ""
        if self._refused_literal(host):
            self._stats.inc_value("fetch/blocked_address")
            raise BlockedAddressError(f"refused address {host} (ALLOW_PRIVATE_NETWORKS is off)")
        proxy = self._extract_proxy_url_with_creds(request)
        headers = self._request_headers(request).to_tuple_list()
        url: str | yarl.URL = request.url
        if request.meta.get("verbatim_url"):
            url = yarl.URL(request.url, encoded=True)
        client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=min(self._connect_timeout, timeout))
        try:
            async with await self._session.request(
                request.method,
                url,
                data=request.body,
                headers=headers,
                timeout=client_timeout,
                ssl=self._ssl_context,
                allow_redirects=False,
                proxy=proxy,
            ) as response:
                yield cast("_ClientResponse", response)
        except aiohttp.ConnectionTimeoutError as exc:
            raise DownloadTimeoutError(f"Connecting to {host} took longer than {self._connect_timeout} s") from exc
        except TimeoutError as exc:
            raise DownloadTimeoutError(f"Getting {request.url} took longer than {timeout} seconds.") from exc
        except (aiohttp.InvalidUrlClientError, aiohttp.NonHttpUrlClientError) as exc:
            raise UnsupportedURLSchemeError(str(exc)) from exc
        except aiohttp.ClientConnectorDNSError as exc:
            raise CannotResolveHostError(str(exc)) from exc
        except aiohttp.ClientConnectorError as exc:
            raise DownloadConnectionRefusedError(str(exc)) from exc
        except aiohttp.ClientError as exc:
            raise DownloadFailedError(str(exc)) from exc

    async def close(self) -> None:
        await self._unused_session.close()
        await super().close()
