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
    # Scrapy's offsite, redirect, proxy, cookies, HTTP error, referer and depth middlewares stay on.
    for path in ("scrapy.downloadermiddlewares.offsite.OffsiteMiddleware",
                 "scrapy.downloadermiddlewares.redirect.RedirectMiddleware",
                 "scrapy.downloadermiddlewares.httpproxy.HttpProxyMiddleware"):
        assert downloader[path] is not None, path
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
    assert settings.getint("RETRY_MAX_RETRIES") == 7
    assert settings.getlist("RETRY_HTTP_STATUSES") == [500, 503]
    assert settings.getint("URL_MAX_DEPTH") == 3
    assert settings.get("REDIS_URL") == "redis://redis.internal:6380"
    assert settings.getbool("FRONTIER_RESET_ON_START") is True
    assert "DOWNLOAD_DELAY = 2.5 read as FRONTIER_MIN_DELAY = 2.5" in lines
    assert len(caplog.records) == len(lines)


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
