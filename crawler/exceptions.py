"""The crawler's own exception types.

Every error a user can cause by configuration is a :class:`ConfigurationError`
that names the setting or argument at fault; the ``crawl`` command prints it as
one line instead of a traceback.
"""

from __future__ import annotations


class CrawlerError(Exception):
    """Base class of every error raised by this project."""


class ConfigurationError(CrawlerError):
    """A setting, spider argument or environment value is unusable.

    ``name`` is the setting or argument at fault, so the message can point the
    user at the exact thing to change.
    """

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(f"{name}: {problem}")


class FrontierUnavailableError(CrawlerError):
    """The frontier's Redis server cannot be reached (or stopped answering)."""


class CodecError(CrawlerError):
    """A stored request cannot be decoded (unknown version, corrupt bytes)."""


class UnstorableCallbackError(CodecError):
    """A request's callback or errback is not a method of the spider: it cannot be stored by name."""
