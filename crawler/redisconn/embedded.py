"""A private ``redis-server`` for a crawl run without ``REDIS_URL``.

It listens on a unix socket only (no TCP port), keeps an append-only file in
the job directory (``crawl-data/<crawl id>/redis/`` or ``JOBDIR/redis``) so
that stopping and starting the crawl resumes it, and dies with the crawler
process: it is started with ``PR_SET_PDEATHSIG`` (SIGTERM, which makes Redis
flush its AOF and exit), so even a SIGKILLed crawler leaves no orphan behind.
If a live server already serves the directory (another crawler process on the
same job), it is used instead of starting a second one on the same files.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from crawler.crawlstate.encodings import server_arguments
from crawler.exceptions import ConfigurationError, FrontierUnavailableError

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
# Unix socket paths are limited to 108 bytes by the kernel.
_MAX_SOCKET_PATH = 100


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass
    os.setpgrp()  # a Ctrl-C in the terminal reaches the crawler, which stops us in order


def _ping(path: str, timeout: float = 0.5) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(path)
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class EmbeddedRedisServer:
    def __init__(self, directory: Path, binary: str = "redis-server", start_timeout: float = 10.0,
                 maxmemory: int = 0) -> None:
        self.directory = directory.resolve()
        #: The server's memory limit (bytes; 0: none). It never evicts: the crawl admits less near it.
        self.maxmemory = maxmemory
        self.binary = binary
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.owned = False
        socket_path = self.directory / "redis.sock"
        if len(str(socket_path)) > _MAX_SOCKET_PATH:
            digest = hashlib.sha1(str(self.directory).encode()).hexdigest()[:16]
            socket_path = Path(tempfile.gettempdir()) / f"crawler-redis-{digest}.sock"
        self.socket_path = socket_path

    @property
    def url(self) -> str:
        return f"unix://{self.socket_path}"

    @property
    def log_path(self) -> Path:
        return self.directory / "redis.log"

    async def start(self) -> None:
        """Start the server (or adopt a live one on the same directory) and wait until it answers."""
        executable = shutil.which(self.binary)
        if executable is None:
            raise ConfigurationError(
                "REDIS_SERVER_BINARY",
                f"{self.binary!r} not found: install redis-server (apt-get install redis-server) "
                "or set REDIS_URL to a running server",
            )
        self.directory.mkdir(parents=True, exist_ok=True)
        if _ping(str(self.socket_path)):
            logger.info("Using the embedded redis-server already running on %s", self.socket_path)
            return
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        command = [
            executable,
            "--port", "0",
            "--unixsocket", str(self.socket_path),
            "--unixsocketperm", "700",
            "--dir", str(self.directory),
            "--appendonly", "yes",
            "--appendfsync", "everysec",
            "--save", "300 1 60 10000",
            "--pidfile", str(self.directory / "redis.pid"),
            "--logfile", str(self.log_path),
            "--daemonize", "no",
            # What the compact layout is sized for (crawler/crawlstate/encodings.py).
            *server_arguments(),
            "--maxmemory", str(self.maxmemory),
            "--maxmemory-policy", "noeviction",
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - no threads run Python code yet
            close_fds=True,
        )
        self.owned = True
        deadline = time.monotonic() + self.start_timeout
        while not _ping(str(self.socket_path), timeout=0.2):
            if self.process.poll() is not None:
                raise FrontierUnavailableError(
                    f"the embedded redis-server exited with status {self.process.returncode}; "
                    f"see {self.log_path}: {self._log_tail()}"
                )
            if time.monotonic() > deadline:
                self.process.kill()
                raise FrontierUnavailableError(
                    f"the embedded redis-server did not answer within {self.start_timeout:.0f} s; see {self.log_path}"
                )
            await asyncio.sleep(0.02)
        logger.info("Started the embedded redis-server (pid %d) on %s", self.process.pid, self.socket_path)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop a server this object started, letting it write its data first."""
        process = self.process
        if process is None or not self.owned or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while process.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        if process.poll() is None:
            logger.error("The embedded redis-server did not stop within %.0f s; killing it", timeout)
            process.kill()
            process.wait()
        else:
            logger.info("Stopped the embedded redis-server")
        self.process = None

    def stop_now(self) -> None:
        """Synchronous stop, for interpreter exit."""
        process = self.process
        if process is not None and self.owned and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()

    def _log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty log)"
