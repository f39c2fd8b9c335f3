"""A bounded DNS cache with a TTL and negative caching, guarding addresses.

Used as the aiohttp connector's resolver. Every lookup result is kept for
``DNS_CACHE_TTL`` seconds (``getaddrinfo`` gives no record TTLs), failures for
``DNS_NEGATIVE_TTL`` seconds, at most ``DNSCACHE_SIZE`` names (Scrapy's
setting; least recently used evicted), none with ``DNSCACHE_ENABLED = False``;
a lookup that takes longer than ``DNS_TIMEOUT`` seconds fails as a name that
does not resolve. Addresses refused by the :class:`AddressPolicy` are
removed from the answer; a name left with none raises
:class:`BlockedAddressError`. Counted in ``dns/lookups``, ``dns/cache_hits``,
``dns/negative_hits``, ``dns/failures``, ``dns/timeouts`` and ``fetch/blocked_address``.

Names listed in ``DNS_HOSTS_FILE`` (the hosts(5) format: an address, then
names) are answered from it without a lookup, like ``/etc/hosts`` but for the
crawler only: pinning names for an intranet crawl or a test web. The address
guard applies to them as to any answer.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from aiohttp.abc import AbstractResolver, ResolveResult

from crawler.downloader.netguard import AddressPolicy, BlockedAddressError, parse_ip
from crawler.settings_parsing import get_bool, get_float, get_int

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings
    from scrapy.statscollectors import StatsCollector

Lookup = Callable[[str, int, socket.AddressFamily], Awaitable[list[ResolveResult]]]


@dataclass(frozen=True)
class DnsCacheConfig:
    ttl: float = 300.0
    negative_ttl: float = 30.0
    #: Names kept at most; 0: nothing is cached.
    max_size: int = 10_000
    #: Seconds one lookup may take.
    timeout: float = 60.0
    #: name -> addresses, from DNS_HOSTS_FILE.
    static: dict[str, list[str]] = field(default_factory=dict)


def resolver_from_settings(settings: BaseSettings, stats: StatsCollector) -> CachingGuardedResolver:
    """The resolver the settings describe (``DNS_*``, ``DNS_HOSTS_FILE``, the address guard)."""
    return CachingGuardedResolver(
        DnsCacheConfig(
            ttl=get_float(settings, "DNS_CACHE_TTL", minimum=0.0),
            negative_ttl=get_float(settings, "DNS_NEGATIVE_TTL", minimum=0.0),
            max_size=get_int(settings, "DNSCACHE_SIZE", minimum=1) if get_bool(settings, "DNSCACHE_ENABLED") else 0,
            timeout=get_float(settings, "DNS_TIMEOUT", minimum=0.001),
            static=read_hosts_file(settings["DNS_HOSTS_FILE"]) if settings.get("DNS_HOSTS_FILE") else {},
        ),
        AddressPolicy.from_settings(settings),
        stats,
    )


def read_hosts_file(path: str) -> dict[str, list[str]]:
    """Parse a hosts(5) file: ``address name [name...]``, ``#`` comments."""
    static: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.split("#", 1)[0].split()
            if len(fields) < 2 or parse_ip(fields[0]) is None:
                continue
            for name in fields[1:]:
                static.setdefault(name.lower().rstrip("."), []).append(fields[0])
    return static


class CachingGuardedResolver(AbstractResolver):
    def __init__(
        self, config: DnsCacheConfig, policy: AddressPolicy, stats: StatsCollector, lookup: Lookup | None = None
    ) -> None:
        self.config = config
        self.policy = policy
        self.stats = stats
        self._lookup = lookup
        self._cache: OrderedDict[tuple[str, int, int], tuple[float, list[ResolveResult] | OSError]] = OrderedDict()

    async def _default_lookup(self, host: str, port: int, family: socket.AddressFamily) -> list[ResolveResult]:
        from aiohttp.resolver import ThreadedResolver

        return await ThreadedResolver().resolve(host, port, family)

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        pinned = self.config.static.get(host.lower().rstrip("."))
        if pinned is not None:
            self.stats.inc_value("dns/static_hits")
            return self._guard(host, [_pinned(host, address, port) for address in pinned])
        key = (host, port, int(family))
        now = time.monotonic()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(key)
            answer = cached[1]
            if isinstance(answer, OSError):
                self.stats.inc_value("dns/negative_hits")
                raise answer
            self.stats.inc_value("dns/cache_hits")
        else:
            self.stats.inc_value("dns/lookups")
            lookup = self._lookup or self._default_lookup
            try:
                answer = await asyncio.wait_for(lookup(host, port, family), self.config.timeout)
            except TimeoutError:
                self.stats.inc_value("dns/timeouts")
                exc = socket.gaierror(socket.EAI_AGAIN, f"no answer for {host} within DNS_TIMEOUT "
                                                        f"({self.config.timeout:g} s)")
                self._store(key, now + self.config.negative_ttl, exc)
                raise exc from None
            except OSError as exc:
                self.stats.inc_value("dns/failures")
                self._store(key, now + self.config.negative_ttl, exc)
                raise
            self._store(key, now + self.config.ttl, answer)
        return self._guard(host, answer)

    def _guard(self, host: str, answer: list[ResolveResult]) -> list[ResolveResult]:
        allowed = [entry for entry in answer if self._allowed(entry["host"])]
        if not allowed:
            self.stats.inc_value("fetch/blocked_address")
            raise BlockedAddressError(f"{host} resolves only to refused addresses: {[e['host'] for e in answer]}")
        return allowed

    def _allowed(self, address: str) -> bool:
        parsed = parse_ip(address)
        return parsed is not None and self.policy.allowed(parsed)

    def _store(self, key: tuple[str, int, int], expires: float, answer: list[ResolveResult] | OSError) -> None:
        if not self.config.max_size:
            return
        self._cache[key] = (expires, answer)
        self._cache.move_to_end(key)
        while len(self._cache) > self.config.max_size:
            self._cache.popitem(last=False)

    async def close(self) -> None:
        self._cache.clear()


def _pinned(host: str, address: str, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return {"hostname": host, "host": address, "port": port, "family": family, "proto": 0, "flags": 0}
