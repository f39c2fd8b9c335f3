"""The mock web itself: what the benchmarks' cheaper serving must not change."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.mockweb import (
    MockWebServer,
    WebSpec,
    filler_text,
    free_port,
    host_ip,
    read_log,
    render_page,
    spec_arguments,
)

ROOT = Path(__file__).resolve().parent.parent


def test_filler_text_is_deterministic_per_page_and_has_the_word_count() -> None:
    for count in (0, 1, 2, 3, 4, 600):
        text = filler_text(3, 4, 1, count)
        assert len(text.split()) == count
        assert text == filler_text(3, 4, 1, count)
    assert filler_text(3, 4, 1, 60) != filler_text(3, 5, 1, 60)
    assert filler_text(3, 4, 1, 60) != filler_text(3, 4, 2, 60)


def test_prerendered_pages_are_the_pages_rendered_on_demand() -> None:
    spec = WebSpec(hosts=7, sizes="zipf:40:1.0", fanout=3, nav=2, cross=2, filler_words=30)
    lazy = MockWebServer(spec, 8000, None)
    eager = MockWebServer(spec, 8000, None)
    eager.prerender()
    assert len(eager.cache) == spec.total_pages()
    for host in range(spec.hosts):
        for page in range(spec.pages(host)):
            path = "/" if page == 0 else f"/p/{page}"
            body = eager.respond(host, "GET", path).body
            assert body == lazy.respond(host, "GET", path).body == render_page(spec, host, page, 8000)


def _exchange(port: int, host: int, paths: list[str]) -> bytes:
    """Send ``paths`` pipelined on one connection; everything read until the last answer."""
    with socket.create_connection((host_ip(host), port), timeout=5) as sock:
        sock.sendall(b"".join(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode() for path in paths))
        data = b""
        while data.count(b"HTTP/1.1 ") < len(paths) or not data.endswith(b"</html>"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


@pytest.mark.e2e
def test_answers_in_order_with_and_without_latency_and_a_batched_log(tmp_path: Path) -> None:
    spec = WebSpec(hosts=2, sizes="uniform:5", fanout=2, nav=1, cross=1, filler_words=10, latency_ms=(0.0, 30.0))
    port = free_port()
    log = tmp_path / "web.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "support.mockweb", "--port", str(port), "--log", str(log),
         "--log-flush", "0.2", "--prerender", *spec_arguments(spec)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None and b"listening" in process.stdout.readline()
        for host in (0, 1):  # host 0 answers at once (data_received), host 1 after 30 ms (the queue)
            data = _exchange(port, host, ["/p/1", "/p/2", "/nowhere", "/p/3"])
            titles = [part.split(b"</title>")[0] for part in data.split(b"<title>")[1:]]
            assert titles == [f"Host {host} page {n}".encode() for n in (1, 2, 3)]
            assert data.count(b"HTTP/1.1 404 ") == 1
            assert data.index(b"404 Not Found") < data.index(f"Host {host} page 3".encode())
        deadline = time.monotonic() + 5
        while len(read_log(str(log))) < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        entries = read_log(str(log))
        assert [(e.host, e.path, e.status) for e in entries] == [
            (host_ip(host), path, status) for host in (0, 1)
            for path, status in (("/p/1", 200), ("/p/2", 200), ("/nowhere", 404), ("/p/3", 200))
        ]
        slow = [e for e in entries if e.host == host_ip(1)]
        assert all(e.end - e.start >= 0.025 for e in slow)
    finally:
        process.terminate()
        process.wait(timeout=10)
