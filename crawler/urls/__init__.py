"""URLs: normalization, fingerprints, filters and registered domains (pure, no I/O)."""

from crawler.urls.fingerprint import (
    bloom_offsets,
    bloom_positions,
    page_fingerprint,
    sketch_offsets,
    url_fingerprint,
    url_key,
)
from crawler.urls.normalize import (
    NORMALIZATION_VERSION,
    EncodedHostError,
    NormalizationConfig,
    UrlError,
    clean_reference,
    normalize_page_url,
    normalize_url,
)

__all__ = [
    "NORMALIZATION_VERSION",
    "EncodedHostError",
    "NormalizationConfig",
    "UrlError",
    "bloom_offsets",
    "bloom_positions",
    "clean_reference",
    "host_of",
    "normalize_page_url",
    "normalize_url",
    "page_fingerprint",
    "sketch_offsets",
    "url_fingerprint",
    "url_key",
]


def host_of(url: str) -> str:
    """The host a URL's politeness is counted against (normalized, no port)."""
    return normalize_url(url)[1]
