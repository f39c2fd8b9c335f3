"""The process limits a broad crawl needs raised."""

from __future__ import annotations

import logging
import resource

logger = logging.getLogger(__name__)

#: File descriptors beyond the connections: Redis, log and WARC files, DNS, the embedded server...
SPARE_DESCRIPTORS = 256


def ensure_file_descriptors(needed: int) -> None:
    """Raise this process's soft limit of open files to ``needed`` (at most the hard limit).

    A broad crawl keeps ``CONCURRENT_REQUESTS`` connections in use and up to
    ``FETCH_MAX_IDLE_CONNECTIONS`` kept alive; a soft limit of 1,024 (a common
    default) would fail connections with "Too many open files".
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if target > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    if target < needed:
        logger.warning(
            "Open files are limited to %d (hard limit) and CONCURRENT_REQUESTS with FETCH_MAX_IDLE_CONNECTIONS "
            "need about %d: lower them, or raise the limit (ulimit -n)", target, needed)
