"""Pure parts: codec, policies, link extraction, seeds, canonical URLs, bounded set."""

from __future__ import annotations

import re
import time

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy import Request, Spider
from scrapy.settings import Settings

from crawler.bounded import BoundedMap, BoundedSet
from crawler.exceptions import CodecError, ConfigurationError
from crawler.frontier.codec import CODEC_VERSION, RequestCodec, is_plain_data
from crawler.frontier.config import FrontierConfig
from crawler.frontier.levels import PriorityLevels
from crawler.modules.linkextractor import LinkExtractor
from crawler.policy.politeness import PolitenessPolicy
from crawler.seeds import load_seeds
from crawler.urls import UrlError, normalize_url, url_fingerprint


class _Spider(Spider):
    name = "unit"

    def parse(self, response):  # type: ignore[no-untyped-def]
        return None

    def other(self, response):  # type: ignore[no-untyped-def]
        return None

    def on_error(self, failure):  # type: ignore[no-untyped-def]
        return None


# -- codec -------------------------------------------------------------------------------


def test_codec_round_trip_keeps_every_stored_field() -> None:
    spider = _Spider()
    codec = RequestCodec(spider)
    request = Request(
        "http://a.test/x?q=1",
        method="POST",
        headers={"X-Test": ["1", "2"]},
        body=b"payload",
        priority=-3,
        callback=spider.other,
        errback=spider.on_error,
        meta={"depth": 4, "tags": ["a", {"b": None}], "frontier_lease": object()},
        cb_kwargs={"n": 1.5},
        dont_filter=True,
    )
    encoded = codec.encode(request)
    assert encoded.dropped_keys == ()  # the lease is process-local, not "dropped"
    decoded = codec.decode(encoded.blob)
    assert decoded.url == request.url
    assert decoded.method == "POST"
    assert decoded.headers.getlist("X-Test") == [b"1", b"2"]
    assert decoded.body == b"payload"
    assert decoded.priority == -3
    assert decoded.callback == spider.other
    assert decoded.errback == spider.on_error
    assert decoded.meta == {"depth": 4, "tags": ["a", {"b": None}], "verbatim_url": True}
    assert decoded.cb_kwargs == {"n": 1.5}
    assert decoded.dont_filter is True


def test_codec_plain_get_is_small_and_versioned() -> None:
    codec = RequestCodec(_Spider())
    blob = codec.encode(Request("http://a.test/")).blob
    fields = msgpack.unpackb(blob)
    assert fields[0] == CODEC_VERSION
    assert len(blob) < 40
    decoded = codec.decode(blob)
    assert (decoded.url, decoded.method, decoded.callback) == ("http://a.test/", "GET", None)
    assert decoded.meta == {"verbatim_url": True}  # stored URLs were made safe when first created


def test_codec_bulk_link_encoding_matches_a_request() -> None:
    spider = _Spider()
    codec = RequestCodec(spider)
    for url, host in (("http://a.test/x", "a.test"), ("https://a.test:8443/x?q=1", "a.test"),
                      ("http://b.test/y", "a.test")):
        request = Request(url, callback=spider.parse, priority=2, meta={"depth": 3, "k": "v"})
        link = codec.encode_link(url, host, "parse", {"depth": 3, "k": "v"}, 2)
        decoded = codec.decode(link, host)
        full = codec.decode(codec.encode(request).blob, host)
        assert (decoded.url, decoded.callback, decoded.priority, decoded.meta) == (
            full.url, full.callback, full.priority, full.meta)
        # The host is not stored again: a link is smaller than the full request's form.
        if url.startswith(("http://a", "https://a")):
            assert len(link) + len(host) < len(codec.encode(request).blob)


def test_codec_drops_non_plain_meta_and_reports_it() -> None:
    codec = RequestCodec(_Spider())
    encoded = codec.encode(Request("http://a.test/", meta={"ok": 1, "obj": object(), "set": {1}}))
    assert sorted(encoded.dropped_keys) == ["obj", "set"]
    assert codec.decode(encoded.blob).meta == {"ok": 1, "verbatim_url": True}


def test_codec_refuses_callbacks_that_are_not_spider_methods() -> None:
    codec = RequestCodec(_Spider())
    with pytest.raises(CodecError, match="not a method of the spider"):
        codec.encode(Request("http://a.test/", callback=lambda r: None))


def test_codec_rejects_unknown_versions_corrupt_data_and_missing_callbacks() -> None:
    codec = RequestCodec(_Spider())
    with pytest.raises(CodecError, match="codec version 99"):
        codec.decode(msgpack.packb([99, "http://a.test/"]))
    with pytest.raises(CodecError, match="corrupt"):
        codec.decode(b"\xc1garbage")
    blob = msgpack.packb([CODEC_VERSION, "http://a.test/", None, None, None, 0, "gone", None, None, None, False])
    with pytest.raises(CodecError, match="lacks"):
        codec.decode(blob)


def test_plain_data() -> None:
    assert is_plain_data({"a": [1, 2.0, "x", b"y", None, True]})
    assert not is_plain_data({1: "int key"})
    assert not is_plain_data([object()])


# -- policies ----------------------------------------------------------------------------


def test_politeness_delay_is_max_of_floor_and_multiple_of_fetch_time() -> None:
    policy = PolitenessPolicy(min_delay=1.0, factor=10.0, max_delay=300.0)
    assert policy.delay(0.05) == 1.0
    assert policy.delay(0.5) == 5.0
    assert policy.delay(100.0) == 300.0
    assert policy.delay(-1.0) == 1.0
    assert policy.next_allowed_ms(1000.0, 0.5) == 1_005_000
    assert PolitenessPolicy(0.0, 0.0, 0.0).next_allowed_ms(1.0001, 3.0) == 1001


def test_priority_levels() -> None:
    levels = PriorityLevels(levels=4)
    assert [levels.level(p) for p in (5, 1, 0, -1, -2, -50)] == [0, 0, 1, 2, 3, 3]


def test_frontier_config_errors_name_the_setting() -> None:
    with pytest.raises(ConfigurationError, match="FRONTIER_MIN_DELAY"):
        FrontierConfig.from_settings(Settings({"FRONTIER_MIN_DELAY": "soon"}), "web")
    with pytest.raises(ConfigurationError, match="FRONTIER_DELAY_FACTOR"):
        FrontierConfig.from_settings(Settings({"FRONTIER_DELAY_FACTOR": -1}), "web")
    with pytest.raises(ConfigurationError, match="FRONTIER_QUEUE_WEIGHTS"):
        FrontierConfig.from_settings(Settings({"FRONTIER_QUEUE_WEIGHTS": [1, 2]}), "web")
    with pytest.raises(ConfigurationError, match="FRONTIER_CRAWL_ID"):
        FrontierConfig.from_settings(Settings({"FRONTIER_CRAWL_ID": "a b"}), "web")
    with pytest.raises(ConfigurationError, match="FRONTIER_POLITENESS_KEY"):
        FrontierConfig.from_settings(Settings({"FRONTIER_POLITENESS_KEY": "subnet"}), "web")
    with pytest.raises(ConfigurationError, match="FRONTIER_ACTIVE_HOSTS"):
        FrontierConfig.from_settings(Settings({"FRONTIER_ACTIVE_HOSTS": 0}), "web")
    # The awake hosts are sized by need: the setting is only their bound (memory).
    config = FrontierConfig.from_settings(Settings({"CONCURRENT_REQUESTS": 10}), "web")
    assert (config.crawl_id, config.active_hosts, config.levels) == ("web", 200_000, 4)
    assert (config.sleep_horizon, config.politeness_key.value) == (30.0, "host")


# -- links -------------------------------------------------------------------------------


def test_links_resolve_against_page_and_base_href() -> None:
    html = b"""<html><head></head><body>
      <a href="rel">r</a> <a href="/abs">a</a> <a href="http://other.test/x#frag">o</a>
      <a href="//proto.test/p">p</a> <a href="../up/./x">u</a> <a href="#top">t</a>
      <a href="mailto:x@y">m</a> <a href="javascript:void(0)">j</a> <a href=" /abs ">dup</a>
      <a href="?q=1">q</a> <a>no href</a> <a href="HTTPS://Caps.test/">c</a></body></html>"""
    links = LinkExtractor().extract(html, "https://site.test/dir/page.html")
    assert links == [
        "https://site.test/dir/rel",
        "https://site.test/abs",
        "http://other.test/x",
        "https://proto.test/p",
        "https://site.test/up/x",
        "https://site.test/dir/page.html?q=1",
        "HTTPS://Caps.test/",
    ]


def test_links_respect_base_href() -> None:
    html = b'<html><head><base href="/base/"></head><body><a href="x">x</a><a href="/y">y</a></body></html>'
    assert LinkExtractor().extract(html, "http://site.test/a/b") == ["http://site.test/base/x", "http://site.test/y"]


def test_links_survive_broken_html() -> None:
    html = b"<html><body><a href='/ok'>ok<a href=\"/open<div></table><a href=/bare>x"
    links = LinkExtractor().extract(html, "http://site.test/")
    assert "http://site.test/ok" in links


# -- seeds -------------------------------------------------------------------------------


def test_seeds_from_file_and_argument(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "seeds.txt"
    path.write_text("# comment\n\nhttp://a.test/\n  https://b.test/x  \nhttp://a.test/\n")
    assert load_seeds(str(path), "http://c.test/,http://d.test/ http://a.test/") == [
        "http://a.test/", "https://b.test/x", "http://c.test/", "http://d.test/",
    ]


def test_seed_errors_name_the_argument(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigurationError, match="seeds: seeds file .* does not exist"):
        load_seeds(str(tmp_path / "missing.txt"), None)
    empty = tmp_path / "empty.txt"
    empty.write_text("# nothing\n\n")
    with pytest.raises(ConfigurationError, match="contains no URLs"):
        load_seeds(str(empty), None)
    bad = tmp_path / "bad.txt"
    bad.write_text("http://ok.test/\nnot a url\n")
    with pytest.raises(ConfigurationError, match="line 2 of .*'not a url' is not an http"):
        load_seeds(str(bad), None)
    with pytest.raises(ConfigurationError, match="urls: .*'ftp://x.test/' is not an http"):
        load_seeds(None, "ftp://x.test/")


# -- canonical URLs ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "canonical", "host"),
    [
        ("HTTP://Example.COM:80/a#frag", "http://example.com/a", "example.com"),
        ("https://example.com:443", "https://example.com/", "example.com"),
        ("https://user:pw@example.com:8443/x?y=1", "https://example.com:8443/x?y=1", "example.com"),
        ("http://[::1]:8080/", "http://[::1]:8080/", "[::1]"),
        ("http://example.com./", "http://example.com/", "example.com"),
    ],
)
def test_canonicalize(url: str, canonical: str, host: str) -> None:
    assert normalize_url(url) == (canonical, host)


@pytest.mark.parametrize("url", ["ftp://a.test/", "http:///nohost", "http://a.test:99999/", "mailto:x@y"])
def test_canonicalize_rejects(url: str) -> None:
    with pytest.raises(UrlError):
        normalize_url(url)


def test_fingerprints() -> None:
    assert url_fingerprint("http://a.test/") == url_fingerprint("http://a.test/")
    assert url_fingerprint("http://a.test/") != url_fingerprint("http://a.test/", "POST")
    assert len(url_fingerprint("http://a.test/")) == 16


def test_bounded_set_forgets_oldest_half() -> None:
    bounded = BoundedSet(4)
    for i in range(3):
        bounded.add(i)
    assert all(i in bounded for i in range(3))
    for i in range(3, 7):
        bounded.add(i)
    assert len(bounded) <= 4
    assert 6 in bounded and 0 not in bounded
    disabled = BoundedSet(0)
    disabled.add(1)
    assert 1 not in disabled


def test_bounded_map_forgets_oldest_half() -> None:
    bounded = BoundedMap(4)
    for i in range(3):
        bounded.put(i, f"v{i}")
    assert [bounded.get(i) for i in range(3)] == ["v0", "v1", "v2"]
    for i in range(3, 7):
        bounded.put(i, f"v{i}")
    assert len(bounded) <= 4
    assert bounded.get(6) == "v6" and bounded.get(0) is None
    disabled = BoundedMap(0)
    disabled.put(1, "x")
    assert disabled.get(1) is None


def test_lean_log_formatter_builds_per_page_messages_only_at_debug() -> None:
    import logging

    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler
    from twisted.python.failure import Failure

    from crawler.logformatter import LeanLogFormatter
    from crawler.spiders.web import WebSpider

    formatter = LeanLogFormatter()
    spider = WebSpider.from_crawler(get_crawler(WebSpider), urls="http://127.0.0.1/")
    request = Request("http://127.0.0.1/a")
    response = HtmlResponse("http://127.0.0.1/a", body=b"<p>x</p>", request=request)
    engine = logging.getLogger("scrapy.core.engine")
    scraper = logging.getLogger("scrapy.core.scraper")
    levels = engine.level, scraper.level
    try:
        engine.setLevel(logging.INFO)
        scraper.setLevel(logging.INFO)
        assert formatter.crawled(request, response, spider) is None
        assert formatter.scraped({"a": 1}, response, spider) is None
        engine.setLevel(logging.DEBUG)
        scraper.setLevel(logging.DEBUG)
        crawled = formatter.crawled(request, response, spider)
        assert crawled is not None and crawled["args"]["status"] == 200
        assert formatter.scraped({"a": 1}, response, spider) is not None
        # Other messages are Scrapy's, whatever the level.
        engine.setLevel(logging.INFO)
        assert formatter.spider_error(Failure(ValueError("x")), request, response, spider)["level"] == logging.ERROR
    finally:
        engine.setLevel(levels[0])
        scraper.setLevel(levels[1])


@pytest.mark.parametrize("url", [
    "http://example.com/a/b?c#d", "https://user:pw@example.com:8443", "http://[::1]:80/x",
    "HTTP://Example.COM/x", "http://example.com?q=1", "http://example.com#f",
])
def test_base_url_origin_matches_urlsplit(url: str) -> None:
    from urllib.parse import urlsplit

    from crawler.modules.linkextractor import BaseUrl

    base = BaseUrl(url)
    parts = urlsplit(url)
    assert (base.scheme, base.origin) == (parts.scheme, f"{parts.scheme}://{parts.netloc}")


@pytest.mark.parametrize(("settings", "spider_attrs"), [
    ({}, {}),
    ({"DEFAULT_REQUEST_HEADERS": {"Accept": "text/html", "X-Gone": None, "user-agent": "from-defaults/1"},
      "USER_AGENT": "bot/2 (+https://example.org)", "DOWNLOAD_TIMEOUT": 7}, {}),
    ({"USER_AGENT": "bot/2"}, {"user_agent": "spider-agent/3", "download_timeout": 3}),
    ({"USER_AGENT": "", "DOWNLOAD_TIMEOUT": 0}, {}),
])
def test_request_defaults_match_scrapys_three_middlewares(settings: dict[str, object],
                                                           spider_attrs: dict[str, object]) -> None:
    from scrapy.downloadermiddlewares.defaultheaders import DefaultHeadersMiddleware
    from scrapy.downloadermiddlewares.downloadtimeout import DownloadTimeoutMiddleware
    from scrapy.downloadermiddlewares.useragent import UserAgentMiddleware
    from scrapy.utils.test import get_crawler

    from crawler.middlewares.requestdefaults import RequestDefaultsMiddleware

    crawler = get_crawler(Spider, settings_dict=settings)
    spider = Spider("t")
    for name, value in spider_attrs.items():
        setattr(spider, name, value)

    def requests() -> list[Request]:
        return [Request("http://example.com/"),
                Request("http://example.com/b", headers={"Accept": "*/*", "User-Agent": "own/1"},
                        meta={"download_timeout": 1})]

    theirs = requests()
    timeout = DownloadTimeoutMiddleware.from_crawler(crawler)
    agent = UserAgentMiddleware.from_crawler(crawler)
    timeout.spider_opened(spider)
    agent.spider_opened(spider)
    for request in theirs:  # Scrapy's order: 350, 400, 500
        timeout.process_request(request)
        DefaultHeadersMiddleware.from_crawler(crawler).process_request(request)
        agent.process_request(request)
    ours = requests()
    middleware = RequestDefaultsMiddleware.from_crawler(crawler)
    middleware.spider_opened(spider)
    for request in ours:
        middleware.process_request(request)
        middleware.process_request(request)  # idempotent
    for mine, scrapys in zip(ours, theirs, strict=True):
        assert dict(mine.headers) == dict(scrapys.headers)
        assert mine.meta.get("download_timeout") == scrapys.meta.get("download_timeout")


# -- settings: one default per setting, in one place ---------------------------------------


def _setting_names_read() -> dict[str, str]:
    """Every UPPER_CASE name the crawler's code reads as a setting -> where."""
    import ast
    from pathlib import Path

    readers = {"get_int", "get_float", "get_bool", "get_choice", "get_int_list", "get_list", "get_dict", "setting",
               "is_set", "get", "getint", "getfloat", "getbool", "getlist", "getdict", "getwithbase"}
    found: dict[str, str] = {}
    for path in Path(__file__).resolve().parent.parent.joinpath("crawler").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            function = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if function not in readers:
                continue
            for argument in node.args[:2]:
                if isinstance(argument, ast.Constant) and isinstance(argument.value, str) \
                        and argument.value.isupper() and argument.value.replace("_", "").isalnum():
                    found.setdefault(argument.value, f"{path.name}:{node.lineno}")
    return found


def test_every_setting_read_has_one_default_and_the_project_settings_hold_them_all() -> None:
    from scrapy.settings import default_settings as scrapy_defaults
    from scrapy.utils.project import get_project_settings

    from crawler import defaults
    from crawler.settings_parsing import default_of

    read = _setting_names_read()
    assert len(read) > 100
    ours = {name for name in dir(defaults) if name.isupper()}
    from crawler.scrapysettings import RENAMED, TABLE

    # Settings of other projects the add-on reads or names (scrapy-redis's) have no default of ours, and
    # the old names of renamed settings of ours have none any more.
    foreign = {mapping.scrapy for mapping in TABLE if not hasattr(scrapy_defaults, mapping.scrapy)}
    assert foreign == {"REDIS_HOST", "REDIS_PORT", "REDIS_PARAMS", "SCHEDULER_PERSIST", "SCHEDULER_FLUSH_ON_START",
                       "SCHEDULER_IDLE_BEFORE_CLOSE", "SCHEDULER_QUEUE_CLASS", "SCHEDULER_QUEUE_KEY",
                       "SCHEDULER_SERIALIZER", "SCHEDULER_DUPEFILTER_CLASS", "SCHEDULER_DUPEFILTER_KEY",
                       "DUPEFILTER_KEY"}
    foreign |= {renamed.old for renamed in RENAMED}
    assert not {renamed.old for renamed in RENAMED} & ({name for name in dir(defaults) if name.isupper()})
    missing = {name: where for name, where in read.items()
               if name not in ours | foreign and not hasattr(scrapy_defaults, name)
               and name not in {"DEBUG", "BOT_NAME"}}
    assert not missing, missing
    # No setting is both ours and Scrapy's: a default is written once.
    assert not {name for name in ours if hasattr(scrapy_defaults, name)}
    project = get_project_settings()
    for name in ours:
        assert project.get(name) == default_of(name) == getattr(defaults, name), name
    # Every one of ours is documented: a comment above it, or the one of the group it closes.
    assert [name for name, _, comment in defaults.documented() if not comment] == []


def test_no_setting_of_ours_has_a_default_outside_defaults_py() -> None:
    """``settings.get("X", 5)`` or ``settings.get("X") or 5`` for one of our settings writes its default a
    second time (and the two drift): read it with ``setting()`` / ``get_*()``, which take defaults.py's."""
    import ast
    from pathlib import Path

    from crawler import defaults

    ours = {name for name in dir(defaults) if name.isupper()}
    getters = {"get", "getbool", "getint", "getfloat", "getlist", "getdict", "getwithbase"}

    def reads_ours(node: ast.AST) -> bool:
        return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in getters
                and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value in ours)

    def a_value(node: ast.AST) -> bool:  # `or None` / `or ""` only say "unset"
        return isinstance(node, ast.Constant) and node.value not in (None, "")

    found = []
    for path in sorted(Path(__file__).resolve().parent.parent.joinpath("crawler").rglob("*.py")):
        if path.name == "defaults.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if reads_ours(node) and (len(node.args) > 1 or node.keywords):  # type: ignore[attr-defined]
                found.append(f"{path.name}:{node.lineno}")  # type: ignore[attr-defined]
            if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and reads_ours(node.values[0]) \
                    and any(a_value(value) for value in node.values[1:]):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []


def test_module_docstrings_state_the_contract_in_at_most_30_lines() -> None:
    """What a module promises fits on a screen; its history and its figures belong in docs/."""
    import ast
    from pathlib import Path

    long = {}
    for path in sorted(Path(__file__).resolve().parent.parent.joinpath("crawler").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")), clean=False)
        if docstring and len(docstring.splitlines()) > 30:
            long[path.name] = len(docstring.splitlines())
    assert long == {}


def test_the_settings_reference_is_generated_from_the_defaults() -> None:
    from crawler import defaults

    reference = defaults.reference()
    for name in ("URL_MAX_DEPTH", "FRONTIER_SLEEP_HORIZON", "FRONTIER_POLITENESS_KEY", "WARC_GZIP_LEVEL"):
        assert f"| `{name}` |" in reference
    rows = re.findall(r"^\| `([A-Z0-9_]+)` \|", reference, re.MULTILINE)
    assert sorted(rows) == sorted(name for name in dir(defaults) if name.isupper())


# -- Scrapy internals: each one the crawler uses still works with the pinned Scrapy -----------


def test_the_private_scrapy_apis_the_crawler_uses_are_where_it_expects_them() -> None:
    """A Scrapy upgrade that moves one fails here (crawler/scrapy_internals.py), not in a crawl."""
    from scrapy import signals
    from scrapy.http import Headers
    from scrapy.utils.test import get_crawler

    from crawler import scrapy_internals
    from crawler.exceptions import ConfigurationError

    crawler = get_crawler()
    crawler._apply_settings()
    engine = crawler._create_engine()
    engine._slot = type("Slot", (), {"inprogress": {"already"}, "nextcall": object()})()
    finished: list[object] = []
    nextcall = scrapy_internals.engine_slot(engine, finished.append)
    assert nextcall is engine._slot.nextcall
    inprogress = engine._slot.inprogress
    assert inprogress == {"already"}  # what the engine held stays
    inprogress.add("a")
    inprogress.add("b")
    inprogress.remove("a")
    inprogress.discard("b")
    inprogress.discard("never added")
    assert finished == ["a", "b"] and inprogress == {"already"}
    with pytest.raises(KeyError):
        inprogress.remove("a")
    with pytest.raises(ConfigurationError, match="SCHEDULER"):
        scrapy_internals.engine_slot(None, finished.append)
    # A real engine slot, as Scrapy builds it, has both, and removes a finished request with remove().
    import inspect

    from scrapy.core.engine import _Slot

    source = inspect.getsource(_Slot.__init__)
    assert "self.inprogress: set[Request] = set()" in source and "self.nextcall" in source
    assert "self.close_if_idle" in source
    assert "self.inprogress.remove(request)" in inspect.getsource(_Slot.remove_request)
    # The downloader's slot machinery DirectDownloader builds on (crawler/downloader/direct.py).
    from scrapy.core.downloader import Downloader, Slot

    assert "self.middleware.download_async(self._enqueue_request, request)" in inspect.getsource(Downloader.fetch)
    assert all(callable(getattr(Downloader, name)) for name in ("_enqueue_request", "_get_slot", "_process_queue"))
    slot = Slot(1, 0, 0)
    assert (slot.queue, slot.active, slot.transferring) == (type(slot.queue)(), set(), set())
    assert slot.free_transfer_slots() == 1 and slot.download_delay() == 0 and slot.lastseen == 0
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager

    manager = DownloaderMiddlewareManager.from_crawler(crawler)
    assert set(manager.methods) >= {"process_request", "process_response"}
    assert isinstance(manager._mw_methods_requiring_spider, set)
    source = inspect.getsource(DownloaderMiddlewareManager.download_async)
    assert "self._process_request(" in source and "self._process_response(" in source
    # The item pipeline chain DirectItemPipelineManager runs (crawler/pipelines/manager.py).
    from scrapy.pipelines import ItemPipelineManager

    source = inspect.getsource(ItemPipelineManager.process_item_async)
    assert '"process_item", item, add_spider=True, warn_deferred=True' in source
    pipelines = ItemPipelineManager.from_crawler(crawler)
    assert isinstance(pipelines.methods, dict) and isinstance(pipelines._mw_methods_requiring_spider, set)
    from scrapy.exceptions import _InvalidOutput

    with pytest.raises(_InvalidOutput, match="wrong"):
        scrapy_internals.raise_invalid_output("wrong")
    # The engine's and scraper's handling of one request that crawler.engine runs in one task.
    from scrapy.core.engine import ExecutionEngine
    from scrapy.core.scraper import Scraper
    from scrapy.core.scraper import Slot as ScraperSlot

    source = inspect.getsource(ExecutionEngine._start_scheduled_request)
    assert "self._slot.scheduler.next_request()" in source and "self._download(request)" in source
    assert "self._handle_downloader_output" in source and "self._remove_request" in source
    assert "self._slot.add_request(request)" in inspect.getsource(ExecutionEngine._download)
    assert "self.scraper.enqueue_scrape(result, request)" in inspect.getsource(
        ExecutionEngine._handle_downloader_output)
    source = inspect.getsource(Scraper.enqueue_scrape)
    assert "add_response_request(result, request)" in source and "self.slot.finish_response(result, request)" in source
    assert "self._check_if_closing()" in source
    assert "await self._scrape(result, request)" in inspect.getsource(Scraper._wait_for_processing)
    # SequentialScraper overrides this and calls the rest, so their names and signatures must hold.
    source = inspect.getsource(Scraper.handle_spider_output_async)
    assert "_parallel_asyncio(" in source and "self.concurrent_items, self._process_spidermw_output_async" in source
    assert "iter_errback(result, self.handle_spider_error, request, response)" in source
    assert list(inspect.signature(Scraper._process_spidermw_output_async).parameters) == ["self", "output", "response"]
    scraper_slot = ScraperSlot()
    assert (scraper_slot.active, scraper_slot.active_size, scraper_slot.MIN_RESPONSE_SIZE) == (set(), 0, 1024)
    assert "self.active_size += max(len(result.body), self.MIN_RESPONSE_SIZE)" in inspect.getsource(
        ScraperSlot.add_response_request)
    assert not scrapy_internals.engine_is_interactive(engine)
    engine._slot.close_if_idle = False
    assert scrapy_internals.engine_is_interactive(engine)
    assert not scrapy_internals.has_receivers(crawler.signals.sender, signals.bytes_received)
    crawler.signals.connect(lambda **kwargs: None, signal=signals.bytes_received, weak=False)
    assert scrapy_internals.has_receivers(crawler.signals.sender, signals.bytes_received)
    # Its fast answer reads PyDispatcher's tables: receivers of any sender or of any signal count, a dead
    # weak receiver does not.
    from pydispatch import dispatcher

    assert dispatcher.connections is scrapy_internals.connections
    assert not scrapy_internals.has_receivers(crawler.signals.sender, signals.headers_received)

    def from_anyone(**kwargs: object) -> None:
        return None

    dispatcher.connect(from_anyone, signal=signals.headers_received, sender=dispatcher.Any)
    assert scrapy_internals.has_receivers(crawler.signals.sender, signals.headers_received)
    dispatcher.disconnect(from_anyone, signal=signals.headers_received, sender=dispatcher.Any)
    assert not scrapy_internals.has_receivers(crawler.signals.sender, signals.headers_received)
    crawler.signals.connect(from_anyone, signal=dispatcher.Any)
    assert scrapy_internals.has_receivers(crawler.signals.sender, signals.headers_received)
    crawler.signals.disconnect(from_anyone, signal=dispatcher.Any)

    class Listener:
        def heard(self, **kwargs: object) -> None:
            return None

    listener = Listener()
    assert not scrapy_internals.has_receivers(crawler.signals.sender, signals.request_reached_downloader)
    crawler.signals.connect(listener.heard, signal=signals.request_reached_downloader)
    assert scrapy_internals.has_receivers(crawler.signals.sender, signals.request_reached_downloader)
    del listener
    assert not scrapy_internals.has_receivers(crawler.signals.sender, signals.request_reached_downloader)
    response = scrapy_internals.make_response(url="http://x.test/", status=200, headers=Headers(), body=b"x")
    assert response.status == 200 and response.body == b"x"
    # The crawler's make_response is Scrapy's, but for the headers it keeps (Scrapy's copies them).
    from scrapy.exceptions import StopDownload
    from scrapy.utils._download_handlers import make_response as scrapys_make_response

    source = inspect.getsource(scrapys_make_response)
    assert "responsetypes.responsetypes.from_args(headers=headers, url=url, body=body)" in source
    assert 'response.flags.append("download_stopped")' in source and "raise stop_download" in source
    html = Headers([(b"Content-Type", b"text/html; charset=iso-8859-1"), (b"Set-Cookie", b"a=1"),
                    (b"Set-Cookie", b"b=2")])
    fields = {"url": "http://x.test/p", "status": 404, "body": "caf\u00e9".encode("latin-1"),
              "flags": ["cached"], "protocol": "HTTP/1.1"}
    ours, scrapys = (make(headers=html, **fields) for make in (scrapy_internals.make_response, scrapys_make_response))
    assert ours.headers is html and scrapys.headers == html
    assert (type(ours), ours.url, ours.status, ours.text, ours.encoding, ours.flags, ours.protocol) == (
        type(scrapys), scrapys.url, scrapys.status, scrapys.text, scrapys.encoding, scrapys.flags, scrapys.protocol)
    stop = StopDownload(fail=True)
    with pytest.raises(StopDownload):
        scrapy_internals.make_response(headers=html, stop_download=stop, **fields)
    assert stop.response.headers is html and stop.response.flags == ["cached", "download_stopped"]
    assert callable(scrapy_internals.check_stop_download) and "x.test" in scrapy_internals.get_dataloss_msg(
        "http://x.test/")
    # The crawler's handler implements every abstract method of Scrapy's streaming base.
    import ssl

    from crawler.downloader.handler import CrawlerDownloadHandler

    assert issubclass(CrawlerDownloadHandler, scrapy_internals.BaseStreamingDownloadHandler)
    assert not CrawlerDownloadHandler.__abstractmethods__
    assert isinstance(scrapy_internals.make_ssl_context(crawler.settings), ssl.SSLContext)
    assert callable(scrapy_internals.log_tls_session)
    assert {"status", "url", "headers"} <= set(scrapy_internals.BaseResponseArgs.__annotations__)


# -- the Redis schema: every key and record position the scripts use is named once --------------


def test_the_lua_scripts_build_keys_and_read_records_only_through_the_schema() -> None:
    from pathlib import Path

    from crawler.crawlstate.keys import SHARD_KEYS
    from crawler.crawlstate.library import compose
    from crawler.metadata.record import RECORD_FLAGS
    from crawler.metadata.recordstore import RECORD_FIELDS, UrlState

    scripts = sorted(Path(__file__).resolve().parent.parent.joinpath("crawler").rglob("*.lua"))
    assert len(scripts) >= 11
    names = {"K": set(SHARD_KEYS), "URLREC": set(RECORD_FIELDS), "URLREC_FLAG": set(RECORD_FLAGS),
             "URL_STATE": {state.name for state in UrlState}}
    used: dict[str, set[str]] = {table: set() for table in names}
    for script in scripts:
        source = script.read_text(encoding="utf-8")
        # No key built from a literal: every prefix concatenation goes through the schema's tables.
        assert not re.findall(r"\b[PD] \.\. '", source), script.name
        # No record position written as a number.
        assert not re.findall(r"\b(?:record|new|old)\[\d+\]", source), script.name
        for table, name in re.findall(r"\b(K|URLREC|URLREC_FLAG|URL_STATE)\.([A-Za-z_0-9]+)", source):
            used[table].add(name)
    for table, known in names.items():
        assert used[table] <= known, (table, used[table] - known)
    assert used["K"] and used["URLREC"] and used["URLREC_FLAG"]
    prelude = compose("#!lua", "return {K, URLREC, URL_STATE}")
    assert "ready = 'ready'" in prelude and "next_visit = 6" in prelude and "DEAD = 3" in prelude


def test_a_script_is_loaded_with_the_schema_as_literals_and_only_the_helpers_it_uses() -> None:
    """A single script (EVAL: tests, redis-cli --eval) runs its whole text on every call: compose() defines
    no schema table and no helper the script does not use (directly or through another helper), and refuses
    a name the schema does not have; the crawl's function library defines each once."""
    from crawler.crawlstate.library import compose
    from crawler.redisconn.functions import crawler_library

    source = compose("#!lua", "return {P .. K.ready, URLREC.flags, lh_hash(ARGV[1])}")
    assert source.startswith("#!lua\n")
    assert "'ready'" in source and "K.ready" not in source and "local K =" not in source
    assert "local function lh_hash" in source and "local LH_MOD" in source  # lh_hash needs LH_MOD
    assert "local function due_insert" not in source and "local function lh_close" not in source
    # The library (what the crawl loads) defines every helper once, and the schema tables once.
    library = crawler_library().source
    for helper in ("due_insert", "due_find", "due_remove", "record_unpack", "record_pack", "lh_key", "fmt"):
        assert library.count(f"local function {helper}(") == 1, helper
    assert library.count("local K = {") == 1 and "K.ready" not in library
    assert library.startswith("#!lua name=crawler\n")
    with pytest.raises(ValueError, match="K.nope"):
        compose("#!lua", "return P .. K.nope")


def test_the_step_scripts_read_their_arguments_only_through_the_protocol() -> None:
    """enqueue, ack and claim read no argument by a number of their own: ``ARGV[<message>.<field>]`` and
    ``ARGV[i + <message>_ITEM.<field>]`` (names the protocol declares), and each returns as many values as
    its reply declares."""
    from pathlib import Path

    from crawler.crawlstate.library import compose
    from crawler.crawlstate.protocol import STEP_MESSAGES

    lua = Path(__file__).resolve().parent.parent.joinpath("crawler", "frontier", "lua")
    for script, message in STEP_MESSAGES.items():
        source = re.sub(r"--[^\n]*", "", lua.joinpath(f"{script}.lua").read_text(encoding="utf-8"))
        table = script.upper()
        for index in re.findall(r"ARGV\[([^\]]+)\]", source):
            assert re.fullmatch(rf"{table}\.\w+|\w+ \+ (?:{table}_ITEM\.\w+|j)", index), (script, index)
        used = set(re.findall(rf"\b{table}\.(\w+)", source))
        assert used <= {*message.head, "items"} and used >= set(message.head) - {"prefix"} | {"items"}, script
        items = set(re.findall(rf"\b{table}_ITEM\.(\w+)", source))
        assert items <= {*message.item, "width"} and items >= set(message.item), (script, set(message.item) - items)
        # The reply: the script's last statement returns the declared values, in order, by their names
        # (a count may be the length of a table of that name).
        last = source.rstrip().rsplit("\n", 1)[1]
        values = re.fullmatch(r"return \{(.*)\}", last)
        assert values, (script, last)
        names = [value.removeprefix("#") for value in values.group(1).split(", ")]
        assert names == list(message.reply), (script, names)
    composed = compose("#!lua", "return {ARGV[ENQUEUE.seen_load], ENQUEUE.items, ENQUEUE_ITEM.blob, ACK_ITEM.width}")
    assert "ARGV[8]" in composed and "9, 6, 9}" in composed


def test_the_python_side_encodes_and_decodes_the_step_protocol_by_name() -> None:
    """Each field of an enqueued URL and of a completed lease lands where the protocol says (the scripts
    read it there); a head with a field missing or unknown is refused; a reply of another length too."""
    from crawler.crawlstate.compact import lh_hash
    from crawler.crawlstate.protocol import ACK, ENQUEUE
    from crawler.frontier.outcome import Completion, HostSignal, LeaseAction
    from crawler.frontier.steps import EnqueueEntry
    from crawler.frontier.wire import _ACK_FIELDS, _ENQUEUE_FIELDS

    entry = EnqueueEntry(1234567890123, b"", "h.test", "test", 2, 1, b"blob", "10.0.0.1")
    fields = _ENQUEUE_FIELDS(entry)
    assert len(fields) == len(ENQUEUE.item)
    expected = {"key": 1234567890123, "lh": lh_hash(1234567890123), "host": "h.test", "domain": "test", "level": 2,
                "flags": 1, "blob": b"blob"}
    assert {name: fields[ENQUEUE.item.index(name)] for name in ENQUEUE.item} == expected
    done = Completion(b"7 1 7 h.test", 11, 22, LeaseAction.DEAD, 33, b"new", HostSignal.FAILED, "Err", "a\nb",
                      None)
    fields = _ACK_FIELDS(done)
    expected_ack = {"member": b"7 1 7 h.test", "next_allowed_ms": 11, "completed_ms": 22, "action": LeaseAction.DEAD,
                    "not_before_ms": 33, "blob": b"new", "host_signal": HostSignal.FAILED, "dead_info": "Err\ta b",
                    "record_key": b""}
    assert {name: fields[ACK.item.index(name)] for name in ACK.item} == expected_ack
    head = dict.fromkeys(ENQUEUE.head, 0)
    assert ENQUEUE.head_args(**head) == [0] * len(ENQUEUE.head)
    with pytest.raises(ValueError, match="seen_load"):
        ENQUEUE.head_args(**{name: 0 for name in ENQUEUE.head if name != "seen_load"})
    with pytest.raises(ValueError, match="nope"):
        ENQUEUE.head_args(**head, nope=1)
    assert ACK.reply_values([1, 2, 3, 4, 5]) == {"acked": 1, "stale": 2, "requeued": 3, "dead": 4, "parked": 5}
    with pytest.raises(ValueError, match="4 values"):
        ACK.reply_values([1, 2, 3, 4])


def test_the_committed_settings_reference_is_the_generated_one() -> None:
    """docs/reference/settings.md is generated from crawler/defaults.py (`make reference` writes it,
    `make docs` checks it without writing, so a test run leaves the tree as it was); it must not drift."""
    from pathlib import Path

    from crawler import defaults, scrapysettings

    reference = Path(__file__).resolve().parent.parent.joinpath("docs", "reference")
    assert reference.joinpath("settings.md").read_text(encoding="utf-8") == defaults.reference(), "run: make reference"
    assert reference.joinpath("scrapy-settings.md").read_text(encoding="utf-8") == scrapysettings.reference(), \
        "run: make reference"


def test_inhand_collects_the_requests_the_engine_finished_once_each() -> None:
    from types import SimpleNamespace

    from scrapy import Request

    from crawler.frontier.inhand import InHand

    completed: list[str] = []

    class Completer:
        def completion(self, request: Request, handout: object, now: float) -> object:
            completed.append(request.url)
            return SimpleNamespace(shard=0, url=request.url)

    inhand = InHand(4, 60.0)
    inhand.bind(Completer())  # type: ignore[arg-type]
    requests = [Request(f"http://a.example/{n}") for n in range(3)]
    for request in requests:
        inhand.add(request, SimpleNamespace(handed_at=0.0, confirmed_at=time.time()))  # type: ignore[arg-type]
    assert [inhand.hand_out() for _ in range(3)] == requests and inhand.capacity() == 1
    assert not inhand.collect()  # nothing finished yet
    inhand.finished(requests[1])
    inhand.finished(Request("http://a.example/not-ours"))  # e.g. a nested robots.txt fetch: not a lease
    inhand.finished(requests[1])  # reported twice: acked once
    assert inhand.collect()
    assert completed == ["http://a.example/1"] and set(inhand.handed) == {requests[0], requests[2]}
    assert [c.url for c in inhand.take_completions()[0]] == ["http://a.example/1"]
    assert not inhand.collect() and inhand.capacity() == 2


def test_inhand_hands_out_no_request_whose_lease_may_have_lapsed() -> None:
    """A buffered lease not confirmed (claimed, or renewed by a step Redis answered) for two thirds of the
    lease timeout may have expired and its host gone to another worker: it is given back, not fetched."""
    from scrapy import Request

    from crawler.frontier.inhand import InHand
    from crawler.frontier.outcome import Handout
    from crawler.frontier.steps import Lease

    now = time.time()
    inhand = InHand(4, 30.0)

    def held(n: int, shard: int, confirmed_at: float) -> Handout:
        request = Request(f"http://h{n}.example/")
        handout = Handout(Lease.from_member(f"{n} 0 {n} h{n}.example".encode(), shard), confirmed_at)
        inhand.add(request, handout)
        return handout

    stale = [held(1, 0, now - 21), held(2, 1, now - 25)]
    fresh = held(3, 0, now - 19)
    late = held(4, 1, now - 40)
    # A renewal is only a confirmation for a lease it reached before the lease expired.
    inhand.renewed([late, fresh], now - 1, now - 0.5)
    assert (late.confirmed_at, fresh.confirmed_at) == (now - 40, now - 1)
    request = inhand.hand_out()
    assert request is not None and request.url == "http://h3.example/"
    assert inhand.handed == {request: fresh} and fresh.handed_at >= now
    assert inhand.hand_out() is None
    assert inhand.capacity() == 3  # the lapsed ones hold no slot
    taken = inhand.take_lapsed()
    assert taken == {0: [stale[0].lease.member], 1: [stale[1].lease.member, late.lease.member]}
    assert inhand.take_lapsed() == {} and inhand.newly_lapsed == 3
    # A step that failed puts them back, to be given back by the next one: not lapsed again.
    inhand.newly_lapsed = 0
    inhand.put_back_lapsed(taken, 1)
    assert inhand.take_lapsed() == {1: taken[1]} and inhand.newly_lapsed == 0
    # Given back with the buffer when the worker closes, if no step took them.
    held(5, 0, now - 29)
    inhand.add(Request("http://h6.example/"), Handout(Lease.from_member(b"6 0 6 h6.example"), now))
    assert inhand.hand_out() is not None and not inhand.buffer
    held(7, 1, now)
    assert inhand.release_buffered() == {0: [b"5 0 5 h5.example"], 1: [b"7 0 7 h7.example"]}
    # The renewal covers buffered and handed leases.
    assert [len(handouts) for handouts in inhand.held().values()] == [2]


_RESP_ARGS = st.lists(
    st.binary(max_size=300) | st.text(max_size=60) | st.integers() | st.booleans()
    | st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18),
    max_size=150,  # past the C encoder's 64 pieces on its stack
)


@settings(max_examples=500, deadline=None)
@given(_RESP_ARGS)
def test_the_c_resp_encoder_gives_the_python_bytes(args: list[object]) -> None:
    """Every argument kind the crawler sends (bytes, text of any alphabet, integers of any size, bools,
    floats) encodes to the same RESP bytes in C and in Python, which are RESP2's bulk strings."""
    from crawler.redisconn.resp import command, command_python

    encoded = command(*args)
    assert encoded == command_python(*args)
    expected = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if isinstance(arg, bytes) else str(arg).encode() if isinstance(arg, str) else str(int(arg)).encode()
        expected.append(b"$%d\r\n" % len(data) + data + b"\r\n")
    assert encoded == b"".join(expected)


def test_the_c_resp_encoder_is_built_and_refuses_what_python_refuses() -> None:
    from crawler.redisconn import _resp, resp

    assert resp.NATIVE and resp.command is _resp.command
    for bad, error in ((None, TypeError), (bytearray(b"1"), TypeError), ("\udc80", UnicodeEncodeError),
                       (float("nan"), ValueError)):
        for encode in (resp.command, resp.command_python):
            with pytest.raises(error):
                encode(b"SET", bad)


def test_frontier_local_requests_reaches_the_intake() -> None:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from crawler.frontier.scheduler import FrontierScheduler

    class TeamSpider(Spider):
        name = "team"

    crawler = get_crawler(TeamSpider, settings_dict={"ADDONS": {"crawler.addon.CrawlerAddon": 0},
                                                     "FRONTIER_LOCAL_REQUESTS": 123,
                                                     "REDIS_URL": "redis://127.0.0.1:1/0"})
    scheduler = FrontierScheduler.from_crawler(crawler)
    assert scheduler.intake.local_requests == 123


def test_every_parsed_setting_is_used() -> None:
    """Each field of a settings dataclass (one with ``from_settings``) is read somewhere: by another
    module through an object other than ``self``, or by its own module. A field parsed and then
    never passed on (FRONTIER_LOCAL_REQUESTS once) fails here. And every setting crawler/defaults.py
    declares is read by name outside it."""
    import ast
    import dataclasses
    import importlib
    from pathlib import Path

    from crawler import defaults

    root = Path(__file__).resolve().parent.parent / "crawler"
    trees = {path: ast.parse(path.read_text(encoding="utf-8")) for path in root.rglob("*.py")}

    def reads(tree: ast.AST, *, own: bool) -> set[str]:
        return {node.attr for node in ast.walk(tree)
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                and (own or not (isinstance(node.value, ast.Name) and node.value.id == "self"))}

    checked = 0
    for path, tree in trees.items():
        for cls in (node for node in tree.body if isinstance(node, ast.ClassDef)):
            if not any(isinstance(item, ast.FunctionDef) and item.name == "from_settings" for item in cls.body):
                continue
            module = ".".join(("crawler", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")
            kind = getattr(importlib.import_module(module), cls.name)
            if not dataclasses.is_dataclass(kind):
                continue
            used = set().union(*(reads(other, own=other_path == path) for other_path, other in trees.items()))
            unused = [field.name for field in dataclasses.fields(kind) if field.name not in used]
            assert not unused, f"{module}.{cls.name}: parsed, never read: {unused}"
            checked += 1
    assert checked >= 10
    sources = "\n".join(path.read_text(encoding="utf-8") for path in trees if path.name != "defaults.py")
    unread = [name for name in defaults.names() if f'"{name}"' not in sources]
    assert not unread, f"declared in crawler/defaults.py, never read: {unread}"


def test_the_crawl_id_is_the_spider_argument_when_given_and_the_two_ways_must_agree() -> None:
    from types import SimpleNamespace

    from scrapy.settings import Settings

    from crawler.addon import CrawlerAddon, take_crawl_id
    from crawler.exceptions import ConfigurationError

    settings = Settings({"ADDONS": {"crawler.addon.CrawlerAddon": 0}})
    CrawlerAddon(SimpleNamespace(spider=SimpleNamespace(crawl_id="nightly"))).update_settings(settings)  # type: ignore[arg-type]
    assert settings["FRONTIER_CRAWL_ID"] == "nightly"
    untouched = Settings({"FRONTIER_CRAWL_ID": "own"}, priority="project")
    take_crawl_id(untouched, None)
    assert untouched["FRONTIER_CRAWL_ID"] == "own"
    take_crawl_id(untouched, "argument")  # a project's setting gives way to the command line's argument
    assert untouched["FRONTIER_CRAWL_ID"] == "argument"
    both = Settings()
    both.set("FRONTIER_CRAWL_ID", "a", "cmdline")
    take_crawl_id(both, "a")
    with pytest.raises(ConfigurationError, match="disagree"):
        take_crawl_id(both, "b")


def test_the_addon_keeps_scrapys_asyncio_reactor_and_refuses_another() -> None:
    from scrapy.settings import Settings

    from crawler.addon import CrawlerAddon, effective
    from crawler.exceptions import ConfigurationError

    addons = {"ADDONS": {"crawler.addon.CrawlerAddon": 0}}
    assert effective(Settings(addons)).getbool("TWISTED_REACTOR_ENABLED")  # Scrapy's default: Twisted components work
    CrawlerAddon.update_pre_crawler_settings(Settings({**addons, "TWISTED_REACTOR_ENABLED": False}))
    with pytest.raises(ConfigurationError, match="TWISTED_REACTOR.*EPollReactor"):
        CrawlerAddon.update_pre_crawler_settings(
            Settings({**addons, "TWISTED_REACTOR": "twisted.internet.epollreactor.EPollReactor"}))


def test_start_requests_are_marked_and_callbacks_output_does_not_go_through_the_start_middleware() -> None:
    import asyncio
    from typing import Any

    from scrapy import Request, Spider
    from scrapy.core.spidermw import SpiderMiddlewareManager
    from scrapy.utils.test import get_crawler

    from crawler.middlewares.start import StartRequestsMiddleware

    async def start() -> Any:
        yield Request("http://a.test/1")
        yield Request("http://a.test/2", meta={"is_start_request": False})
        yield {"an": "item"}

    async def marked() -> list[Any]:
        return [entry async for entry in StartRequestsMiddleware().process_start(start())]

    first, second, item = asyncio.run(marked())
    assert first.meta["is_start_request"] is True
    assert second.meta["is_start_request"] is False  # what the spider set stays
    assert item == {"an": "item"}
    crawler = get_crawler(Spider, {"SPIDER_MIDDLEWARES": {
        "scrapy.spidermiddlewares.start.StartSpiderMiddleware": None,
        "crawler.middlewares.start.StartRequestsMiddleware": 25}})
    manager = SpiderMiddlewareManager.from_crawler(crawler)
    owners = {name: [type(getattr(method, "__self__", None)).__name__ for method in methods]
              for name, methods in manager.methods.items()}
    assert "StartRequestsMiddleware" in owners["process_start"]
    assert "StartRequestsMiddleware" not in owners["process_spider_output"]
    assert "StartSpiderMiddleware" not in str(owners)
