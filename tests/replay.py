"""pywb, the replay server, on a collection made of a crawl's WARC files and the crawler's own CDXJ index."""

from __future__ import annotations

import glob
import http.client
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.mockweb import free_port
from tests.conftest import ROOT, _wait_for_port

WAYBACK = ROOT / ".venv-replay" / "bin" / "wayback"


@contextmanager
def pywb(work: Path, warc_dir: Path) -> Iterator[tuple[int, list[str]]]:
    """pywb serving collection ``crawl`` made of ``warc_dir``'s WARC files and ``.cdxj`` indexes as they are
    (no re-indexing): (its port, the index lines)."""
    if not WAYBACK.exists():
        pytest.fail(f"{WAYBACK} is missing: make test installs it (requirements-replay.txt)")
    collection = work / "pywb" / "collections" / "crawl"
    (collection / "archive").mkdir(parents=True)
    (collection / "indexes").mkdir()
    for warc in glob.glob(str(warc_dir / "**" / "*.warc.gz"), recursive=True):
        shutil.copy(warc, collection / "archive")
    lines = sorted(line for index in glob.glob(str(warc_dir / "**" / "*.cdxj"), recursive=True)
                   for line in Path(index).read_text().splitlines())
    (collection / "indexes" / "index.cdxj").write_text("".join(line + "\n" for line in lines))
    port = free_port()
    server = subprocess.Popen([str(WAYBACK), "-p", str(port), "-b", "127.0.0.1"], cwd=work / "pywb",
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, timeout=60)
        yield port, lines
    finally:
        server.terminate()
        server.wait(timeout=30)


def replayed(port: int, url: str) -> tuple[int, dict[str, str], bytes]:
    """pywb's answer for ``url`` in its original form (``id_``), redirects not followed."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", f"/crawl/id_/{url}")
        answer = connection.getresponse()
        return answer.status, {k.lower(): v for k, v in answer.getheaders()}, answer.read()
    finally:
        connection.close()
