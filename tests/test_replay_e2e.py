"""A WARC written by a crawl replays through pywb, found by its CDXJ keys.

The crawl fetches a page whose URL has several query arguments (not in
sorted order); its WARC file and the ``.cdxj`` index the crawler wrote beside
it go into a pywb collection as they are (no re-indexing), and pywb (in its
own virtualenv, ``.venv-replay``: it pins redis 2.x) serves the page back,
for the URL as crawled and for the same URL with its arguments in another
order (replay tools look records up by the canonical SURT key).
"""

from __future__ import annotations

import glob
import json
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.mockweb import WebSpec, free_port, host_ip
from tests.conftest import ROOT, TEST_SETTINGS, RedisServer, _wait_for_port, run_crawl, start_mockweb

WAYBACK = ROOT / ".venv-replay" / "bin" / "wayback"


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[dict[str, Any]]:
    if not WAYBACK.exists():
        pytest.fail(f"{WAYBACK} is missing: make test installs it (requirements-replay.txt)")
    tmp = tmp_path_factory.mktemp("replay")
    web = start_mockweb(WebSpec(hosts=1, sizes="uniform:3", fanout=0, nav=0, cross=0), tmp / "mockweb.log")
    url = f"http://{host_ip(0)}:{web.port}/p/2?zeta=1&alpha=2&mid=3"
    crawl_id = f"replay-{int(time.time())}"
    try:
        result = run_crawl("-a", f"urls={url}", settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id},
                           timeout=120)
    finally:
        web.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    warc_dir = Path(str(TEST_SETTINGS["CRAWL_DATA_DIR"])) / crawl_id / "warc"
    collection = tmp / "pywb" / "collections" / "crawl"
    (collection / "archive").mkdir(parents=True)
    (collection / "indexes").mkdir()
    for warc in glob.glob(str(warc_dir / "*.warc.gz")):
        shutil.copy(warc, collection / "archive")
    lines = sorted(line for index in glob.glob(str(warc_dir / "*.cdxj")) for line in Path(index).read_text().splitlines())
    (collection / "indexes" / "index.cdxj").write_text("".join(line + "\n" for line in lines))
    port = free_port()
    server = subprocess.Popen([str(WAYBACK), "-p", str(port), "-b", "127.0.0.1"], cwd=tmp / "pywb",
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for_port(port, timeout=60)
        yield {"port": port, "url": url, "lines": lines}
    finally:
        server.terminate()
        server.wait(timeout=30)


def fetch(port: int, url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/crawl/id_/{url}", timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_index_keys_are_the_canonical_surt_form(replay: dict[str, Any]) -> None:
    [line] = [line for line in replay["lines"] if json.loads(line.split(" ", 2)[2])["url"] == replay["url"]]
    assert line.split(" ", 1)[0].endswith(")/p/2?alpha=2&mid=3&zeta=1")


@pytest.mark.parametrize("order", ["as crawled", "another order"])
def test_pywb_replays_the_page_from_the_crawlers_own_index(replay: dict[str, Any], order: str) -> None:
    url = replay["url"]
    if order == "another order":
        url = url.replace("zeta=1&alpha=2&mid=3", "mid=3&zeta=1&alpha=2")
    status, body = fetch(replay["port"], url)
    assert status == 200, body[:500]
    assert b"Host 0 page 2" in body
