"""What this worker knows of each host's quality, for the priority policy.

The counters live in Redis (``hostq`` in the host's frontier shard: pages,
errors, near duplicates), kept by the URL metadata script at every recorded
fetch, which hands back the host's current counts. This cache holds those
answers for the hosts this worker fetched lately, so links to them get their
priority without a Redis read; a host not in it has no known problems.

Bounded: at most ``max_hosts`` hosts; when full, the half least recently
updated is forgotten. One cache per crawler (:meth:`for_crawler`), shared by
the metadata pipeline (writer) and the scheduler (reader).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from crawler import defaults
from crawler.percrawler import PerCrawler
from crawler.policy.priority import HostQuality
from crawler.settings_parsing import get_int

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

_UNKNOWN = HostQuality()


class HostQualityCache:
    __slots__ = ("_hosts", "max_hosts")

    def __init__(self, max_hosts: int = defaults.PRIORITY_HOST_CACHE_SIZE) -> None:
        self.max_hosts = max_hosts
        self._hosts: dict[str, HostQuality] = {}

    @classmethod
    def for_crawler(cls, crawler: Crawler) -> HostQualityCache:
        return _caches(crawler)

    def get(self, host: str) -> HostQuality:
        return self._hosts.get(host, _UNKNOWN)

    def update(self, host: str, quality: HostQuality) -> None:
        hosts = self._hosts
        hosts.pop(host, None)
        hosts[host] = quality
        if len(hosts) > self.max_hosts:
            for stale in list(hosts)[: len(hosts) // 2]:
                del hosts[stale]

    def __len__(self) -> int:
        return len(self._hosts)


_caches: PerCrawler[HostQualityCache] = PerCrawler(
    lambda crawler: HostQualityCache(get_int(crawler.settings, "PRIORITY_HOST_CACHE_SIZE", minimum=1)))
