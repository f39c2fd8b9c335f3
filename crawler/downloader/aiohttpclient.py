"""The aiohttp path of the download handler (proxies, ``FETCH_HTTP_CLIENT = "aiohttp"``): the session as
Scrapy's own aiohttp handler sets it up, with the crawler's caching, guarding resolver; its response, which
keeps what the connection knew; a response's arguments and its body up to the request's limit."""

from __future__ import annotations

import ssl
from typing import TYPE_CHECKING, Any

import aiohttp
import aiohttp.connector

from crawler.downloader.exchange import peer_address

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy import Request
    from scrapy.http import Headers

    from crawler.scrapy_internals import BaseResponseArgs


class ClientResponse(aiohttp.ClientResponse):
    """aiohttp's response, keeping what the connection knew when the answer began (its peer's
    address, its TLS session: the transport may be gone by the time the response is built), and
    the request's body limit (``BODY_LIMIT_META``; 0: none)."""

    peer: str | None = None
    ssl_object: ssl.SSLObject | None = None
    body_limit: int = 0

    async def start(self, connection: aiohttp.connector.Connection) -> aiohttp.ClientResponse:
        transport = connection.transport
        if transport is not None:
            peer = transport.get_extra_info("peername")
            self.peer = peer[0] if peer else None
            ssl_object = transport.get_extra_info("ssl_object")
            if isinstance(ssl_object, ssl.SSLObject):
                self.ssl_object = ssl_object
        return await super().start(connection)


def new_session(resolver: Any, bind_address: Any, limit: int, limit_per_host: int) -> aiohttp.ClientSession:
    """A session that sends requests as they are (no header added, no decompression, no cookies)."""
    connector = aiohttp.TCPConnector(
        local_addr=bind_address,
        limit=limit,
        limit_per_host=limit_per_host,
        resolver=resolver,
        use_dns_cache=False,
    )
    return aiohttp.ClientSession(
        connector=connector,
        cookie_jar=aiohttp.DummyCookieJar(),
        auto_decompress=False,
        response_class=ClientResponse,
        skip_auto_headers=("Accept", "Accept-Encoding", "Content-Type", "User-Agent"),
    )


def base_response_args(response: ClientResponse, request: Request, headers: Headers) -> BaseResponseArgs:
    version = response.version
    return {
        "status": response.status,
        "url": request.url,
        "headers": headers,
        "certificate": None if response.ssl_object is None else response.ssl_object.getpeercert(binary_form=True),
        "ip_address": peer_address(response.peer),
        "protocol": f"HTTP/{version.major}.{version.minor}" if version else "HTTP/1.1",
    }


def body_chunks(response: ClientResponse) -> AsyncIterator[bytes]:
    """The body's pieces; past the request's body limit, no more (the response has what came)."""
    chunks: AsyncIterator[bytes] = response.content.iter_any()
    limit = response.body_limit
    return _up_to(chunks, limit) if limit else chunks


async def _up_to(chunks: AsyncIterator[bytes], limit: int) -> AsyncIterator[bytes]:
    received = 0
    async for chunk in chunks:
        yield chunk
        received += len(chunk)
        if received > limit:
            return
