"""A throwaway redis-server for a benchmark: free loopback port, no persistence, removed after; the
embedded server's encoding settings unless told otherwise (what ``make crawl`` runs on)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from crawler.crawlstate.encodings import server_arguments
from support.mockweb import free_port


@contextmanager
def scratch_redis(*options: str, layout: bool = True) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """Start ``redis-server`` with ``options`` added (after the embedded server's encoding settings, unless
    ``layout`` is false: Redis' own defaults); yields (process, port) once it answers PING."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-redis-"))
    port = free_port()
    process = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", str(workdir), "--logfile", str(workdir / "redis.log"),
         *(server_arguments() if layout else []), *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        client = redis.Redis(port=port)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()
        yield process, port
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(workdir, ignore_errors=True)
