"""A crawl of a real web server: Debian's nginx, gzip on, on a loopback address of its own.

The suite's check that the lean HTTP client reads a real server as it reads the
mock web: nginx serves a robots.txt and a few pages, gzipped and chunked (HTML
under ``/``) or whole with a ``Content-Length`` (``/plain/``, gzip off). The
crawl must fetch robots.txt first and nothing it disallows, one request at a
time with no start closer than the delay to the one before (nginx's own access
log, its clock); and its WARC records must keep the server's headers in the
order sent (``Content-Encoding`` and ``Transfer-Encoding`` renamed
``X-Crawler-...``, a true ``Content-Length``), hold every body byte for byte as
the file on disk, with a payload digest of the body as stored, pass ``warcio
check``, and replay in pywb.
"""

from __future__ import annotations

import base64
import glob
import gzip
import hashlib
import itertools
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from warcio.archiveiterator import ArchiveIterator

from support.mockweb import free_port
from tests.conftest import ROOT, TEST_SETTINGS, RedisServer, _wait_for_port, run_crawl
from tests.test_storage_e2e import warc_check

ADDRESS = "127.44.0.1"
DELAY = 0.5
WAYBACK = ROOT / ".venv-replay" / "bin" / "wayback"

#: The User-Agent of the test's own requests (the header names as nginx sends them), not the crawl's.
PROBE = "header-probe"
ROBOTS = "User-agent: *\nDisallow: /private/\n"


def _page(title: str, links: str = "", words: int = 600) -> str:
    text = " ".join(f"{title.lower()}-word{i % 97}" for i in range(words))
    return f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body><h1>{title}</h1>\n<p>{text}</p>\n" \
           f"{links}</body></html>\n"


#: Path -> file content. The index links every page; one href is written over two lines, indented
#: with tabs (a browser removes both: /docs/joined.html), and one points at a disallowed page.
SITE = {
    "/robots.txt": ROBOTS,
    "/index.html": _page("Index", '<a href="/a.html">a</a> <a href="b.html">b</a>\n'
                                  '<a href="/plain/c.html">c</a> <a href="/plain/d.html">d</a>\n'
                                  '<a href="/docs/\n\t\tjoined.html">joined</a> <a href="/private/secret.html">x</a>\n'),
    "/a.html": _page("A", '<a href="/index.html">home</a>', words=3000),
    "/b.html": _page("B", words=50),
    "/plain/c.html": _page("C", words=2000),
    "/plain/d.html": _page("D", words=10),
    "/docs/joined.html": _page("Joined"),
    "/private/secret.html": _page("Secret"),
}
GZIPPED = {"/index.html", "/a.html", "/b.html", "/docs/joined.html"}
PLAIN = {"/plain/c.html", "/plain/d.html"}

#: $msec is the time the request ended (the log line's), $request_time its duration: the start is the
#: difference, both on nginx's clock, in milliseconds.
CONFIG = """
daemon off;
master_process off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 64; }}
http {{
    types {{ text/html html; text/plain txt; }}
    default_type application/octet-stream;
    client_body_temp_path {tmp}/body;
    log_format timed '$msec $request_time $status $bytes_sent "$request" "$http_user_agent"';
    access_log {tmp}/access.log timed;
    gzip on;
    gzip_min_length 1;
    server {{
        listen {address}:{port};
        server_name localhost;
        root {tmp}/www;
        location /plain/ {{ gzip off; }}
    }}
}}
"""


class Nginx:
    def __init__(self, tmp: Path) -> None:
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(binary).exists():
            pytest.fail("nginx is missing: make test installs it (Debian's nginx-light)")
        self.tmp = tmp
        self.port = free_port()
        for path, content in SITE.items():
            target = tmp / "www" / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        config = tmp / "nginx.conf"
        config.write_text(CONFIG.format(tmp=tmp, address=ADDRESS, port=self.port))
        self.process = subprocess.Popen([binary, "-c", str(config), "-p", str(tmp)], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE)
        try:
            _wait_for_port(self.port, ADDRESS)
        except Exception:
            self.process.kill()
            raise AssertionError(f"nginx did not start: {self.process.communicate()[1]!r}") from None

    def url(self, path: str) -> str:
        return f"http://{ADDRESS}:{self.port}{path}"

    def log(self) -> list[tuple[float, float, int, str, int]]:
        """(start, end, status, path, bytes sent) of every request the crawl made, in the log's order."""
        entries = []
        for line in (self.tmp / "access.log").read_text().splitlines():
            if line.endswith(f'"{PROBE}"'):
                continue
            ended, took, status, sent, request = line.split(" ", 4)
            path = request.split('"')[1].split(" ")[1]
            entries.append((float(ended) - float(took), float(ended), int(status), path, int(sent)))
        return entries

    def raw_header_names(self, path: str) -> list[str]:
        """The header names nginx sends for ``path`` to a client that accepts gzip, in order."""
        with socket.create_connection((ADDRESS, self.port), timeout=10) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {ADDRESS}:{self.port}\r\nUser-Agent: {PROBE}\r\n"
                         "Accept-Encoding: gzip, deflate, br, zstd\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]
        return [line.split(":", 1)[0] for line in head]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def digest(payload: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(payload).digest()).decode()


@pytest.fixture(scope="module")
def nginx_crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("nginx")
    server = Nginx(tmp)
    try:
        names = {path: server.raw_header_names(path) for path in GZIPPED | PLAIN}
        crawl_id = f"nginx-{int(time.time())}"
        result = run_crawl("-a", "urls=" + server.url("/index.html"), settings={
            "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, "FRONTIER_MIN_DELAY": DELAY,
        }, timeout=180)
        log = server.log()
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    warcs = sorted(glob.glob(str(Path(str(TEST_SETTINGS["CRAWL_DATA_DIR"])) / crawl_id / "warc" / "*.warc.gz")))
    assert warcs, result.stderr[-3000:]
    responses = {}
    for path in warcs:
        with open(path, "rb") as stream:
            for record in ArchiveIterator(stream):
                if record.rec_type == "response":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    responses[uri.split(str(server.port), 1)[1]] = (record, record.content_stream().read())
    yield {"server": server, "log": log, "names": names, "responses": responses, "warcs": warcs, "tmp": tmp,
           "result": result}


def test_robots_txt_first_nothing_disallowed_one_request_at_a_time(nginx_crawl: dict[str, Any]) -> None:
    log = nginx_crawl["log"]
    paths = [entry[3] for entry in sorted(log)]
    assert paths[0] == "/robots.txt"
    assert sorted(paths) == sorted(set(SITE) - {"/private/secret.html"}), paths
    assert nginx_crawl["result"].stats.get("robots/disallowed", 0) >= 1
    ordered = sorted(log)
    for (start, end, _, path, _), (next_start, _, _, next_path, _) in itertools.pairwise(ordered):
        assert next_start >= end - 0.002, f"{next_path} started while {path} was in flight"
        assert next_start - start >= DELAY - 0.002, f"{next_path} started {next_start - start:.3f} s after {path}"


def test_the_href_over_two_lines_was_followed_as_a_browser_joins_it(nginx_crawl: dict[str, Any]) -> None:
    assert "/docs/joined.html" in nginx_crawl["responses"]


@pytest.mark.parametrize("path", sorted(GZIPPED | PLAIN))
def test_warc_records_keep_the_servers_headers_and_bodies(nginx_crawl: dict[str, Any], path: str) -> None:
    record, payload = nginx_crawl["responses"][path]
    assert payload == SITE[path].encode(), "the payload is not the file as on disk"
    assert record.rec_headers.get_header("WARC-Payload-Digest") == digest(payload)
    headers = record.http_headers
    names = [name for name, _ in headers.headers]
    if path in GZIPPED:
        # As sent: gzipped and chunked, both kept renamed, in their place; a true length at the end.
        assert headers.get_header("X-Crawler-Content-Encoding") == "gzip"
        assert headers.get_header("X-Crawler-Transfer-Encoding") == "chunked"
        assert headers.get_header("Content-Encoding") is None and headers.get_header("Transfer-Encoding") is None
        assert names[-1] == "Content-Length" and headers.get_header("Content-Length") == str(len(payload))
        sent = [name.removeprefix("X-Crawler-") for name in names[:-1]]
    else:
        assert headers.get_header("Content-Length") == str(len(payload))
        assert not [name for name in names if name.startswith("X-Crawler-")]
        sent = names
    assert [name.lower() for name in sent] == [name.lower() for name in nginx_crawl["names"][path]]


def test_the_warc_files_pass_warcio_check(nginx_crawl: dict[str, Any]) -> None:
    for path in nginx_crawl["warcs"]:
        warc_check(Path(path))


def test_pywb_replays_a_gzipped_page_as_the_file_on_disk(nginx_crawl: dict[str, Any]) -> None:
    if not WAYBACK.exists():
        pytest.fail(f"{WAYBACK} is missing: make test installs it (requirements-replay.txt)")
    tmp, server = nginx_crawl["tmp"], nginx_crawl["server"]
    collection = tmp / "pywb" / "collections" / "crawl"
    (collection / "archive").mkdir(parents=True)
    (collection / "indexes").mkdir()
    lines = []
    for warc in nginx_crawl["warcs"]:
        shutil.copy(warc, collection / "archive")
        lines += Path(warc.removesuffix(".warc.gz") + ".cdxj").read_text().splitlines()
    (collection / "indexes" / "index.cdxj").write_text("".join(line + "\n" for line in sorted(lines)))
    port = free_port()
    wayback = subprocess.Popen([str(WAYBACK), "-p", str(port), "-b", "127.0.0.1"], cwd=tmp / "pywb",
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, timeout=60)
        for path in ("/a.html", "/plain/c.html"):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/crawl/id_/{server.url(path)}",
                                            timeout=30) as answer:
                    status, body = answer.status, answer.read()
                    if answer.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
            except urllib.error.HTTPError as error:
                status, body = error.code, error.read()
            assert status == 200, body[:500]
            assert body == SITE[path].encode()
    finally:
        wayback.terminate()
        wayback.wait(timeout=30)


def test_nginx_itself_sent_gzip_and_chunks(nginx_crawl: dict[str, Any]) -> None:
    # The checks above are worth something only if the server really compressed: it did, chunked.
    names = nginx_crawl["names"]
    assert {"Content-Encoding", "Transfer-Encoding"} <= set(names["/a.html"]) and "Content-Length" not in names["/a.html"]
    assert "Content-Length" in names["/plain/c.html"] and "Content-Encoding" not in names["/plain/c.html"]
    sent = {path: size for _, _, _, path, size in nginx_crawl["log"]}
    assert sent["/a.html"] < len(SITE["/a.html"]) // 2 < sent["/plain/c.html"]
