"""A WARC written by a crawl replays through pywb, found by its CDXJ keys.

The crawl fetches a page whose URL has several query arguments (not in
sorted order); its WARC file and the ``.cdxj`` index the crawler wrote beside
it go into a pywb collection as they are (no re-indexing), and pywb (in its
own virtualenv, ``.venv-replay``: it pins redis 2.x) serves the page back,
for the URL as crawled and for the same URL with its arguments in another
order (replay tools look records up by the canonical SURT key).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.mockweb import WebSpec, host_ip
from tests.conftest import TEST_SETTINGS, RedisServer, run_crawl, start_mockweb
from tests.replay import pywb, replayed


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[dict[str, Any]]:
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
    with pywb(tmp, Path(str(TEST_SETTINGS["CRAWL_DATA_DIR"])) / crawl_id / "warc") as (port, lines):
        yield {"port": port, "url": url, "lines": lines}


def fetch(port: int, url: str) -> tuple[int, bytes]:
    status, _, body = replayed(port, url)
    return status, body


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
