"""The crawl's URL normalization, used everywhere a URL becomes a key, under a non-default config.

With ``URL_TRACKING_PARAMS = []`` (keep ``utm_*``) and ``URL_SORT_QUERY``, the
frontier stores ``/p/1?a=1&b=2&utm_source=x`` for ``/p/1?utm_source=x&b=2&a=1``;
the URL metadata record and the scheduled revisit must be keyed by that same
form (dead-letter marks and sitemap touches find them by it), not by the
default normalization's ``/p/1?b=2&a=1``.
"""

from __future__ import annotations

import time
from pathlib import Path

import redis
from scrapy.settings import Settings

from crawler.urls import NormalizationConfig, normalize_url
from support.mockweb import WebSpec, host_ip
from tests.conftest import RedisServer, due_time, run_crawl, start_mockweb, url_record

CONFIG = {"URL_TRACKING_PARAMS": "[]", "URL_SORT_QUERY": True}


def test_metadata_and_revisits_are_keyed_by_the_crawls_normalization(tmp_path: Path, redis_server: RedisServer) -> None:
    web = start_mockweb(WebSpec(hosts=1, sizes="uniform:3", fanout=0, nav=0, cross=0), tmp_path / "mockweb.log")
    seed = f"http://{host_ip(0)}:{web.port}/p/1?utm_source=x&b=2&a=1"
    crawl_id = f"normalization-{int(time.time())}"
    try:
        result = run_crawl("-a", f"urls={seed}",
                           settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": crawl_id, **CONFIG},
                           timeout=120)
    finally:
        web.stop()
    assert result.returncode == 0, result.stderr[-3000:]
    ours, _ = normalize_url(seed, NormalizationConfig.from_settings(Settings(CONFIG)))
    default, _ = normalize_url(seed)
    assert ours.endswith("/p/1?a=1&b=2&utm_source=x") and default.endswith("/p/1?b=2&a=1")
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert url_record(client, crawl_id, ours) is not None
        assert url_record(client, crawl_id, default) is None
        assert due_time(client, crawl_id, ours) is not None
        assert due_time(client, crawl_id, default) is None
    finally:
        client.close()
