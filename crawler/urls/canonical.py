"""The canonical form of a URL and its fingerprint, as used by the URL-seen set.

Version 1 applies the minimal, always-safe rules: lowercase scheme and host,
drop the default port, drop userinfo, drop the fragment, an empty path becomes
``/``. Changing these rules changes fingerprints, so the version is part of the
crawl's metadata (a crawl started under one version must not be resumed under
another without a conversion).
"""

from __future__ import annotations

from hashlib import blake2b
from urllib.parse import urlsplit

from crawler.exceptions import CrawlerError

NORMALIZATION_VERSION = 1

_DEFAULT_PORTS = {"http": 80, "https": 443}


class UrlError(CrawlerError):
    """A URL that cannot be crawled (no host, unsupported scheme, bad port)."""


def canonicalize(url: str) -> tuple[str, str]:
    """Return ``(canonical_url, host)`` for an absolute http(s) URL.

    Raises :class:`UrlError` for a URL without a host or with a bad port.
    """
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UrlError(f"malformed URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise UrlError(f"unsupported scheme in {url!r}")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise UrlError(f"no host in {url!r}")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = parts.path or "/"
    canonical = f"{scheme}://{netloc}{path}"
    if parts.query:
        canonical = f"{canonical}?{parts.query}"
    return canonical, host


def host_of(url: str) -> str:
    """The host a URL's politeness is counted against (lowercase, no port)."""
    return canonicalize(url)[1]


def url_fingerprint(canonical_url: str, method: str = "GET", body: bytes = b"") -> bytes:
    """16-byte fingerprint of a canonical URL (plus method and body when not a plain GET)."""
    digest = blake2b(canonical_url.encode("utf-8", "surrogateescape"), digest_size=16)
    if method != "GET" or body:
        digest.update(b"\0" + method.encode("ascii", "replace") + b"\0" + body)
    return digest.digest()
