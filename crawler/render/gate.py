"""The gate every request of a rendered page passes: robots.txt, addresses, budget, pacing.

One :class:`PageGate` per rendered page. Its verdicts come from
:class:`~crawler.render.subrequests.SubrequestPolicy`, then, for what may be
fetched, from the crawl's robots.txt rules of the request's origin (unknown
rules: not fetched) and, for another host, the address guard. Fetches are
paced per host by :class:`HostPacer`: one at a time, each starting no sooner
than the politeness delay (and the host's Crawl-delay) after the previous
request to that host ended. The page's own fetch is the first "previous".
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from crawler.downloader.netguard import AddressPolicy, parse_ip
from crawler.policy.politeness import PolitenessPolicy
from crawler.render.subrequests import Decision, SubrequestPolicy, host_of_url
from crawler.robots.policy import RobotsRules, origin_of


@dataclass
class _HostClock:
    lock: asyncio.Lock
    #: When the last request to the host ended (time.time()), and how long it took.
    last_end: float = 0.0
    last_duration: float = 0.0
    floor: float = 0.0


class HostPacer:
    """One request at a time per host, with the politeness delay between them (bounded: ``max_hosts``)."""

    def __init__(self, politeness: PolitenessPolicy, max_hosts: int = 10_000) -> None:
        self.politeness = politeness
        self.max_hosts = max_hosts
        self._clocks: OrderedDict[str, _HostClock] = OrderedDict()

    def _clock(self, host: str) -> _HostClock:
        clock = self._clocks.get(host)
        if clock is None:
            clock = self._clocks[host] = _HostClock(asyncio.Lock())
            while len(self._clocks) > self.max_hosts:
                oldest, old = next(iter(self._clocks.items()))
                if old.lock.locked():
                    break
                del self._clocks[oldest]
        self._clocks.move_to_end(host)
        return clock

    def fetched(self, host: str, ended: float, duration: float, floor: float = 0.0) -> None:
        """A request to ``host`` ended at ``ended`` after ``duration`` s (the page's own fetch, for one)."""
        clock = self._clock(host)
        if ended >= clock.last_end:
            clock.last_end, clock.last_duration = ended, duration
        clock.floor = max(clock.floor, floor)

    def next_at(self, host: str) -> float:
        clock = self._clock(host)
        return clock.last_end + max(self.politeness.delay(clock.last_duration), clock.floor)

    @asynccontextmanager
    async def slot(self, host: str) -> AsyncIterator[None]:
        """Hold ``host``'s one slot from after its delay until the request is done (record it with ``fetched``)."""
        clock = self._clock(host)
        async with clock.lock:
            wait = self.next_at(host) - time.time()
            if wait > 0:
                await asyncio.sleep(wait)
            yield


#: ``rules(origin) -> the crawl's robots.txt rules of an origin, or None if not known``.
RulesOf = Callable[[str], Awaitable[RobotsRules | None]]
#: ``resolve(host) -> its addresses`` (for hosts named in RENDER_SUBREQUEST_HOSTS).
Resolve = Callable[[str], Awaitable[list[str]]]


class PageGate:
    """The verdicts and the pacing for the requests of one rendered page."""

    def __init__(self, page_url: str, policy: SubrequestPolicy, pacer: HostPacer, rules_of: RulesOf,
                 addresses: AddressPolicy, resolve: Resolve) -> None:
        self.page_url = page_url
        self.policy = policy
        self.pacer = pacer
        self.rules_of = rules_of
        self.addresses = addresses
        self.resolve = resolve
        self.made = 0
        self.counts: dict[Decision, int] = {}

    async def decide(self, url: str, resource_type: str, navigation: bool) -> Decision:
        decision = self.policy.decide(url, resource_type, self.page_url, self.made, navigation)
        if decision is Decision.FETCH:
            # The budget's place is taken before the checks wait (robots.txt, DNS), so requests
            # checked at the same time cannot all take the last one; given back if refused.
            self.made += 1
            decision = await self._check(url)
            if decision is not Decision.FETCH:
                self.made -= 1
        self.counts[decision] = self.counts.get(decision, 0) + 1
        return decision

    async def _check(self, url: str) -> Decision:
        if not self.policy.same_origin(url, self.page_url):
            host = host_of_url(url)
            literal = parse_ip(host)
            try:
                found = [host] if literal is not None else await self.resolve(host)
            except OSError:
                found = []
            parsed = [parse_ip(address) for address in found]
            if not parsed or any(address is None or not self.addresses.allowed(address) for address in parsed):
                return Decision.BLOCKED_ADDRESS
        rules = await self.rules_of(origin_of(url))
        if rules is None or not rules.allowed(url):
            return Decision.BLOCKED_ROBOTS
        return Decision.FETCH

    @asynccontextmanager
    async def fetching(self, url: str) -> AsyncIterator[None]:
        """Around one fetch: wait for the host's slot and delay, then record when it ended."""
        host = host_of_url(url)
        async with self.pacer.slot(host):
            begun = time.time()
            try:
                yield
            finally:
                ended = time.time()
                self.pacer.fetched(host, ended, ended - begun)
