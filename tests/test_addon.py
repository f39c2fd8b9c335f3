"""The add-on's settings: what it sets, what it reads from Scrapy's standard settings, what it refuses."""

from __future__ import annotations

import logging

import pytest
from scrapy.settings import Settings

from crawler.addon import SCHEDULER, apply, effective
from crawler.exceptions import ConfigurationError
from crawler.middlewares.retry import RetryMiddleware
from crawler.policy.backoff import BackoffPolicy
from crawler.scrapysettings import TABLE, translate


def project(**given: object) -> Settings:
    settings = Settings()
    settings.setdict(given, priority="project")
    return settings


def test_the_addon_sets_the_frontier_and_keeps_scrapys_behaviour_for_other_spiders() -> None:
    settings = project()
    apply(settings)
    assert settings["SCHEDULER"] == SCHEDULER
    downloader = settings.getwithbase("DOWNLOADER_MIDDLEWARES")
    assert downloader["crawler.middlewares.robots.RobotsTxtMiddleware"] == 100
    assert downloader["scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware"] is None
    assert downloader["scrapy.downloadermiddlewares.retry.RetryMiddleware"] is None
    # Scrapy's offsite, proxy, cookies, HTTP error, referer and depth middlewares stay on; its redirect
    # middlewares are subclassed in place, so that every hop is archived.
    for path in ("scrapy.downloadermiddlewares.offsite.OffsiteMiddleware",
                 "scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware"):
        assert downloader[path] is not None, path
    assert downloader["scrapy.downloadermiddlewares.redirect.RedirectMiddleware"] is None
    assert downloader["crawler.middlewares.redirect.ArchivingRedirectMiddleware"] == 600
    assert downloader["crawler.middlewares.redirect.ArchivingMetaRefreshMiddleware"] == 580
    spider = settings.getwithbase("SPIDER_MIDDLEWARES")
    for path in ("scrapy.spidermiddlewares.httperror.HttpErrorMiddleware",
                 "scrapy.spidermiddlewares.referer.RefererMiddleware",
                 "scrapy.spidermiddlewares.depth.DepthMiddleware"):
        assert spider[path] is not None, path
    assert spider["crawler.middlewares.archive.ArchiveMiddleware"] == 10
    assert settings.getbool("REDIRECT_ENABLED") and settings.getbool("HTTPERROR_ALLOW_ALL") is False
    # Every body type, every extension: a team's spider gets what it asks for.
    assert settings.getlist("FETCH_ALLOWED_CONTENT_TYPES") == [] and settings.getlist("URL_DENY_EXTENSIONS") == []
    # The crawler's own settings answer settings.get in a team's project too.
    assert settings.getfloat("FRONTIER_MIN_DELAY") == 1.0


def test_a_projects_own_value_wins_over_the_addons() -> None:
    settings = project(CONCURRENT_REQUESTS=64, DOWNLOADER_MIDDLEWARES={"crawler.middlewares.stats.FetchStats": None})
    apply(settings)
    assert settings.getint("CONCURRENT_REQUESTS") == 64
    assert settings.getwithbase("DOWNLOADER_MIDDLEWARES")["crawler.middlewares.stats.FetchStats"] is None


def test_scrapy_redis_scheduler_left_in_a_project_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match="^SCHEDULER: 'scrapy_redis.scheduler.Scheduler'"):
        apply(project(SCHEDULER="scrapy_redis.scheduler.Scheduler"))
    with pytest.raises(ConfigurationError, match="^DUPEFILTER_CLASS: "):
        apply(project(DUPEFILTER_CLASS="scrapy_redis.dupefilter.RFPDupeFilter"))
    # Scrapy's own scheduler and filter (the defaults, or named again) are replaced without a word.
    apply(project(SCHEDULER="scrapy.core.scheduler.Scheduler", DUPEFILTER_CLASS="scrapy.dupefilters.RFPDupeFilter"))


def test_scrapys_standard_settings_are_read_as_the_crawlers(caplog: pytest.LogCaptureFixture) -> None:
    settings = project(
        DOWNLOAD_DELAY=2.5, AUTOTHROTTLE_ENABLED=True, AUTOTHROTTLE_TARGET_CONCURRENCY=4.0,
        AUTOTHROTTLE_MAX_DELAY=30, ROBOTSTXT_OBEY=False, RETRY_TIMES=7, RETRY_HTTP_CODES=[500, 503],
        DEPTH_LIMIT=3, REDIS_HOST="redis.internal", REDIS_PORT=6380, SCHEDULER_FLUSH_ON_START=True,
    )
    with caplog.at_level(logging.WARNING, logger="crawler.scrapysettings"):
        lines = translate(settings)
    assert settings.getfloat("FRONTIER_MIN_DELAY") == 2.5
    assert settings.getfloat("DOWNLOAD_DELAY") == 0, "Scrapy's per-slot delay would add to the frontier's"
    assert settings.getfloat("FRONTIER_DELAY_FACTOR") == 0.25 and settings.getfloat("FRONTIER_MAX_DELAY") == 30
    assert settings.getbool("AUTOTHROTTLE_ENABLED") is False
    assert settings.getbool("ROBOTS_ENABLED") is False
    assert settings.getint("RETRY_TIMES") == 7
    assert settings.getbool("FRONTIER_RANDOMIZE_DELAY") is True, "Scrapy randomizes a download delay by default"
    assert settings.getlist("RETRY_HTTP_STATUSES") == [500, 503]
    assert settings.getint("URL_MAX_DEPTH") == 3
    assert settings.get("REDIS_URL") == "redis://redis.internal:6380"
    assert settings.getbool("FRONTIER_RESET_ON_START") is True
    assert "DOWNLOAD_DELAY = 2.5 read as FRONTIER_MIN_DELAY = 2.5" in lines
    assert len(caplog.records) == len(lines)
    # Without DOWNLOAD_DELAY, Scrapy's default randomization changes nothing.
    assert project(RANDOMIZE_DOWNLOAD_DELAY=False).get("FRONTIER_RANDOMIZE_DELAY") is None
    unrandomized = project(DOWNLOAD_DELAY=1, RANDOMIZE_DOWNLOAD_DELAY=False)
    translate(unrandomized)
    assert unrandomized.getbool("FRONTIER_RANDOMIZE_DELAY") is False


def test_a_crawler_setting_given_beside_its_scrapy_one_wins_with_a_warning() -> None:
    lines = translate(settings := project(DOWNLOAD_DELAY=2.0, FRONTIER_MIN_DELAY=5.0))
    assert settings.getfloat("FRONTIER_MIN_DELAY") == 5.0
    assert lines == ["DOWNLOAD_DELAY = 2.0 ignored for FRONTIER_MIN_DELAY: FRONTIER_MIN_DELAY = 5.0 is set"]


def test_per_domain_and_per_ip_concurrency_given_are_read() -> None:
    """CONCURRENT_REQUESTS_PER_DOMAIN the project gives is the frontier's requests in flight per key;
    Scrapy's default (8) is not read; a non-zero _PER_IP is per address, and wins, as in Scrapy."""
    settings = project(CONCURRENT_REQUESTS_PER_DOMAIN=16)
    assert translate(settings) == ["CONCURRENT_REQUESTS_PER_DOMAIN = 16 read as FRONTIER_CONCURRENCY_PER_KEY = 16"]
    assert settings.getint("FRONTIER_CONCURRENCY_PER_KEY") == 16
    both = project(CONCURRENT_REQUESTS_PER_DOMAIN=16, CONCURRENT_REQUESTS_PER_IP=2)
    lines = translate(both)
    assert lines[:2] == ["CONCURRENT_REQUESTS_PER_IP = 2 read as FRONTIER_POLITENESS_KEY = 'ip'",
                         "CONCURRENT_REQUESTS_PER_IP = 2 read as FRONTIER_CONCURRENCY_PER_KEY = 2"]
    assert lines[2].startswith("CONCURRENT_REQUESTS_PER_DOMAIN = 16 ignored for FRONTIER_CONCURRENCY_PER_KEY")
    assert (both.get("FRONTIER_POLITENESS_KEY"), both.getint("FRONTIER_CONCURRENCY_PER_KEY")) == ("ip", 2)
    assert translate(project(CONCURRENT_REQUESTS_PER_IP=0)) == []
    defaults = project()
    assert translate(defaults) == []
    assert defaults.get("FRONTIER_CONCURRENCY_PER_KEY") in (None, 1)
    with pytest.raises(ConfigurationError, match="CONCURRENT_REQUESTS_PER_DOMAIN"):
        translate(project(CONCURRENT_REQUESTS_PER_DOMAIN=0))


def test_several_requests_per_key_reach_the_frontier_config() -> None:
    from crawler.frontier.config import FrontierConfig
    from crawler.policy.politeness import PolitenessKey

    settings = effective(project(ADDONS={"crawler.addon.CrawlerAddon": 0}, CONCURRENT_REQUESTS_PER_IP=3))
    config = FrontierConfig.from_settings(settings, "web")
    assert (config.politeness_key, config.per_key) == (PolitenessKey.IP, 3)


def test_scrapys_defaults_are_not_translated() -> None:
    settings = Settings()
    assert translate(settings) == []
    assert settings.get("FRONTIER_MIN_DELAY") is None


def test_the_docs_table_names_every_setting_it_translates() -> None:
    assert len({mapping.scrapy for mapping in TABLE}) == len(TABLE)
    for name in ("DOWNLOAD_DELAY", "ROBOTSTXT_OBEY", "RETRY_TIMES", "RETRY_HTTP_CODES", "DEPTH_LIMIT",
                 "HTTPPROXY_ENABLED", "AUTOTHROTTLE_ENABLED", "SCHEDULER", "DUPEFILTER_CLASS"):
        assert any(mapping.scrapy == name for mapping in TABLE), name


def test_effective_settings_apply_the_addon_only_when_the_project_lists_it() -> None:
    assert effective(project()).get("SCHEDULER") != SCHEDULER
    assert effective(project(ADDONS={"crawler.addon.CrawlerAddon": 0})).get("SCHEDULER") == SCHEDULER


def test_retry_statuses_narrow_what_is_retried() -> None:
    every = RetryMiddleware(BackoffPolicy(), stats=None)  # type: ignore[arg-type]
    assert every._retried(500) and every._retried(599) and every._retried(429) and not every._retried(404)
    narrow = RetryMiddleware(BackoffPolicy(), stats=None, statuses=frozenset({503}))  # type: ignore[arg-type]
    assert narrow._retried(503) and not narrow._retried(500)


def test_out_of_retries_the_stats_are_scrapys_and_the_give_up_line_at_scrapys_level(
    caplog: pytest.LogCaptureFixture
) -> None:
    """retry/count, retry/reason_count/<reason> (a status message, or the error's class) and
    retry/max_reached, as Scrapy's RetryMiddleware writes them; RETRY_TIMES and meta max_retry_times."""
    from scrapy import Request
    from scrapy.exceptions import DownloadTimeoutError
    from scrapy.http import Response
    from scrapy.statscollectors import MemoryStatsCollector
    from scrapy.utils.test import get_crawler

    from crawler.frontier.outcome import Handout, LeaseAction
    from crawler.frontier.redisfrontier import Lease
    from crawler.requestmeta import LEASE_META

    crawler = get_crawler(settings_dict={"RETRY_TIMES": 1})
    stats = MemoryStatsCollector(crawler)
    middleware = RetryMiddleware(BackoffPolicy.from_settings(crawler.settings), stats, give_up_level=logging.ERROR)

    def leased(url: str, **meta: object) -> Request:
        request = Request(url, meta=dict(meta))
        request.meta[LEASE_META] = Handout(Lease(b"1 0 1 a.test", "a.test", 0, 1), 0.0)
        return request

    first = leased("http://a.test/1")
    assert middleware.process_response(first, Response(first.url, status=503)) is first
    first = leased("http://a.test/1", **{"retry_times": 0})
    assert middleware.process_response(first, Response(first.url, status=500)) is first
    timeout = leased("http://a.test/2")
    assert middleware.process_exception(timeout, DownloadTimeoutError("slow")) is timeout
    assert stats.get_value("retry/count") == 3
    assert stats.get_value("retry/reason_count/503 Service Unavailable") == 1
    assert stats.get_value("retry/reason_count/500 Internal Server Error") == 1
    assert stats.get_value("retry/reason_count/scrapy.exceptions.DownloadTimeoutError") == 1
    # RETRY_TIMES = 1: the second 500 is handed on to the spider, with Scrapy's give-up line and key.
    again = leased("http://a.test/3")
    again.meta["crawler_retry"] = 1
    from crawler.requestmeta import RETRY_META

    again.meta[RETRY_META] = 1
    with caplog.at_level(logging.ERROR, logger="crawler.middlewares.retry"):
        response = middleware.process_response(again, Response(again.url, status=500))
    assert isinstance(response, Response)
    assert stats.get_value("retry/max_reached") == 1
    assert [record.levelno for record in caplog.records] == [logging.ERROR]
    # meta["max_retry_times"] = 0: no retry at all, for this request.
    none = leased("http://a.test/4", max_retry_times=0)
    assert isinstance(middleware.process_response(none, Response(none.url, status=500)), Response)
    assert stats.get_value("retry/max_reached") == 2
    assert handout_outcome(first) is LeaseAction.REQUEUE


def handout_outcome(request: object) -> object:
    from crawler.frontier.outcome import handout_of

    handout = handout_of(request)  # type: ignore[arg-type]
    assert handout is not None and handout.outcome is not None
    return handout.outcome.action


def test_renamed_settings_are_read_under_their_old_names_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    settings = project(RETRY_MAX_RETRIES=5, DNS_CACHE_SIZE=99, FEED_PAGE_BODY="text")
    with caplog.at_level(logging.WARNING, logger="crawler.scrapysettings"):
        translate(settings)
    assert (settings.getint("RETRY_TIMES"), settings.getint("DNSCACHE_SIZE"), settings.get("WEB_FEED_PAGE_BODY")) \
        == (5, 99, "text")
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 3 and all(m.startswith("Deprecated setting: ") for m in messages)
    assert any("RETRY_MAX_RETRIES is deprecated: read as RETRY_TIMES = 5" in m for m in messages)
    # Both names given: the new one wins, and the warning says so.
    both = project(RETRY_MAX_RETRIES=5, RETRY_TIMES=1)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="crawler.scrapysettings"):
        translate(both)
    assert both.getint("RETRY_TIMES") == 1
    assert "RETRY_MAX_RETRIES is deprecated and ignored: RETRY_TIMES = 1 is set" in caplog.text


def test_settings_nothing_reads_are_named_in_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    settings = project(SCHEDULER_QUEUE_CLASS="scrapy_redis.queue.FifoQueue", RETRY_PRIORITY_ADJUST=-5,
                       SCHEDULER_DISK_QUEUE="scrapy.squeues.PickleLifoDiskQueue")  # (Scrapy's default: quiet)
    with caplog.at_level(logging.WARNING, logger="crawler.scrapysettings"):
        translate(settings)
    [line] = [record.getMessage() for record in caplog.records]
    assert line.startswith("Scrapy settings not read by the crawler (docs: Scrapy's settings): ")
    assert "SCHEDULER_QUEUE_CLASS (instead: FRONTIER_QUEUE_WEIGHTS)" in line
    assert "RETRY_PRIORITY_ADJUST" in line and "SCHEDULER_DISK_QUEUE" not in line
    caplog.clear()
    translate(project())
    assert caplog.records == []


def test_every_scrapy_setting_the_addon_replaces_is_in_the_table() -> None:
    """Each component the add-on replaces: every Scrapy setting it reads is in the table, read or named."""
    from crawler.scrapysettings import Reading

    named = {mapping.scrapy: mapping.reading for mapping in TABLE}
    for name in ("SCHEDULER_DISK_QUEUE", "SCHEDULER_MEMORY_QUEUE", "SCHEDULER_PRIORITY_QUEUE", "SCHEDULER_DEBUG",
                 "DUPEFILTER_DEBUG", "ROBOTSTXT_PARSER", "RETRY_PRIORITY_ADJUST", "RETRY_EXCEPTIONS",
                 "AUTOTHROTTLE_START_DELAY", "AUTOTHROTTLE_DEBUG", "DNS_RESOLVER", "SCHEDULER_QUEUE_CLASS"):
        assert named[name] is Reading.NOT_READ, name
    for name in ("DOWNLOAD_SLOTS", "RANDOMIZE_DOWNLOAD_DELAY", "DNS_TIMEOUT", "DNSCACHE_ENABLED", "DNSCACHE_SIZE",
                 "REDIS_PARAMS", "SCHEDULER_IDLE_BEFORE_CLOSE", "RETRY_TIMES", "RETRY_GIVE_UP_LOG_LEVEL",
                 "DEPTH_PRIORITY"):
        assert named[name] is not Reading.NOT_READ, name


def test_scheduler_idle_before_close_and_download_slots_reach_the_frontier_config() -> None:
    from crawler.frontier.config import FrontierConfig
    from crawler.policy.politeness import SlotOverride

    settings = effective(project(ADDONS={"crawler.addon.CrawlerAddon": 0}, SCHEDULER_IDLE_BEFORE_CLOSE=7,
                                 DOWNLOAD_SLOTS={"A.example": {"delay": 2, "concurrency": 3},
                                                 "b.example": {"randomize_delay": True}}))
    config = FrontierConfig.from_settings(settings, "web")
    assert config.idle_before_close == 7
    assert dict(config.slot_overrides) == {"a.example": SlotOverride(2.0, 3, None),
                                          "b.example": SlotOverride(None, None, True)}


@pytest.mark.parametrize("slots, message", [
    ({"a.example": {"delay": -1}}, "delay must be a number of seconds >= 0"),
    ({"a.example": {"concurrency": 0}}, "concurrency must be an integer >= 1"),
    ({"a.example": {"concurency": 2}}, "unknown field(s) ['concurency']"),
    ({"a.example": 2}, "expected a dict with delay, concurrency, randomize_delay"),
    ({"a b": {"delay": 1}}, "is not a host name"),
])
def test_a_malformed_download_slots_entry_is_one_line_naming_the_setting(slots: object, message: str) -> None:
    from crawler.frontier.config import FrontierConfig

    with pytest.raises(ConfigurationError, match="^DOWNLOAD_SLOTS: ") as error:
        FrontierConfig.from_settings(project(DOWNLOAD_SLOTS=slots), "web")
    assert message in str(error.value)


def test_randomized_delays_are_drawn_as_scrapy_draws_them_and_slots_override_per_host() -> None:
    from crawler.policy.politeness import PolitenessPolicy, SlotOverride

    draws = iter([0.0, 0.999, 0.5, 0.25])
    policy = PolitenessPolicy(2.0, 0.0, 60.0, randomize=True, draw=lambda: next(draws),
                              overrides={"slow.example": SlotOverride(delay=10.0, randomize=False),
                                         "fast.example": SlotOverride(delay=0.0)})
    assert [policy.delay(0.1) for _ in range(3)] == [1.0, pytest.approx(2.998), 2.0]
    assert policy.delay(0.1, "slow.example") == 10.0
    assert policy.delay(0.1, "fast.example") == 0.0
    assert PolitenessPolicy(2.0, 10.0, 60.0).delay(0.5) == 5.0


def test_redis_params_configure_the_frontiers_connection_and_unknown_keys_are_refused() -> None:
    from crawler.redisconn.config import RedisConfig

    config = RedisConfig.from_settings(project(REDIS_URL="redis://cache.internal:6380",
                                               REDIS_PARAMS={"password": "s3cret", "db": 2, "socket_timeout": 5,
                                                             "encoding": "utf-8"}), "web")
    assert config.connection_kwargs() == {"password": "s3cret", "db": 2, "socket_timeout": 5}
    assert "s3cret" not in repr(config)
    # A server named only in REDIS_PARAMS is the frontier's too (scrapy-redis reads it so).
    where = RedisConfig.from_settings(project(REDIS_PARAMS={"host": "10.0.0.5", "port": 6390, "ssl": True}), "web")
    assert where.url == "rediss://10.0.0.5:6390"
    assert RedisConfig.from_settings(project(REDIS_PARAMS='{"db": 1}'), "web").url is None  # still embedded
    with pytest.raises(ConfigurationError, match=r"^REDIS_PARAMS: unknown key\(s\) \['pasword'\]"):
        RedisConfig.from_settings(project(REDIS_PARAMS={"pasword": "x"}), "web")
    with pytest.raises(ConfigurationError, match="^REDIS_PARAMS: ssl_certfile need TLS"):
        RedisConfig.from_settings(project(REDIS_URL="redis://h:1", REDIS_PARAMS={"ssl_certfile": "c.pem"}), "web")
    with pytest.raises(ConfigurationError, match="^REDIS_PARAMS: db must be"):
        RedisConfig.from_settings(project(REDIS_PARAMS={"db": "two"}), "web")


def test_a_password_in_redis_params_is_a_secret() -> None:
    from crawler.secrets import collect

    assert "hunter22" in collect(project(REDIS_PARAMS={"password": "hunter22", "db": 1}), environ={})


def test_a_sentinel_url_names_the_sentinels_the_service_and_the_database() -> None:
    from crawler.redisconn.config import RedisConfig, parse_sentinel_url

    assert parse_sentinel_url("redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2:26379/crawl/2") == (
        (("10.0.0.1", 26379), ("10.0.0.2", 26379)), "crawl", 2, "s3cret")
    config = RedisConfig.from_settings(project(REDIS_URL="redis+sentinel://h1:26379,h2:26380/crawl"), "web")
    assert (config.sentinels, config.cluster_nodes) == ((("h1", 26379), ("h2", 26380)), ())
    for url, message in (("redis+sentinel://h1:26379", "names no Sentinel service"),
                         ("redis+sentinel://h1:26379/crawl/x", "is not a database number"),
                         ("redis+sentinel://h1/crawl", "is not host:port")):
        with pytest.raises(ConfigurationError, match=f"^REDIS_URL: .*{message}"):
            RedisConfig.from_settings(project(REDIS_URL=url), "web")


def test_metrics_ports_take_a_range_and_the_targets_file_a_writable_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from crawler.extensions.metrics import MetricsConfig, parse_ports

    assert parse_ports(0) == (0, 0) and parse_ports("9410") == (9410, 9410)
    assert parse_ports("9410-9419") == (9410, 9419)
    for value, message in (("9419-9410", "an empty range"), ("70000", "not a TCP port"), ("x", "nor a range")):
        with pytest.raises(ConfigurationError, match=f"^METRICS_PORT: .*{message}"):
            parse_ports(value)
    config = MetricsConfig.from_settings(project(METRICS_PORT="9410-9411", METRICS_TARGETS_FILE=str(tmp_path)))
    assert config is not None and config.targets_file == f"{tmp_path}/crawler-{{worker}}.json"
    with pytest.raises(ConfigurationError, match="^METRICS_TARGETS_FILE: .*put \\{worker\\} in its name"):
        MetricsConfig.from_settings(project(METRICS_PORT=9410, METRICS_TARGETS_FILE=str(tmp_path / "one.json")))
    assert MetricsConfig.from_settings(project()) is None
