"""A TCP relay in front of a real redis-server that can cut the network: the fault of a Redis
restart or a failover at a chosen command, at a chosen moment, without racing a timer."""

from __future__ import annotations

import contextlib
import re
import socket
import threading
import time

#: The first command name of a RESP request (``*N\r\n$len\r\nNAME``).
_COMMAND = re.compile(rb"^\*\d+\r\n\$\d+\r\n([A-Za-z]+)")


class NetCut:
    """Relays connections on ``port`` to a Redis at ``target``. The first request whose command
    is not in ``allowed`` cuts every connection and refuses new ones for ``outage`` seconds."""

    def __init__(self, target: tuple[str, int], allowed: set[bytes], outage: float) -> None:
        self.target, self.allowed, self.outage = target, allowed, outage
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut_at: bytes | None = None
        self._down_until = 0.0
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def close(self) -> None:
        self.listener.close()
        self._cut()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self._down_until:
                client.close()  # refused: the server is "down"
                continue
            server = socket.create_connection(self.target)
            with self._lock:
                self._sockets += [client, server]
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, requests: bool) -> None:
        try:
            while data := source.recv(65536):
                if requests and self.cut_at is None:
                    match = _COMMAND.match(data)
                    if match and match.group(1).upper() not in self.allowed:
                        self.cut_at = match.group(1).upper()
                        self._down_until = time.monotonic() + self.outage
                        self._cut()
                        return
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                end.close()

    def _cut(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for end in sockets:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
