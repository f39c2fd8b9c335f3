"""Registered domains (eTLD+1) from the Public Suffix List, offline.

tldextract is used with its bundled snapshot of the list and never fetches
one (``suffix_list_urls=()``, no cache directory). Private suffixes count
(``user.github.io`` is its own registered domain). A host under no known
suffix (``farm.test``, ``localhost``) uses its last two labels; an IP
address is its own registered domain. Answers are memoized for at most
``max_size`` hosts (the memo is cleared when full).
"""

from __future__ import annotations

import tldextract

_SHARED: RegisteredDomains | None = None


class RegisteredDomains:
    """Registered domain of a host name, memoized (see the module's docstring)."""

    def __init__(self, max_size: int = 100_000) -> None:
        self._extract = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)
        self._memo: dict[str, str] = {}
        self.max_size = max_size

    @classmethod
    def shared(cls) -> RegisteredDomains:
        """The process's one instance (a suffix list and a memo are loaded once, whoever asks)."""
        global _SHARED
        if _SHARED is None:
            _SHARED = cls()
        return _SHARED

    def __call__(self, host: str) -> str:
        domain = self._memo.get(host)
        if domain is None:
            domain = self._compute(host)
            if len(self._memo) >= self.max_size:
                self._memo.clear()
            self._memo[host] = domain
        return domain

    def _compute(self, host: str) -> str:
        if host.startswith("[") or host.replace(".", "").isdigit():
            return host
        parts = self._extract(host)
        if parts.suffix and parts.domain:
            return f"{parts.domain}.{parts.suffix}"
        labels = host.split(".")
        return ".".join(labels[-2:])
