"""Secrets never leave the process: one place that knows them and redacts them.

What is secret:

* the value of every setting whose name says so (:func:`is_secret_name`:
  ``*PASSWORD*``, ``*SECRET*``, ``*TOKEN*``, ``*CREDENTIAL*``, ``*ACCESS_KEY*``,
  ``*API_KEY*``, ``*PRIVATE_KEY*``, ``*_KEY_ID``: the AWS keys among them), and
  of the same names in the environment;
* the password of any URL (``scheme://user:password@host``): ``REDIS_URL``,
  ``REDIS_CLUSTER_NODES``, proxy URLs (``http_proxy``...), any URL in a
  message;
* the password ``REDIS_PASSWORD_FILE`` names;
* the same, one level down in a dict setting: ``REDIS_PARAMS = {"password": ...}``
  (scrapy-redis's), ``DOWNLOAD_SLOTS``...

:func:`redact` is the one function that removes them from a text: a URL's
password becomes ``***`` (``redis://:***@host:6379/0``), a known secret value
``***``. :class:`RedactingFilter`, installed on every handler of the root
logger (:func:`install`) when the add-on applies its settings, runs it on
every log record of the process: the crawler's lines, Scrapy's own
("Overridden settings", the stats dump), tracebacks and exceptions from
redis-py, boto3 and aiohttp.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"

#: Setting and environment variable names whose values are secret.
_SECRET_NAME = re.compile(
    r"PASSWORD|PASSWD|SECRET|TOKEN|CREDENTIAL|(?:PRIVATE|ACCESS|API|AUTH|ENCRYPTION|SIGNING)_?KEY|_KEY_ID$",
    re.IGNORECASE,
)
#: Names that look secret but are not (counts, sizes, switches).
_NOT_SECRET = re.compile(r"_(ENABLED|SIZE|TTL|FILE|PATH|MAX|MIN|COUNT|SECONDS)$|^ROBOTS_USER_AGENT_TOKEN$",
                         re.IGNORECASE)
#: ``scheme://user:password@`` in any text: the password is group 2.
_URL_PASSWORD = re.compile(r"\b([a-z][a-z0-9+.-]*://[^\s/@:'\"]*:)([^\s/@'\"]+)@", re.IGNORECASE)
#: ``password=...`` in a URL's query (redis-py accepts it there).
_QUERY_PASSWORD = re.compile(r"([?&](?:password|passwd|pass|token|secret)=)([^&\s'\"]+)", re.IGNORECASE)
#: Values shorter than this are not searched for (they would match ordinary text).
MIN_SECRET_LENGTH = 4


def is_secret_name(name: str) -> bool:
    """Whether a setting or environment variable of this name holds a secret."""
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.search(name)


def redact_url(url: str) -> str:
    """A URL with its password (userinfo, or a password in its query) masked."""
    return _QUERY_PASSWORD.sub(lambda m: m.group(1) + MASK, _URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", url))


def url_password(url: str) -> str | None:
    match = _URL_PASSWORD.search(url)
    return match.group(2) if match else None


class Secrets:
    """The secret values this process knows, longest first (a secret inside another is masked with it)."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self.add(values)

    def add(self, values: Iterable[str]) -> None:
        fresh = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH} - self._values
        if not fresh:
            return
        self._values |= fresh
        ordered = sorted(self._values, key=len, reverse=True)
        self._pattern = re.compile("|".join(re.escape(v) for v in ordered))

    def redact(self, text: str) -> str:
        """``text`` without any URL password or known secret value."""
        text = redact_url(text)
        if self._pattern is not None:
            text = self._pattern.sub(MASK, text)
        return text


def collect(settings: Mapping[str, Any] | Any, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The secret values named by ``settings`` (a Scrapy Settings or a mapping) and the environment."""
    values: list[str] = []
    if hasattr(settings, "attributes"):  # Scrapy's settings, read without their deprecation warnings
        items = [(name, attribute.value) for name, attribute in settings.attributes.items()]
    else:
        items = list(settings.items()) if hasattr(settings, "items") else []
    for name, value in items:
        values += _secret_values(name, value)
    for name, value in environ.items():
        if is_secret_name(name):
            values.append(value)
        elif name.lower().endswith("_proxy") or name.upper() in ("REDIS_URL", "REDIS_CLUSTER_NODES"):
            password = url_password(value)
            if password:
                values.append(password)
    password_file = settings.get("REDIS_PASSWORD_FILE") if hasattr(settings, "get") else None
    if password_file:
        with contextlib.suppress(OSError, UnicodeDecodeError):  # the Redis configuration reports it
            values.append(read_secret_file(str(password_file)))
    return values


def _secret_values(name: str, value: Any, depth: int = 0) -> list[str]:
    """The secrets of one setting: its value if its name says so, a URL's password, and the same in a dict."""
    if isinstance(value, str):
        out = [value] if is_secret_name(name) else []
        password = url_password(value)
        return [*out, password] if password else out
    if depth < 2 and hasattr(value, "items"):
        values: list[str] = []
        for key, inner in list(value.items()):
            values += _secret_values(str(key), getattr(inner, "value", inner), depth + 1)
        return values
    return []


def read_secret_file(path: str) -> str:
    """A secret kept in a file (its first line, without the line end)."""
    with open(path, encoding="utf-8") as handle:
        return handle.readline().rstrip("\r\n")


class RedactingFilter(logging.Filter):
    """Redacts every record that passes: its message, arguments merged in, and its traceback."""

    def __init__(self, secrets: Secrets) -> None:
        super().__init__("crawler.secrets")
        self.secrets = secrets
        self._formatter = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format: leave it to the handler's error path
            return True
        redacted = self.secrets.redact(message)
        if redacted != message or record.args:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = self.secrets.redact(self._formatter.formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = self.secrets.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.secrets.redact(record.stack_info)
        return True


#: The process's secrets and filter (one per process: the root logger is one per process).
_SECRETS = Secrets()
_FILTER = RedactingFilter(_SECRETS)


def install(settings: Any = None) -> Secrets:
    """Learn the secrets of ``settings`` and the environment; redact every root handler's records.

    Safe to call again (each crawl, each command): the filter is added once per
    handler, the secrets accumulate.
    """
    _SECRETS.add(collect(settings if settings is not None else {}))
    root = logging.getLogger()
    for handler in root.handlers:
        if _FILTER not in handler.filters:
            handler.addFilter(_FILTER)
    return _SECRETS


def redact(text: str) -> str:
    """``text`` without the process's known secrets or any URL password."""
    return _SECRETS.redact(text)
