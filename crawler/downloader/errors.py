"""The download errors of the crawler's own (Scrapy's exceptions cover the rest)."""

from __future__ import annotations

from scrapy.exceptions import DownloadFailedError, DownloadTimeoutError


class ServerSilentError(DownloadTimeoutError):
    """The server accepted the connection (or kept it) and sent nothing before ``DOWNLOAD_TIMEOUT``:
    a host that listens but does not serve, which the frontier parks at once."""


class TlsError(DownloadFailedError):
    """The TLS handshake failed (with ``DOWNLOAD_VERIFY_CERTIFICATES``, a certificate that does not
    verify): the host answered, so this does not count towards parking it (``fetch/tls_error``)."""
