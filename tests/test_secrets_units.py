"""Secrets never leave the process: the redaction function, the logging filter, the password file."""

from __future__ import annotations

import io
import logging
import pprint
from pathlib import Path

import pytest
from scrapy.settings import Settings

from crawler.exceptions import ConfigurationError
from crawler.redisconn.config import RedisConfig
from crawler.secrets import RedactingFilter, Secrets, collect, is_secret_name, redact_url
from crawler.warc.records import Fetch, RecordBuilder, RecordIds

REDIS_PW = "R3dis-pw-7f1c"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz"
PROXY_PW = "pr0xy-pw-19ab"


@pytest.mark.parametrize(
    ("name", "secret"),
    [("AWS_SECRET_ACCESS_KEY", True), ("AWS_ACCESS_KEY_ID", True), ("AWS_SESSION_TOKEN", True),
     ("REDIS_PASSWORD", True), ("MY_API_KEY", True), ("GITHUB_TOKEN", True),
     ("FRONTIER_POLITENESS_KEY", False), ("ROBOTS_USER_AGENT_TOKEN", False), ("REDIS_PASSWORD_FILE", False),
     ("ALLOW_PRIVATE_NETWORKS", False), ("AWS_REGION_NAME", False), ("DEDUP_ENABLED", False)],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_url_passwords_are_masked() -> None:
    assert redact_url(f"redis://:{REDIS_PW}@db.internal:6379/0") == "redis://:***@db.internal:6379/0"
    assert redact_url(f"rediss://crawler:{REDIS_PW}@db:6380/1") == "rediss://crawler:***@db:6380/1"
    assert redact_url(f"http://bob:{PROXY_PW}@proxy:3128") == "http://bob:***@proxy:3128"
    assert redact_url(f"redis://db:6379/0?password={REDIS_PW}&x=1") == "redis://db:6379/0?password=***&x=1"
    # No password, nothing to mask (a user name alone, an e-mail address in a path).
    assert redact_url("http://example.org/user@host:1/x") == "http://example.org/user@host:1/x"
    assert redact_url("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"


def test_secrets_are_collected_from_settings_and_the_environment(tmp_path: Path) -> None:
    password_file = tmp_path / "redis-password"
    password_file.write_text("from-a-file-pw\n")
    settings = Settings({"REDIS_URL": f"redis://:{REDIS_PW}@h:1/0", "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
                         "REDIS_PASSWORD_FILE": str(password_file), "BOT_NAME": "crawler"})
    found = collect(settings, {"http_proxy": f"http://u:{PROXY_PW}@p:1", "AWS_SESSION_TOKEN": "tok-123456",
                               "HOME": "/root"})
    assert {REDIS_PW, AWS_SECRET, PROXY_PW, "tok-123456", "from-a-file-pw"} <= set(found)
    assert "crawler" not in found and "/root" not in found


def _logger(secrets: Secrets) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))
    handler.addFilter(RedactingFilter(secrets))
    logger = logging.getLogger(f"test.secrets.{id(stream)}")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    return logger, stream


def test_the_filter_redacts_messages_arguments_and_tracebacks() -> None:
    secrets = Secrets([AWS_SECRET, REDIS_PW, PROXY_PW])
    logger, stream = _logger(secrets)
    logger.info("Frontier Redis: %s", f"redis://:{REDIS_PW}@db:6379/0")
    # Scrapy's own "Overridden settings" line: a dict pretty-printed into the message.
    logger.info("Overridden settings:\n%(settings)s",
                {"settings": pprint.pformat({"AWS_SECRET_ACCESS_KEY": AWS_SECRET, "BOT_NAME": "crawler"})})
    try:
        raise ConnectionError(f"cannot connect through http://u:{PROXY_PW}@proxy:3128")
    except ConnectionError:
        logger.exception("Fetch failed")
    logger.debug("plain %d", 42)
    text = stream.getvalue()
    for secret in (AWS_SECRET, REDIS_PW, PROXY_PW):
        assert secret not in text
    assert "redis://:***@db:6379/0" in text and "'AWS_SECRET_ACCESS_KEY': '***'" in text
    assert "http://u:***@proxy:3128" in text and "Traceback" in text and "plain 42" in text
    assert "'BOT_NAME': 'crawler'" in text


def test_a_redis_password_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "pw"
    path.write_text(REDIS_PW + "\n")
    config = RedisConfig.from_settings(Settings({"REDIS_URL": "redis://db:6379/0", "REDIS_PASSWORD_FILE": str(path),
                                                 "CRAWL_DATA_DIR": str(tmp_path)}), "web")
    assert config.password == REDIS_PW
    assert REDIS_PW not in repr(config) and REDIS_PW not in config.describe()
    with pytest.raises(ConfigurationError, match="REDIS_PASSWORD_FILE"):
        RedisConfig.from_settings(Settings({"REDIS_URL": "redis://db:6379/0", "CRAWL_DATA_DIR": str(tmp_path),
                                            "REDIS_PASSWORD_FILE": str(tmp_path / "missing")}), "web")
    with pytest.raises(ConfigurationError) as error:
        RedisConfig.from_settings(Settings({"REDIS_URL": f"http://:{REDIS_PW}@db:6379/0",
                                            "CRAWL_DATA_DIR": str(tmp_path)}), "web")
    assert REDIS_PW not in str(error.value)


def test_credentials_sent_are_not_archived() -> None:
    fetch = Fetch(url="http://example.org/", method="GET",
                  request_headers=[("Proxy-Authorization", "Basic cHJveHk6cHc="), ("Authorization", "Bearer abc"),
                                   ("Accept", "*/*")],
                  status=200, reason="OK", protocol="HTTP/1.1", response_headers=[], payload=b"x", fetched_at=0.0)
    request = RecordBuilder(RecordIds(lambda: "<urn:uuid:1>")).fetch_records(fetch)[0].to_bytes()
    assert b"cHJveHk6cHc=" not in request and b"Bearer abc" not in request
    assert b"Proxy-Authorization: ***" in request and b"Accept: */*" in request
