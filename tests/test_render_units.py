"""Rendering: detection, marks, the sub-request policy and the per-host pacing (no browser)."""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest

from crawler.downloader.netguard import AddressPolicy
from crawler.policy.politeness import PolitenessPolicy
from crawler.render.detect import Verdict, needs_browser
from crawler.render.gate import HostPacer, PageGate
from crawler.render.marks import HostMark, Mark, decide, lookup_names
from crawler.render.subrequests import Decision, SubrequestPolicy, host_of_url
from crawler.robots.policy import RobotsRecord, RobotsRules, RobotsState
from support.mockweb.site import JS_SHELL

ARTICLE = " ".join(f"word{i}" for i in range(120))


@pytest.mark.parametrize(
    ("html", "verdict", "reason"),
    [
        (JS_SHELL, Verdict.NEEDS_JS, "empty_app_root"),
        (b"<html><body><div id='app'></div><script src='/a.js'></script></body></html>", Verdict.NEEDS_JS,
         "empty_app_root"),
        (b"<html><body><app-root></app-root><script src='/main.js'></script></body></html>", Verdict.NEEDS_JS,
         "empty_app_root"),
        (b"<html><body><noscript>Please enable JavaScript</noscript><script>x()</script><p>hi</p></body></html>",
         Verdict.NEEDS_JS, "noscript"),
        (b"<html><body><script src='/b.js'></script><p>Loading...</p></body></html>", Verdict.NEEDS_JS,
         "little_content"),
        # Content of its own: no browser, whatever scripts it also has.
        (f"<html><body><div id='root'><p>{ARTICLE}</p><a href='/1'>1</a><a href='/2'>2</a><a href='/3'>3</a></div>"
         f"<script src='/analytics.js'></script></body></html>".encode(), Verdict.STATIC, "has_content"),
        # No scripts: nothing a browser could add.
        (b"<html><body><div id='root'></div></body></html>", Verdict.STATIC, "no_scripts"),
        # A server-rendered app root (text inside): static.
        (b"<html><body><div id='root'><p>Short but there</p></div><script src='/h.js'></script></body></html>",
         Verdict.NEEDS_JS, "little_content"),
    ],
)
def test_detection(html: bytes, verdict: Verdict, reason: str) -> None:
    detection = needs_browser(html)
    assert (detection.verdict, detection.reason) == (verdict, reason)


def test_detection_of_hostile_html_is_bounded() -> None:
    assert needs_browser(b"<script" + b"<" * 100_000).verdict in (Verdict.STATIC, Verdict.NEEDS_JS)
    assert needs_browser(b"").verdict is Verdict.STATIC


def test_marks_encode_and_decide() -> None:
    now = time.time()
    js = HostMark(Mark.JS, now + 60)
    assert HostMark.decode(js.encode()) == HostMark(Mark.JS, int((now + 60) * 1000) / 1000)
    assert HostMark.decode(b"on") == HostMark(Mark.ON)
    assert HostMark.decode(b"garbage") is None and HostMark.decode(b"js:x") is None
    assert lookup_names("a.b.example.org") == ["a.b.example.org", "b.example.org", "example.org"]
    assert lookup_names("127.0.0.1") == ["127.0.0.1"]
    # An operator's mark on the domain beats the host's detected mark.
    assert decide("a.example.org", [js, HostMark(Mark.OFF)], now) == HostMark(Mark.OFF)
    # A detected mark stands until it expires; a parent's detected mark does not count.
    assert decide("a.example.org", [js, None], now) == js
    assert decide("a.example.org", [HostMark(Mark.JS, now - 1), None], now) is None
    assert decide("a.example.org", [None, HostMark(Mark.JS, now + 60)], now) is None


def test_subrequest_policy() -> None:
    policy = SubrequestPolicy(extra_hosts=frozenset({"cdn.example.net"}), max_requests=2)
    page = "http://site.test/p/1"
    assert policy.decide(page, "document", page, 0, True) is Decision.DOCUMENT
    assert policy.decide("http://site.test/app.js", "script", page, 0, False) is Decision.FETCH
    assert policy.decide("http://site.test/logo.png", "image", page, 0, False) is Decision.BLOCKED_TYPE
    assert policy.decide("http://other.test/x.js", "script", page, 0, False) is Decision.BLOCKED_HOST
    assert policy.decide("https://cdn.example.net/x.js", "script", page, 0, False) is Decision.FETCH
    assert policy.decide("data:text/plain,x", "fetch", page, 0, False) is Decision.BLOCKED_SCHEME
    assert policy.decide("http://site.test/elsewhere", "document", page, 0, True) is Decision.BLOCKED_HOST
    assert policy.decide("http://site.test/api", "xhr", page, 2, False) is Decision.BLOCKED_BUDGET
    assert host_of_url("http://user:pw@[::1]:80/x") == "[::1]"
    assert host_of_url("https://CDN.example.net:8443/") == "cdn.example.net"


def _rules(body: str) -> RobotsRules:
    now = time.time()
    return RobotsRules(RobotsRecord(RobotsState.RULES, now, now + 3600, status=200, body=body.encode()), "testbot")


def test_page_gate_checks_robots_addresses_and_budget() -> None:
    async def main() -> None:
        async def rules_of(origin: str) -> RobotsRules | None:
            return _rules("User-agent: *\nDisallow: /private/\n") if origin == "http://site.test" else None

        async def resolve(host: str) -> list[str]:
            return {"cdn.example.net": ["93.184.216.34"], "intranet.example.net": ["10.1.2.3"]}[host]

        policy = SubrequestPolicy(extra_hosts=frozenset({"cdn.example.net", "intranet.example.net", "127.0.0.9"}),
                                  max_requests=3)
        gate = PageGate("http://site.test/", policy, HostPacer(PolitenessPolicy(0.0, 0.0, 0.0)), rules_of,
                        AddressPolicy(), resolve)
        assert await gate.decide("http://site.test/private/x", "fetch", False) is Decision.BLOCKED_ROBOTS
        assert await gate.decide("http://site.test/app.js", "script", False) is Decision.FETCH
        assert await gate.decide("http://intranet.example.net/x", "script", False) is Decision.BLOCKED_ADDRESS
        assert await gate.decide("http://127.0.0.9/x", "script", False) is Decision.BLOCKED_ADDRESS
        # A public CDN host whose robots.txt the crawl does not know: not fetched.
        assert await gate.decide("http://cdn.example.net/x.js", "script", False) is Decision.BLOCKED_ROBOTS
        assert await gate.decide("http://site.test/a", "xhr", False) is Decision.FETCH
        assert await gate.decide("http://site.test/b", "xhr", False) is Decision.FETCH
        assert await gate.decide("http://site.test/c", "xhr", False) is Decision.BLOCKED_BUDGET
        assert gate.counts[Decision.FETCH] == 3

    asyncio.run(main())


def test_page_gate_budget_holds_for_requests_checked_at_once() -> None:
    """Requests whose robots.txt lookups wait at the same time cannot all take the budget's last place."""
    async def main() -> list[Decision]:
        async def rules_of(origin: str) -> RobotsRules | None:
            await asyncio.sleep(0.01)
            return _rules("User-agent: *\nDisallow: /private/\n")

        async def resolve(host: str) -> list[str]:
            raise AssertionError("same origin: nothing resolved")

        gate = PageGate("http://site.test/", SubrequestPolicy(max_requests=3),
                        HostPacer(PolitenessPolicy(0.0, 0.0, 0.0)), rules_of, AddressPolicy(), resolve)
        # A refused request gives its place back.
        assert await gate.decide("http://site.test/private/x", "xhr", False) is Decision.BLOCKED_ROBOTS
        return list(await asyncio.gather(*(gate.decide(f"http://site.test/{i}", "xhr", False) for i in range(8))))

    decisions = asyncio.run(main())
    assert decisions.count(Decision.FETCH) == 3
    assert decisions.count(Decision.BLOCKED_BUDGET) == 5


def test_pacer_keeps_one_request_at_a_time_and_the_delay() -> None:
    """Requests to one host through the pacer never overlap and start a delay after the previous ended."""
    delay = 0.05

    async def main() -> list[tuple[float, float]]:
        pacer = HostPacer(PolitenessPolicy(delay, 0.0, 10.0))
        pacer.fetched("site.test", time.time(), 0.01)  # the page's own fetch
        spans: list[tuple[float, float]] = [(time.time() - 0.01, time.time())]

        async def one() -> None:
            async with pacer.slot("site.test"):
                begun = time.time()
                await asyncio.sleep(0.01)
                ended = time.time()
                pacer.fetched("site.test", ended, ended - begun)
                spans.append((begun, ended))

        await asyncio.gather(*(one() for _ in range(4)))
        return spans

    spans = asyncio.run(main())
    assert len(spans) == 5
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end + delay - 0.002


def test_the_marks_cache_answers_without_redis_until_it_expires() -> None:
    from crawler.redisconn.batch import BatchedScripts
    from crawler.render.marks import RenderMarks

    marks = RenderMarks(BatchedScripts(client=None), key="k", cache_size=2, cache_seconds=60.0)  # type: ignore[arg-type]
    now = time.time()
    assert marks.cached("a.test", now) == (False, None)
    marks._remember("a.test", HostMark(Mark.JS, now + 10), now)
    marks._remember("b.test", None, now)
    assert marks.cached("a.test", now) == (True, HostMark(Mark.JS, now + 10))
    assert marks.cached("b.test", now) == (True, None)
    # A detected mark that ran out stands no more; the cache entry itself expires after cache_seconds.
    assert marks.cached("a.test", now + 11) == (True, None)
    assert marks.cached("a.test", now + 61) == (False, None)
    marks._remember("c.test", HostMark(Mark.OFF), now)  # bounded: the oldest host is forgotten
    assert marks.cached("a.test", now) == (False, None)
