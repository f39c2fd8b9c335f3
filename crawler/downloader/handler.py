"""The crawler's HTTP(S) download handler (``DOWNLOAD_HANDLERS``).

Built on Scrapy's streaming download-handler base (the one Scrapy's own
asyncio handlers share, in every Scrapy release the crawler supports), with
what a broad crawler needs:

* a **connect timeout** (``FETCH_CONNECT_TIMEOUT``) and a **first-byte
  timeout** (``FETCH_FIRST_BYTE_TIMEOUT``: the answer's head, from the moment
  the request is sent; a server that stays silent that long raises
  :class:`ServerSilentError`, which parks its host at once) besides the total
  one (``DOWNLOAD_TIMEOUT``, which covers the whole exchange, body included,
  so a server dripping one byte a second is cut at the total timeout);
* a **bounded DNS cache with a TTL** and negative caching
  (:mod:`crawler.downloader.dns`; Scrapy's own cache has no TTL and does not
  apply to this handler);
* the **address guard** (:mod:`crawler.downloader.netguard`): a URL whose host is an IP
  literal is checked here, a name is checked on the addresses it resolves to.

Requests go through the lean HTTP/1.1 client of :mod:`crawler.downloader.http11`
(``FETCH_HTTP_CLIENT = "lean"``, the default), about a third of aiohttp's CPU
per fetch; through a proxy (``meta["proxy"]``), with
``DOWNLOADER_CLIENT_TLS_VERBOSE_LOGGING``, or with ``FETCH_HTTP_CLIENT =
"aiohttp"`` they go through aiohttp, set up as Scrapy's own aiohttp handler
sets it up. Both paths keep Scrapy's contract: ``headers_received`` and
``bytes_received`` signals (``StopDownload``), ``DOWNLOAD_MAXSIZE`` /
``DOWNLOAD_WARNSIZE`` (declared and streamed), ``DOWNLOAD_FAIL_ON_DATALOSS``,
``download_latency``, ``ip_address``, ``protocol`` and ``certificate``, and
the same Scrapy exceptions.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import time
import zlib
from contextlib import asynccontextmanager
from enum import Enum
from typing import TYPE_CHECKING, Any, cast

import aiohttp
import aiohttp.connector
import yarl
from scrapy import signals
from scrapy.exceptions import (
    CannotResolveHostError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    DownloadTimeoutError,
    ResponseDataLossError,
    UnsupportedURLSchemeError,
)
from scrapy.http import Headers
from scrapy.utils.httpobj import urlparse_cached

from crawler.downloader import http11
from crawler.downloader.aiohttpclient import ClientResponse, base_response_args, body_chunks, new_session
from crawler.downloader.dns import resolver_from_settings
from crawler.downloader.errors import ServerSilentError, TlsError
from crawler.downloader.exchange import (
    TRANSFER_WBITS,
    BytesReceived,
    decode_transfer,
    peer_address,
    peer_certificate,
    request_target,
    response_headers,
)
from crawler.downloader.limits import SPARE_DESCRIPTORS, ensure_file_descriptors
from crawler.downloader.netguard import AddressPolicy, BlockedAddressError, parse_ip
from crawler.requestmeta import BODY_LIMIT_META, CONTACTED_META, VERBATIM_URL_META
from crawler.scrapy_internals import (
    BaseResponseArgs,
    BaseStreamingDownloadHandler,
    check_stop_download,
    get_dataloss_msg,
    get_warnsize_msg,
    has_receivers,
    log_tls_session,
    make_response,
    make_ssl_context,
)
from crawler.settings_parsing import get_choice, get_float, get_int

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": 80, "https": 443}
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE"})


class FetchClient(Enum):
    """``FETCH_HTTP_CLIENT``: which HTTP client fetches requests without a proxy."""

    LEAN = "lean"
    AIOHTTP = "aiohttp"


class CrawlerDownloadHandler(BaseStreamingDownloadHandler[ClientResponse]):
    #: Built at the first request, in the running event loop: ``scrapy shell`` with Scrapy's
    #: Twisted reactor builds the engine in a thread where no loop runs yet (aiohttp's connector
    #: needs one).
    lazy = True

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        settings = crawler.settings
        assert crawler.stats is not None
        self._stats = crawler.stats
        self._connect_timeout = get_float(settings, "FETCH_CONNECT_TIMEOUT", minimum=0.1)
        self._first_byte_timeout = get_float(settings, "FETCH_FIRST_BYTE_TIMEOUT", minimum=0.1)
        self._policy = AddressPolicy.from_settings(settings)
        #: host -> refused, for IP-literal checks (at most 10,000 hosts, then cleared).
        self._literal_verdicts: dict[str, bool] = {}
        self._client = get_choice(settings, "FETCH_HTTP_CLIENT", FetchClient)
        self._signals = crawler.signals
        self._pool = http11.ConnectionPool(
            max_idle=get_int(settings, "FETCH_MAX_IDLE_CONNECTIONS", minimum=0) or 4 * self._pool_size_total,
            idle_timeout=get_float(settings, "FETCH_KEEPALIVE_TIMEOUT", minimum=0.0),
        )
        ensure_file_descriptors(self._pool_size_total + self._pool.max_idle + SPARE_DESCRIPTORS)
        resolver = resolver_from_settings(settings, crawler.stats)
        self._resolver = resolver
        self._ssl_context = make_ssl_context(settings)
        self._session = new_session(resolver, self._bind_address, self._pool_size_total, self._pool_size_per_host)

    def _guard_literal(self, host: str) -> None:
        """Refuse (and count) an IP-literal host the address policy forbids; names are checked at resolution."""
        if self._refused_literal(host):
            self._stats.inc_value("fetch/blocked_address")
            raise BlockedAddressError(f"refused address {host} (ALLOW_PRIVATE_NETWORKS is off)")

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

    async def download_request(self, request: Request) -> Response:
        # From here on the host may be contacted: its politeness delay applies.
        request.meta[CONTACTED_META] = True
        if self._client is FetchClient.AIOHTTP or self._tls_verbose_logging or request.meta.get("proxy"):
            return await super().download_request(request)
        return await self._fetch(request)

    # -- the lean client ------------------------------------------------------------------------

    async def _fetch(self, request: Request) -> Response:
        meta = request.meta
        timeout: float = meta.get("download_timeout", self._DEFAULT_CONNECT_TIMEOUT)
        parts = urlparse_cached(request)
        scheme = parts.scheme
        host = parts.hostname
        if scheme not in _DEFAULT_PORTS:
            raise UnsupportedURLSchemeError(f"Unsupported URL scheme '{scheme}' in {request.url}")
        if not host:
            raise UnsupportedURLSchemeError(f"No host in {request.url}")
        try:
            port = parts.port or _DEFAULT_PORTS[scheme]
        except ValueError as exc:
            raise UnsupportedURLSchemeError(f"Invalid port in {request.url}") from exc
        self._guard_literal(host)
        try:
            ascii_host = host if host.isascii() else host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise UnsupportedURLSchemeError(f"Invalid host name in {request.url}") from exc
        bracketed = f"[{ascii_host}]" if ":" in ascii_host else ascii_host  # an IPv6 literal
        netloc = bracketed if port == _DEFAULT_PORTS[scheme] else f"{bracketed}:{port}"
        try:
            payload = http11.request_head(
                request.method, request_target(parts.path, parts.query), netloc,
                [(name, value) for name, values in dict.items(request.headers) for value in values
                 if name != b"Proxy-Authorization"],
                request.body,
            )
        except ValueError as exc:
            raise UnsupportedURLSchemeError(f"{exc} in {request.url}") from exc
        key: http11.Key = (scheme, ascii_host, port)
        start = time.monotonic()
        hook = self._chunk_hook(request)
        maxsize: int = meta.get("download_maxsize", self._default_maxsize)
        connection: http11.HttpConnection | None = None
        connected: list[bool] = []
        try:
            async with asyncio.timeout(timeout):
                connection, head = await self._exchange(
                    request, key, payload, maxsize, hook, connected, min(self._first_byte_timeout, timeout))
                meta["download_latency"] = time.monotonic() - start
                response = await self._receive(request, connection, head, maxsize, hook)
        except TimeoutError as exc:
            if connected and "download_latency" not in meta:
                self._stats.inc_value("fetch/server_silent")
                raise ServerSilentError(
                    f"{request.url}: connected, and no answer within {timeout} seconds") from exc
            raise DownloadTimeoutError(f"Getting {request.url} took longer than {timeout} seconds.") from exc
        except http11.ProtocolError as exc:
            self._stats.inc_value("fetch/protocol_error")
            logger.info("Malformed answer from %s: %s", request.url, exc)
            raise DownloadFailedError(f"{exc} ({request.url})") from exc
        except http11.ConnectionClosed as exc:
            raise DownloadFailedError(f"{exc} ({request.url})") from exc
        finally:
            if connection is not None:
                self._pool.release(connection)
        return response

    async def _exchange(
        self, request: Request, key: http11.Key, payload: bytes, maxsize: int, hook: BytesReceived | None,
        connected: list[bool], first_byte: float,
    ) -> tuple[http11.HttpConnection, http11.ResponseHead]:
        """Send the request on a kept connection or a new one; the response head, within ``first_byte`` seconds.

        ``connected`` gets an entry once a connection is up (then a timeout is the server's silence).
        """
        head_only = request.method == "HEAD"
        connection = self._pool.acquire(key)
        while True:
            reused = connection is not None
            if connection is None:
                connection = await self._connect(key, request)
            connected.append(True)
            try:
                try:
                    async with asyncio.timeout(first_byte):
                        head = await connection.start(payload, head_only=head_only, limit=maxsize, on_chunk=hook)
                except TimeoutError as exc:
                    self._stats.inc_value("fetch/server_silent")
                    raise ServerSilentError(f"{request.url}: connected, and no answer within {first_byte} s") from exc
            except http11.ConnectionClosed as exc:
                connection.abort()
                if reused and not exc.started and request.method in _IDEMPOTENT:
                    # The server closed the kept connection meanwhile: a new one, once.
                    self._stats.inc_value("fetch/stale_connection")
                    connection = None
                    continue
                raise
            except BaseException:
                connection.abort()
                raise
            return connection, head

    async def _connect(self, key: http11.Key, request: Request) -> http11.HttpConnection:
        scheme, host, port = key
        connect_timeout = min(self._connect_timeout, request.meta.get("download_timeout", self._connect_timeout))
        try:
            literal = parse_ip(host) is not None
            async with asyncio.timeout(connect_timeout):
                if literal:
                    addresses = [host]
                else:
                    try:
                        answer = await self._resolver.resolve(host, port, socket.AF_UNSPEC)
                    except OSError as exc:
                        raise CannotResolveHostError(f"Cannot resolve {host}: {exc}") from exc
                    addresses = [entry["host"] for entry in answer]
                return await http11.connect(
                    key, addresses,
                    ssl_context=self._ssl_context if scheme == "https" else None,
                    server_hostname="" if literal else host,
                    local_addr=self._bind_address,
                )
        except TimeoutError as exc:
            raise DownloadTimeoutError(f"Connecting to {host} took longer than {connect_timeout} s") from exc
        except ssl.SSLError as exc:
            self._stats.inc_value("fetch/tls_error")
            raise TlsError(f"TLS handshake with {host}:{port} failed: {exc}") from exc
        except OSError as exc:
            raise DownloadConnectionRefusedError(f"Cannot connect to {host}:{port}: {exc}") from exc

    def _chunk_hook(self, request: Request) -> BytesReceived | None:
        """What looks at each piece of body: the ``bytes_received`` signal when anything listens
        to it, the request's body limit (``BODY_LIMIT_META``) if it has one; None: nothing."""
        limit = int(request.meta.get(BODY_LIMIT_META) or 0)
        signal = has_receivers(self._signals.sender, signals.bytes_received)
        if not signal and not limit:
            return None
        return BytesReceived(self.crawler, request, signal=signal, limit=limit)

    async def _receive(
        self, request: Request, connection: http11.HttpConnection, head: http11.ResponseHead, maxsize: int,
        hook: BytesReceived | None,
    ) -> Response:
        """Scrapy's response to a request whose head arrived, with the body read under its limits."""
        meta = request.meta
        warnsize: int = meta.get("download_warnsize", self._default_warnsize)
        headers = response_headers(head.headers)
        expected = head.content_length
        if maxsize and expected and expected > maxsize:
            connection.abort()
            self._cancel_maxsize(expected, maxsize, request, expected=True)
        reached_warnsize = False
        if warnsize and expected and expected > warnsize:
            reached_warnsize = True
            logger.warning(get_warnsize_msg(expected, warnsize, request, expected=True))
        base: dict[str, Any] = {
            "url": request.url,
            "status": head.status,
            "headers": headers,
            "ip_address": peer_address(connection.peer),
            "protocol": head.version.decode("ascii"),
            "certificate": peer_certificate(connection),
        }
        stop = check_stop_download(
            signals.headers_received, self.crawler, request, headers=headers, body_length=expected
        )
        if stop is not None:
            connection.abort()
            return make_response(**base, stop_download=stop)
        try:
            body = await connection.read_body()
        except http11.BodyTooLarge as exc:
            self._cancel_maxsize(exc.size, maxsize, request, expected=False)
        except http11.ConnectionClosed as exc:
            if not meta.get("download_fail_on_dataloss", self._fail_on_dataloss):
                return make_response(**base, body=exc.partial, flags=["dataloss"])
            if not self._fail_on_dataloss_warned:
                logger.warning(get_dataloss_msg(request.url))
                self._fail_on_dataloss_warned = True
            raise ResponseDataLossError(str(exc)) from exc
        codings = http11.transfer_codings(head.headers)
        if codings:
            body = self._decode_transfer(request, body, codings, maxsize)
        if warnsize and len(body) > warnsize and not reached_warnsize:
            logger.warning(get_warnsize_msg(len(body), warnsize, request, expected=False))
        if connection.stopped and hook is not None and hook.stop is not None:
            return make_response(**base, body=body, stop_download=hook.stop)
        return make_response(**base, body=body)

    def _decode_transfer(self, request: Request, body: bytes, codings: list[bytes], maxsize: int) -> bytes:
        """Undo the transfer codings besides ``chunked`` within ``maxsize``; an unknown or broken
        one is a download failure (the body cannot be read)."""
        unknown = [coding for coding in codings if coding not in TRANSFER_WBITS]
        if unknown:
            self._stats.inc_value("fetch/unknown_transfer_coding")
            raise DownloadFailedError(f"unsupported transfer coding {unknown[0][:40]!r} ({request.url})")
        try:
            decoded = decode_transfer(body, codings, maxsize)
        except zlib.error as exc:
            raise DownloadFailedError(f"bad transfer coding ({request.url}): {exc}") from exc
        if maxsize and len(decoded) > maxsize:
            self._cancel_maxsize(len(decoded), maxsize, request, expected=False)
        return decoded

    # -- aiohttp (proxies, FETCH_HTTP_CLIENT = "aiohttp") ---------------------------------------

    @asynccontextmanager
    async def _make_request(self, request: Request, timeout: float) -> AsyncIterator[ClientResponse]:
        host = urlparse_cached(request).hostname or ""
        self._guard_literal(host)
        proxy = self._extract_proxy_url_with_creds(request)
        headers = self._request_headers(request).to_tuple_list()
        url: str | yarl.URL = request.url
        if request.meta.get(VERBATIM_URL_META):
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
                answer = cast("ClientResponse", response)
                answer.body_limit = int(request.meta.get(BODY_LIMIT_META) or 0)
                yield answer
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

    @staticmethod
    def _check_deps_installed() -> None:
        """aiohttp is a requirement of the crawler: imported above."""

    @staticmethod
    def _extract_headers(response: ClientResponse) -> Headers:
        return Headers(list(response.headers.items()))

    @staticmethod
    def _build_base_response_args(response: ClientResponse, request: Request, headers: Headers) -> BaseResponseArgs:
        return base_response_args(response, request, headers)

    def _log_tls_info(self, response: ClientResponse, request: Request) -> None:
        if response.ssl_object is not None:
            log_tls_session(response.ssl_object)

    @staticmethod
    def _iter_body_chunks(response: ClientResponse) -> AsyncIterator[bytes]:
        return body_chunks(response)

    @staticmethod
    def _is_dataloss_exception(exc: Exception) -> bool:
        return isinstance(exc, aiohttp.ClientPayloadError)

    async def close(self) -> None:
        self._pool.close()
        await self._session.close()
