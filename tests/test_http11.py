"""The lean HTTP/1.1 client and the download handler built on it.

A scripted TCP server on loopback answers with exact bytes (well-formed,
odd and hostile), so each framing rule and each limit is exercised on real
sockets; the handler tests go through Scrapy's handler interface and compare
the lean client with aiohttp on the same answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvloop
from scrapy import Request, signals
from scrapy.exceptions import (
    DownloadCancelledError,
    DownloadConnectionRefusedError,
    DownloadFailedError,
    ResponseDataLossError,
    StopDownload,
)
from scrapy.utils.test import get_crawler

from crawler.downloader import http11
from crawler.downloader.errors import ServerSilentError, TlsError
from crawler.downloader.handler import CrawlerDownloadHandler, FetchClient
from crawler.exceptions import ConfigurationError
from crawler.requestmeta import BODY_LIMIT_META
from support.mockweb import free_port

#: One answer: the bytes to send (in pieces, to split heads and chunks across
#: reads), then whether to close the connection.
Answer = tuple[list[bytes], bool]


@dataclass
class ScriptedServer:
    """Answers each request (a head ending in a blank line) with the next scripted answer."""

    answers: list[Answer]
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)
    port: int = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while self.answers:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                pieces, close = self.answers.pop(0)
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
                if close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def serve(answers: list[Answer], test: Callable[[ScriptedServer], Awaitable[None]]) -> ScriptedServer:
    server_state = ScriptedServer(list(answers))
    server = await asyncio.start_server(server_state.handle, "127.0.0.1", 0)
    server_state.port = server.sockets[0].getsockname()[1]
    try:
        await asyncio.wait_for(test(server_state), 10)
    finally:
        server.close()
    return server_state


async def fetch(
    port: int,
    *,
    connection: http11.HttpConnection | None = None,
    method: str = "GET",
    limit: int = 0,
    hook: http11.ChunkHook | None = None,
) -> tuple[http11.HttpConnection, http11.ResponseHead, bytes]:
    key: http11.Key = ("http", "127.0.0.1", port)
    if connection is None:
        connection = await http11.connect(key, ["127.0.0.1"], ssl_context=None, server_hostname=None, local_addr=None)
    payload = http11.request_head(method, "/", f"127.0.0.1:{port}", [(b"User-Agent", b"test")], b"")
    head = await connection.start(payload, head_only=method == "HEAD", limit=limit, on_chunk=hook)
    body = await connection.read_body()
    return connection, head, body


def ok(body: bytes, *extra: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), b"".join(extra), body)


def test_request_head_adds_host_and_length_and_refuses_line_breaks() -> None:
    payload = http11.request_head("POST", "/a?b=1", "example.com", [(b"Accept", b"*/*")], b"xyz")
    assert payload == b"POST /a?b=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nContent-Length: 3\r\n\r\nxyz"
    given = http11.request_head("GET", "/", "example.com", [(b"Host", b"other.example")], b"")
    assert given.count(b"Host:") == 1 and b"Host: other.example" in given
    with pytest.raises(ValueError, match="line break"):
        http11.request_head("GET", "/", "example.com", [(b"X", b"a\r\nInjected: 1")], b"")


def test_content_length_body_and_keep_alive_reuse() -> None:
    async def test(server: ScriptedServer) -> None:
        connection, head, body = await fetch(server.port)
        assert (head.status, head.version, head.content_length, body) == (200, b"HTTP/1.1", 5, b"hello")
        assert connection.reusable
        _, _, body = await fetch(server.port, connection=connection)
        assert body == b"again"

    # The first answer arrives split inside its head and its body.
    server = asyncio.run(serve([([ok(b"hello")[:20], ok(b"hello")[20:-2], b"lo"], False), ([ok(b"again")], False)],
                               test))
    assert server.connections == 1 and len(server.requests) == 2


def test_the_lean_client_runs_on_uvloop() -> None:
    # Scrapy's ASYNCIO_EVENT_LOOP = "uvloop.Loop": uvloop's transports are not asyncio.Transport
    # subclasses; a check of the type failed every connection ("the connection is not idle").
    async def test(server: ScriptedServer) -> None:
        assert isinstance(asyncio.get_running_loop(), uvloop.Loop)
        connection, head, body = await fetch(server.port)
        assert (head.status, body) == (200, b"hello")
        assert connection.reusable
        _, _, body = await fetch(server.port, connection=connection)
        assert body == b"again"

    server = uvloop.run(serve([([ok(b"hello")], False), ([ok(b"again")], False)], test))
    assert server.connections == 1 and len(server.requests) == 2


def test_chunked_body_with_extensions_and_trailers_byte_by_byte() -> None:
    answer = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
              b"5;name=value\r\nhello\r\n1A\r\n" + b"x" * 26 + b"\r\n0\r\nX-Trailer: 1\r\n\r\n")

    async def test(server: ScriptedServer) -> None:
        connection, head, body = await fetch(server.port)
        assert head.content_length is None
        assert body == b"hello" + b"x" * 26
        assert connection.reusable

    asyncio.run(serve([([answer[i:i + 1] for i in range(len(answer))], False)], test))


def test_body_until_close_is_not_reused() -> None:
    async def test(server: ScriptedServer) -> None:
        connection, head, body = await fetch(server.port)
        assert (head.status, body) == (200, b"all of it")
        assert not connection.reusable

    asyncio.run(serve([([b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nall ", b"of it"], True)], test))


def test_interim_answers_are_skipped_and_bodiless_statuses_have_no_body() -> None:
    async def test(server: ScriptedServer) -> None:
        connection, head, body = await fetch(server.port)
        assert (head.status, body) == (200, b"ok")
        for status in (204, 304):
            connection, head, body = await fetch(server.port, connection=connection)
            assert (head.status, body) == (status, b"")
        connection, head, body = await fetch(server.port, connection=connection, method="HEAD")
        assert (head.status, head.content_length, body) == (200, 1000, b"")
        assert connection.reusable

    asyncio.run(serve([
        ([b"HTTP/1.1 100 Continue\r\n\r\n", b"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok(b"ok")], False),
        ([b"HTTP/1.1 204 No Content\r\n\r\n"], False),
        ([b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"], False),
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"], False),
    ], test))


def test_bare_line_feeds_and_folded_headers_are_read() -> None:
    async def test(server: ScriptedServer) -> None:
        _, head, body = await fetch(server.port)
        assert body == b"abc"
        assert (b"X-Folded", b"one two") in head.headers
        assert (b"Content-Type", b"text/html") in head.headers

    asyncio.run(serve([([b"HTTP/1.1 200 OK\nContent-Type: text/html\nX-Folded: one\n two\nContent-Length: 3\n\nabc"],
                        False)], test))


@pytest.mark.parametrize(("answer", "reason"), [
    (b"HTTP/1.1 200 OK\r\n" + b"X-Big: " + b"a" * (http11.MAX_HEAD_BYTES + 10) + b"\r\n\r\n", "head over"),
    (b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * (http11.MAX_HEADER_LINES + 1) + b"\r\n", "header lines"),
    (b"ICY 200 OK\r\n\r\n", "status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * (http11.MAX_CHUNK_LINE + 1), "chunk line"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n", "longer than its size"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "invalid header"),
    (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", "101"),
    (b"HTTP/1.1 100 Continue\r\n\r\n" * (http11.MAX_INTERIM + 1), "interim"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1\r\nx\r\n" * (http11.MAX_CHUNKS + 1),
     "chunks"),
])
def test_hostile_answers_are_protocol_errors(answer: bytes, reason: str) -> None:
    async def test(server: ScriptedServer) -> None:
        with pytest.raises(http11.ProtocolError, match=reason):
            await fetch(server.port)

    asyncio.run(serve([([answer], False)], test))


def test_body_over_the_limit_is_refused_while_it_streams() -> None:
    async def test(server: ScriptedServer) -> None:
        with pytest.raises(http11.BodyTooLarge) as caught:
            await fetch(server.port, limit=1000)
        assert caught.value.size > 1000

    chunk = b"%x\r\n%s\r\n" % (600, b"y" * 600)
    asyncio.run(serve([([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", chunk, chunk, chunk], False)],
                      test))


def test_truncated_body_keeps_what_arrived() -> None:
    async def test(server: ScriptedServer) -> None:
        with pytest.raises(http11.ConnectionClosed) as caught:
            await fetch(server.port)
        assert caught.value.started and caught.value.partial == b"x" * 50

    asyncio.run(serve([([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 50], True)], test))


def test_a_kept_connection_the_server_closed_fails_before_any_byte() -> None:
    async def test(server: ScriptedServer) -> None:
        connection, _, _ = await fetch(server.port)
        # Server-side close after the first answer: the next exchange gets nothing.
        await asyncio.sleep(0.1)
        with pytest.raises(http11.ConnectionClosed) as caught:
            await fetch(server.port, connection=connection)
        assert not caught.value.started

    asyncio.run(serve([([ok(b"one")], True)], test))


def test_the_hook_stops_a_body() -> None:
    seen: list[bytes] = []

    def hook(data: bytes) -> bool:
        seen.append(data)
        return True

    async def test(server: ScriptedServer) -> None:
        connection, _, body = await fetch(server.port, hook=hook)
        assert connection.stopped and body == seen[0] and not connection.reusable

    asyncio.run(serve([([b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b"a" * 10, b"b" * 90], False)], test))


def test_pool_is_bounded_lru_with_an_idle_timeout_and_drops_closed_connections() -> None:
    async def test(server: ScriptedServer) -> None:
        pool = http11.ConnectionPool(max_idle=2, idle_timeout=60)
        connections = []
        for _ in range(3):
            connection, _, _ = await fetch(server.port)
            connections.append(connection)
        key = connections[0].key
        for connection in connections:
            pool.release(connection)
        assert len(pool) == 2  # the oldest was closed
        assert connections[0].transport is not None and connections[0].transport.is_closing()
        assert pool.acquire(key) is connections[2]
        pool.idle_timeout = 0.0
        assert pool.acquire(key) is None and len(pool) == 0  # expired, closed
        # A connection the server closes leaves the pool by itself.
        pool.idle_timeout = 60
        connection, _, _ = await fetch(server.port)
        pool.release(connection)
        assert len(pool) == 1
        await asyncio.sleep(0.2)
        assert len(pool) == 0

    asyncio.run(serve([([ok(b"1")], False), ([ok(b"2")], False), ([ok(b"3")], False), ([ok(b"4")], True)], test))


# -- the download handler -------------------------------------------------------------


def handler_for(client: FetchClient, **settings: Any) -> CrawlerDownloadHandler:
    crawler = get_crawler(settings_dict={
        "FETCH_HTTP_CLIENT": client.value, "ALLOW_PRIVATE_NETWORKS": True, "DOWNLOAD_MAXSIZE": 10_000,
        "DOWNLOAD_FAIL_ON_DATALOSS": True, **settings,
    })
    crawler._apply_settings()
    return CrawlerDownloadHandler(crawler)


async def both(port: int, url_path: str, **settings: Any) -> list[Any]:
    """The same request through the lean client and through aiohttp."""
    outcomes: list[Any] = []
    for client in (FetchClient.LEAN, FetchClient.AIOHTTP):
        handler = handler_for(client, **settings)
        try:
            response = await handler.download_request(Request(f"http://127.0.0.1:{port}{url_path}"))
            outcomes.append((response.status, dict(response.headers), response.body, response.protocol,
                             str(response.ip_address), sorted(response.flags), type(response).__name__))
        except Exception as exc:
            outcomes.append(type(exc))
        finally:
            await handler.close()
    return outcomes


@pytest.mark.parametrize(("answer", "expected"), [
    (ok(b"<html>hi</html>", b"Content-Type: text/html; charset=utf-8\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"), 200),
    (b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 404),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n", DownloadCancelledError),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b"x" * 10, ResponseDataLossError),
    (b"HTTP/1.1 301 Moved\r\nLocation: /b\r\nContent-Length: 0\r\n\r\n", 301),
])
def test_lean_and_aiohttp_give_the_same_response(answer: bytes, expected: int | type[Exception]) -> None:
    outcomes: list[Any] = []

    async def test(server: ScriptedServer) -> None:
        outcomes.extend(await both(server.port, "/page"))

    asyncio.run(serve([([answer], True), ([answer], True)], test))
    lean, aiohttp_ = outcomes
    assert lean == aiohttp_
    assert (lean if isinstance(lean, type) else lean[0]) == expected


def test_handler_retries_a_stale_kept_connection_once_and_counts_it() -> None:
    async def test(server: ScriptedServer) -> None:
        handler = handler_for(FetchClient.LEAN)
        try:
            first = await handler.download_request(Request(f"http://127.0.0.1:{server.port}/1"))
            second = await handler.download_request(Request(f"http://127.0.0.1:{server.port}/2"))
            assert (first.body, second.body) == (b"one", b"two")
            assert handler._stats.get_value("fetch/stale_connection") == 1
        finally:
            await handler.close()

    # Keep-alive promised, then the next request is met with a close (the race with
    # a server's idle timeout): the retry uses a new connection.
    server = asyncio.run(serve([([ok(b"one")], False), ([], True), ([ok(b"two")], True)], test))
    assert server.connections == 2


def test_handler_signals_stop_downloads_and_protocol_errors_are_download_failures() -> None:
    async def test(server: ScriptedServer) -> None:
        handler = handler_for(FetchClient.LEAN)

        def stop(**kwargs: Any) -> None:
            raise StopDownload(fail=False)

        handler.crawler.signals.connect(stop, signal=signals.bytes_received)
        try:
            response = await handler.download_request(Request(f"http://127.0.0.1:{server.port}/1"))
            assert "download_stopped" in response.flags and response.body == b"abc"
            with pytest.raises(DownloadFailedError, match="status line"):
                await handler.download_request(Request(f"http://127.0.0.1:{server.port}/2"))
            assert handler._stats.get_value("fetch/protocol_error") == 1
        finally:
            await handler.close()

    asyncio.run(serve([
        ([b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n", b"abc", b"def"], True),
        ([b"garbage\r\n\r\n"], True),
    ], test))


def test_a_body_limit_keeps_what_arrived_up_to_it_through_both_clients() -> None:
    """``BODY_LIMIT_META`` (robots.txt's cap): past the limit the download stops and the response has the
    body so far, not a failure (DOWNLOAD_MAXSIZE fails instead), through the lean client and aiohttp alike,
    with no receiver of ``bytes_received`` (the limit needs none)."""
    from crawler.scrapy_internals import has_receivers

    body = b"".join(bytes([65 + i]) * 1000 for i in range(9))
    bodies: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # 4,000 bytes, a pause, the other 5,000: a client that stops at its limit never waits for them.
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9000\r\n\r\n" + body[:4000])
            await writer.drain()
            await asyncio.sleep(2)
            writer.write(body[4000:])
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(answer, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            for client in (FetchClient.LEAN, FetchClient.AIOHTTP):
                handler = handler_for(client)
                assert not has_receivers(handler.crawler.signals.sender, signals.bytes_received)
                try:
                    request = Request(f"http://127.0.0.1:{port}/robots.txt", meta={BODY_LIMIT_META: 3000})
                    response = await handler.download_request(request)
                    assert response.status == 200
                    bodies.append(response.body)
                finally:
                    await handler.close()
        finally:
            server.close()

    asyncio.run(run())
    # The rest is sent 2 s later: a client that waited for it would have all 9,000 bytes.
    assert [len(b) for b in bodies] == [4000, 4000]
    assert all(b == body[:4000] for b in bodies)


def test_handler_escapes_unsafe_targets_and_names_a_bad_client_setting() -> None:
    async def test(server: ScriptedServer) -> None:
        handler = handler_for(FetchClient.LEAN)
        try:
            request = Request(f"http://127.0.0.1:{server.port}/a b", meta={"verbatim_url": True})
            request._url = f"http://127.0.0.1:{server.port}/a b\u00e9"  # as a hostile URL might reach it
            await handler.download_request(request)
        finally:
            await handler.close()

    server = asyncio.run(serve([([ok(b"x")], True)], test))
    assert server.requests[0].startswith(b"GET /a%20b%C3%A9 HTTP/1.1\r\n")

    async def bad_setting() -> None:
        handler_for(FetchClient.LEAN, FETCH_HTTP_CLIENT="curl")

    with pytest.raises(ConfigurationError, match="FETCH_HTTP_CLIENT"):
        asyncio.run(bad_setting())


def self_signed(tmp_path: Any) -> tuple[str, str]:
    """A certificate and key for 127.0.0.1, made for the test (nothing downloaded)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_https_through_the_lean_client_keeps_the_connection_and_gives_the_certificate(tmp_path: Any) -> None:
    import ssl

    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    state = ScriptedServer([([ok(b"secure one")], False), ([ok(b"secure two")], False)])

    async def main() -> None:
        server = await asyncio.start_server(state.handle, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        handler = handler_for(FetchClient.LEAN)
        try:
            first = await handler.download_request(Request(f"https://127.0.0.1:{port}/a"))
            second = await handler.download_request(Request(f"https://127.0.0.1:{port}/b"))
            assert (first.body, second.body) == (b"secure one", b"secure two")
            assert first.certificate is not None and b"127.0.0.1" in first.certificate
        finally:
            await handler.close()
            server.close()

    asyncio.run(asyncio.wait_for(main(), 10))
    assert state.connections == 1


def test_requests_through_a_proxy_go_through_aiohttp() -> None:
    async def test(server: ScriptedServer) -> None:
        handler = handler_for(FetchClient.LEAN)
        try:
            request = Request("http://example.invalid/page", meta={"proxy": f"http://127.0.0.1:{server.port}"})
            response = await handler.download_request(request)
            assert response.body == b"via proxy"
        finally:
            await handler.close()

    server = asyncio.run(serve([([ok(b"via proxy")], True)], test))
    # A proxy gets the absolute URL in the request line.
    assert server.requests[0].startswith(b"GET http://example.invalid/page HTTP/1.1\r\n")


def test_an_ipv6_literal_host_is_bracketed_in_the_host_header() -> None:
    import socket

    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    state = ScriptedServer([([ok(b"six")], True)])

    async def main() -> None:
        server = await asyncio.start_server(state.handle, "::1", 0)
        port = server.sockets[0].getsockname()[1]
        handler = handler_for(FetchClient.LEAN)
        try:
            response = await handler.download_request(Request(f"http://[::1]:{port}/v6"))
            assert response.body == b"six" and str(response.ip_address) == "::1"
        finally:
            await handler.close()
            server.close()

    asyncio.run(asyncio.wait_for(main(), 10))
    assert b"\r\nHost: [::1]:" in state.requests[0]


def test_a_server_that_accepts_and_never_answers_is_silent_after_the_first_byte_timeout() -> None:
    async def test(server: ScriptedServer) -> None:
        handler = handler_for(FetchClient.LEAN, FETCH_FIRST_BYTE_TIMEOUT=0.2, DOWNLOAD_TIMEOUT=60)
        try:
            # The first-byte timeout, not DOWNLOAD_TIMEOUT (the test would not end within its 10 s).
            with pytest.raises(ServerSilentError, match="no answer within 0.2 s"):
                await handler.download_request(Request(f"http://127.0.0.1:{server.port}/silent"))
            assert handler._stats.get_value("fetch/server_silent") == 1
            # A port nobody listens on is a refused connection, not a silent server.
            with pytest.raises(DownloadConnectionRefusedError):
                await handler.download_request(Request(f"http://127.0.0.1:{free_port()}/"))
        finally:
            await handler.close()

    # Nothing written for the request, and the connection kept open (the server waits for another).
    asyncio.run(serve([([], False), ([ok(b"never asked")], True)], test))


def test_a_certificate_that_does_not_verify_is_a_tls_error_not_a_refused_connection(tmp_path: Any) -> None:
    import ssl

    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    state = ScriptedServer([([ok(b"never read")], True)])

    async def main() -> None:
        server = await asyncio.start_server(state.handle, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        handler = handler_for(FetchClient.LEAN, DOWNLOAD_VERIFY_CERTIFICATES=True)
        try:
            with pytest.raises(TlsError, match="TLS handshake"):
                await handler.download_request(Request(f"https://127.0.0.1:{port}/a"))
            assert handler._stats.get_value("fetch/tls_error") == 1
        finally:
            await handler.close()
            server.close()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_transfer_codings_besides_chunked_are_decoded_and_a_length_beside_them_closes_the_connection() -> None:
    import gzip

    packed = gzip.compress(b"<html>gzipped in transfer</html>")
    coded = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
             + f"{len(packed):x}\r\n".encode() + packed + b"\r\n0\r\n\r\n")
    both = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    unknown = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: zstd-nope, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"

    async def test(server: ScriptedServer) -> None:
        handler = handler_for(FetchClient.LEAN)
        try:
            first = await handler.download_request(Request(f"http://127.0.0.1:{server.port}/1"))
            assert first.body == b"<html>gzipped in transfer</html>"
            second = await handler.download_request(Request(f"http://127.0.0.1:{server.port}/2"))
            assert second.body == b"abc"  # framed by Transfer-Encoding; the connection closed after it
            with pytest.raises(DownloadFailedError, match="unsupported transfer coding"):
                await handler.download_request(Request(f"http://127.0.0.1:{server.port}/3"))
        finally:
            await handler.close()

    server = asyncio.run(serve([([coded], False), ([both], False), ([unknown], True)], test))
    assert server.connections == 2  # kept after the first answer, closed by the client after the second


def test_an_address_that_swallows_connection_attempts_does_not_spend_the_connect_budget() -> None:
    """Happy Eyeballs: a black-holed first address (a listener whose queue is full drops SYNs), then
    one that answers: connected through the second, well within the timeout given."""
    import socket

    hole = socket.socket()
    hole.bind(("127.0.0.2", 0))
    hole.listen(0)
    port = hole.getsockname()[1]
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(("127.0.0.2", port))
        fillers.append(filler)
    state = ScriptedServer([([ok(b"through the second address")], True)])

    async def main() -> None:
        server = await asyncio.start_server(state.handle, "127.0.0.1", port)
        try:
            async with asyncio.timeout(5):  # the sequential client waited here until the timeout
                connection = await http11.connect(("http", "x.test", port), ["127.0.0.2", "127.0.0.1"],
                                                  ssl_context=None, server_hostname=None, local_addr=None)
            head = await connection.start(http11.request_head("GET", "/", "x.test", [], b""), head_only=False,
                                          limit=0, on_chunk=None)
            assert head.status == 200 and await connection.read_body() == b"through the second address"
            connection.abort()
        finally:
            server.close()

    try:
        asyncio.run(main())
    finally:
        hole.close()
        for filler in fillers:
            filler.close()
