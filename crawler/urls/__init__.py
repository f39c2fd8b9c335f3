"""URL handling: canonical form and fingerprints."""

from crawler.urls.canonical import NORMALIZATION_VERSION, UrlError, canonicalize, host_of, url_fingerprint

__all__ = ["NORMALIZATION_VERSION", "UrlError", "canonicalize", "host_of", "url_fingerprint"]
