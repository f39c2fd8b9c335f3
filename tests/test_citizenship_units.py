"""Pure parts of good citizenship: robots policy, backoff, Retry-After, address guard, DNS cache."""

from __future__ import annotations

import asyncio
import socket
import time
from email.utils import formatdate

import pytest
from scrapy.settings import Settings
from scrapy.statscollectors import MemoryStatsCollector
from scrapy.utils.test import get_crawler

from crawler.downloader.dns import CachingGuardedResolver, DnsCacheConfig
from crawler.downloader.netguard import AddressPolicy, BlockedAddressError, is_loopback_host, parse_ip
from crawler.exceptions import ConfigurationError
from crawler.httpheaders import media_type
from crawler.policy.backoff import BackoffPolicy, parse_retry_after
from crawler.robots.policy import (
    RobotsConfig,
    RobotsRecord,
    RobotsRules,
    RobotsState,
    is_rfc_token,
    origin_of,
    prepare_robots,
    product_token,
    record_for_failure,
    record_for_response,
    record_for_too_many_redirects,
    robots_token,
)

CONFIG = RobotsConfig.from_settings(Settings({"ROBOTS_RETRY_DELAY": 60, "ROBOTS_RETRY_MAX_DELAY": 300}))
NOW = 1_000_000.0


# -- robots.txt status semantics (RFC 9309 2.3.1) ----------------------------------------


@pytest.mark.parametrize(
    ("status", "state"),
    [(200, RobotsState.RULES), (204, RobotsState.RULES), (301, RobotsState.ALLOW_ALL), (400, RobotsState.ALLOW_ALL),
     (401, RobotsState.ALLOW_ALL), (403, RobotsState.ALLOW_ALL), (404, RobotsState.ALLOW_ALL),
     (429, RobotsState.UNREACHABLE), (500, RobotsState.UNREACHABLE), (503, RobotsState.UNREACHABLE)],
)
def test_status_semantics(status: int, state: RobotsState) -> None:
    assert record_for_response(CONFIG, status, b"", NOW, None).state is state


def test_unreachable_robots_backs_off_and_counts_failures() -> None:
    first = record_for_failure(CONFIG, "DownloadTimeoutError", NOW, None)
    assert (first.state, first.failures, first.expires_at - NOW) == (RobotsState.UNREACHABLE, 1, 60)
    second = record_for_response(CONFIG, 502, b"", NOW, first)
    assert (second.failures, second.expires_at - NOW) == (2, 120)
    fourth = record_for_failure(CONFIG, "x", NOW, record_for_failure(CONFIG, "x", NOW, second))
    assert (fourth.failures, fourth.expires_at - NOW) == (4, 300)  # capped
    recovered = record_for_response(CONFIG, 200, b"User-agent: *\nDisallow:", NOW, fourth)
    assert (recovered.state, recovered.failures, recovered.expires_at - NOW) == (RobotsState.RULES, 0, 86400)


def test_429_is_too_fast_like_5xx_and_its_retry_after_is_honoured() -> None:
    plain = record_for_response(CONFIG, 429, b"", NOW, None)
    assert (plain.state, plain.failures, plain.expires_at - NOW) == (RobotsState.UNREACHABLE, 1, 60)
    later = record_for_response(CONFIG, 429, b"", NOW, None, retry_after=200)
    assert later.expires_at - NOW == 200  # Retry-After beyond the backoff
    capped = record_for_response(CONFIG, 429, b"", NOW, plain, retry_after=10_000)
    assert (capped.failures, capped.expires_at - NOW) == (2, 300)  # ROBOTS_RETRY_MAX_DELAY
    assert record_for_response(CONFIG, 429, b"", NOW, None, retry_after=5).expires_at - NOW == 60


def test_too_many_redirects_is_unavailable() -> None:
    assert record_for_too_many_redirects(CONFIG, NOW, 301).state is RobotsState.ALLOW_ALL


def test_only_the_first_max_bytes_are_kept() -> None:
    body = b"User-agent: *\nDisallow: /a\n" + b"#" * 600_000 + b"\nDisallow: /\n"
    record = record_for_response(CONFIG, 200, body, NOW, None)
    assert record.truncated and len(record.body) == 500 * 1024
    rules = RobotsRules(record, "crawler")
    assert not rules.allowed("http://x.test/a") and rules.allowed("http://x.test/b")


def test_record_codec_round_trip_and_unknown_versions() -> None:
    record = RobotsRecord(RobotsState.UNREACHABLE, NOW, NOW + 5, 503, b"", 2, "HTTP 503")
    assert RobotsRecord.decode(record.encode()) == record
    assert RobotsRecord.decode(b"\x92\x63\x00") is None
    assert RobotsRecord.decode(b"garbage\xc1") is None


# -- rules ---------------------------------------------------------------------------------

ROBOTS = b"""
User-agent: crawler
Disallow: /search
Allow: /search/help
Disallow: /*.pdf$
Allow: /tie
Disallow: /tie
Crawl-delay: 3

User-agent: *
Disallow: /
Sitemap: https://x.test/sitemap.xml
"""


def rules(body: bytes = ROBOTS, token: str = "crawler") -> RobotsRules:
    return RobotsRules(record_for_response(CONFIG, 200, body, NOW, None), token)


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://x.test/", True),
        ("http://x.test/search", False),
        ("http://x.test/search/help", True),  # longest match wins
        ("http://x.test/doc.pdf", False),  # * and $
        ("http://x.test/doc.pdf?x=1", True),  # $ anchors the end
        ("http://x.test/tie", True),  # Allow wins ties
        ("http://x.test/robots.txt", True),
    ],
)
def test_rules_for_our_token(url: str, allowed: bool) -> None:
    assert rules().allowed(url) is allowed


def test_other_agents_fall_back_to_star_group() -> None:
    other = rules(token="otherbot")
    assert not other.allowed("http://x.test/")
    assert other.allowed("http://x.test/robots.txt")  # always fetchable


def test_unreachable_disallows_all_but_robots_txt() -> None:
    unreachable = RobotsRules(record_for_failure(CONFIG, "x", NOW, None), "crawler")
    assert not unreachable.allowed("http://x.test/")
    assert unreachable.allowed("http://x.test/robots.txt")


def test_crawl_delay_is_capped_and_sitemaps_listed() -> None:
    assert rules().crawl_delay(60) == (3.0, False)
    assert rules().crawl_delay(2) == (2, True)
    assert rules(token="otherbot").crawl_delay(60) == (None, False)
    assert rules().sitemaps(10) == ["https://x.test/sitemap.xml"]


# -- robots.txt as the real web writes it -------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "token"),
    [
        ({"USER_AGENT": "mybot/1.0 (+https://example.org/bot)", "BOT_NAME": "crawler"}, "mybot"),
        ({"USER_AGENT": "my_bot-2/1.0", "BOT_NAME": "crawler"}, "my_bot-2"),
        ({"USER_AGENT": "mybot/1.0", "ROBOTS_USER_AGENT_TOKEN": "ourbot"}, "ourbot"),
        ({"USER_AGENT": "mybot/1.0", "ROBOTS_USER_AGENT_TOKEN": "ourbot", "ROBOTSTXT_USER_AGENT": "Scrapybot/2"},
         "Scrapybot"),
        ({"USER_AGENT": "", "BOT_NAME": "crawler"}, "crawler"),
    ],
)
def test_the_token_is_scrapys_setting_ours_or_the_user_agent_we_send(settings: dict[str, str], token: str) -> None:
    assert robots_token(Settings(settings)) == token
    assert RobotsConfig.from_settings(Settings(settings)).user_agent_token == token


def test_product_tokens() -> None:
    assert product_token("MyBot 2.1 (+http://x)") == "MyBot"
    assert product_token("  mybot/1.0") == "mybot"
    assert product_token("MJ12bot/v1.4.8 (http://mj12bot.com/)") == "MJ12bot"
    assert product_token("mybot*") == "mybot"
    assert product_token("/1.0") == ""
    assert is_rfc_token("my_bot-x") and not is_rfc_token("MJ12bot") and not is_rfc_token("")


MYBOT_DISALLOWED = "User-agent: mybot\nDisallow: /\n\nUser-agent: *\nDisallow: /private/\n"


@pytest.mark.parametrize(
    "line",
    ["User-agent: mybot", "User-agent: mybot/1.0", "User-agent: MyBot 2.1 (+http://mybot.example/)",
     "User-agent: MYBOT extra words", "user-agent:mybot", "User agent: MyBot/3", "User-agent mybot/1.0"],
)
def test_user_agent_lines_match_by_their_product_token(line: str) -> None:
    body = MYBOT_DISALLOWED.replace("User-agent: mybot", line, 1).encode()
    ours = rules(body, token="mybot")
    assert not ours.allowed("http://x.test/page"), prepare_robots(body, "mybot")
    other = rules(body, token="otherbot")
    assert other.allowed("http://x.test/page") and not other.allowed("http://x.test/private/x")


@pytest.mark.parametrize("bom", [b"\xef\xbb\xbf", b"\xef\xbb", b"\xef", "\ufeff".encode("utf-8")])
def test_a_byte_order_mark_hides_no_group(bom: bytes) -> None:
    body = bom + b"User-agent: *\nDisallow: /private/\n"
    assert not rules(body, token="mybot").allowed("http://x.test/private/a")
    assert rules(body, token="mybot").allowed("http://x.test/public")


def test_an_unknown_line_inside_a_run_of_user_agent_lines_does_not_split_the_group() -> None:
    body = b"User-agent: mybot\nSome-Unknown-Key: x\nUser-agent: *\nDisallow: /\n"
    assert not rules(body, token="mybot").allowed("http://x.test/a")
    assert not rules(body, token="otherbot").allowed("http://x.test/a")
    # Known records still end a group: a rule between two agents splits them as before.
    body = b"User-agent: mybot\nAllow: /\nUser-agent: *\nDisallow: /\n"
    assert rules(body, token="mybot").allowed("http://x.test/a")
    assert not rules(body, token="otherbot").allowed("http://x.test/a")


def test_the_pre_pass_gives_protego_our_group_alone() -> None:
    body = (b"\xef\xbb\xbfUser-agent: MyBot/1.0 (+http://x)\nX-Robots: 1\nUser-agent: *\n"
            b"Disallow: /private/ # why\nnot a directive\nSitemap https://x.test/s.xml\nCrawl-delay: 2\n"
            b"User-agent: otherbot\nDisallow: /\n")
    expected = "user-agent: *\ndisallow: /private/\ncrawl-delay: 2\nsitemap: https://x.test/s.xml"
    assert prepare_robots(body, "mybot") == expected
    assert prepare_robots(body, "somebot") == expected
    assert prepare_robots(body, "OtherBot") == "user-agent: *\ndisallow: /\nsitemap: https://x.test/s.xml"
    assert prepare_robots(b"User-agent: a\nDisallow: /\nSitemap: /s.xml\n", "b") == "sitemap: /s.xml"


def test_broken_robots_txt_is_parsed_leniently() -> None:
    broken = rules(b"\xff\xfe garbage\nUser-agent *\nDisallow /x\n<html>not robots</html>\nDisallow: /y\n")
    # protego, like Google's parser, accepts a missing colon; junk lines are skipped.
    assert not broken.allowed("http://x.test/x")
    assert not broken.allowed("http://x.test/y")
    assert broken.allowed("http://x.test/z")


def test_origin_of() -> None:
    assert origin_of("http://x.test:8080/a/b?c") == "http://x.test:8080"
    assert origin_of("https://x.test?q") == "https://x.test"
    assert origin_of("https://x.test") == "https://x.test"


# -- backoff and Retry-After -----------------------------------------------------------------


def test_backoff_formulas() -> None:
    policy = BackoffPolicy(throttle_base=5, throttle_max=60, park_after=3, park_base=10, park_max=100,
                           retry_base=30, retry_max=100)
    assert [policy.throttle_delay(n) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 60]
    assert [policy.park_delay(n) for n in (1, 2, 3, 4, 5, 9)] == [0, 0, 10, 20, 40, 100]
    assert [policy.retry_delay(n) for n in (1, 2, 3)] == [30, 60, 100]
    assert policy.capped_retry_after(10_000) == 60


def test_retry_after_both_forms() -> None:
    now = time.time()
    assert parse_retry_after(b"120", now) == 120
    assert parse_retry_after(" 0 ", now) == 0
    date = formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after(date.encode(), now) <= 31  # type: ignore[operator]
    assert parse_retry_after(formatdate(now - 100, usegmt=True), now) == 0
    assert parse_retry_after(b"soon", now) is None
    assert parse_retry_after(b"-5", now) is None
    assert parse_retry_after(None, now) is None


# -- address guard --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("93.184.216.34", True), ("2606:4700::1111", True),
        ("10.1.2.3", False), ("172.16.0.1", False), ("192.168.1.1", False), ("127.0.0.1", False),
        ("169.254.169.254", False), ("100.64.0.1", False), ("224.0.0.1", False), ("0.0.0.0", False),
        ("240.0.0.1", False), ("::1", False), ("fe80::1", False), ("fc00::1", False), ("::ffff:10.0.0.1", False),
        ("[::ffff:127.0.0.1]", False),
    ],
)
def test_address_policy_default(address: str, allowed: bool) -> None:
    assert AddressPolicy().allowed_text(address) is allowed


def test_address_policy_settings() -> None:
    policy = AddressPolicy.from_settings(Settings({"PRIVATE_NETWORKS_ALLOWLIST": ["10.1.0.0/16"]}))
    assert policy.allowed_text("10.1.9.9") and not policy.allowed_text("10.2.0.1")
    assert AddressPolicy.from_settings(Settings({"ALLOW_PRIVATE_NETWORKS": True})).allowed_text("127.0.0.1")
    with pytest.raises(ConfigurationError, match="PRIVATE_NETWORKS_ALLOWLIST"):
        AddressPolicy.from_settings(Settings({"PRIVATE_NETWORKS_ALLOWLIST": ["nope"]}))


def test_loopback_hosts() -> None:
    assert is_loopback_host("127.3.4.5") and is_loopback_host("localhost") and is_loopback_host("a.localhost.")
    assert not is_loopback_host("example.org") and not is_loopback_host("10.0.0.1")
    assert parse_ip("example.org") is None


@pytest.mark.parametrize(("host", "expected"), [
    ("example.org", None), ("example.org.", None), ("host1", None), ("xn--bcher-kva.example", None),
    ("bücher.example", None), ("1.2.3.4", "1.2.3.4"), ("[::1]", "::1"), ("::ffff:10.0.0.1", "10.0.0.1"),
    ("[2001:db8::a]", "2001:db8::a"), ("1.2.3.4.5", None), ("", None),
])
def test_parse_ip_names_and_literals(host: str, expected: str | None) -> None:
    # Asked twice: the second answer comes from the memo of literals.
    for _ in range(2):
        address = parse_ip(host)
        assert (None if address is None else str(address)) == expected


def test_parse_ip_memo_is_bounded() -> None:
    from crawler.downloader import netguard

    for i in range(netguard._LITERALS_MOST + 10):
        parse_ip(f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}")
    assert len(netguard._LITERALS) <= netguard._LITERALS_MOST
    assert str(parse_ip("10.0.0.7")) == "10.0.0.7"


# -- DNS cache -------------------------------------------------------------------------------


def _result(host: str) -> dict[str, object]:
    return {"hostname": "h", "host": host, "port": 80, "family": socket.AF_INET, "proto": 0, "flags": 0}


def test_dns_cache_ttl_negative_cache_bound_and_guard() -> None:
    calls: list[str] = []
    answers = {"public.test": ["93.184.216.34"], "mixed.test": ["10.0.0.1", "93.184.216.35"],
               "private.test": ["10.0.0.2"]}

    async def lookup(host: str, port: int, family: socket.AddressFamily) -> list:  # type: ignore[type-arg]
        calls.append(host)
        if host not in answers:
            raise socket.gaierror(socket.EAI_NONAME, "no such name")
        return [_result(a) for a in answers[host]]

    stats = MemoryStatsCollector(get_crawler())
    resolver = CachingGuardedResolver(DnsCacheConfig(ttl=0.3, negative_ttl=0.3, max_size=2), AddressPolicy(),
                                      stats, lookup)

    async def main() -> None:
        assert [r["host"] for r in await resolver.resolve("public.test", 80)] == ["93.184.216.34"]
        await resolver.resolve("public.test", 80)
        assert calls == ["public.test"]
        assert [r["host"] for r in await resolver.resolve("mixed.test", 80)] == ["93.184.216.35"]
        with pytest.raises(BlockedAddressError):
            await resolver.resolve("private.test", 80)
        for _ in range(2):
            with pytest.raises(OSError):
                await resolver.resolve("missing.test", 80)
        assert calls.count("missing.test") == 1  # the failure is cached
        await resolver.resolve("public.test", 80)
        assert calls.count("public.test") == 2  # evicted: at most 2 names are kept
        await asyncio.sleep(0.35)
        await resolver.resolve("mixed.test", 80)  # expired: looked up again
        assert calls.count("mixed.test") == 2

    asyncio.run(main())
    assert stats.get_value("dns/cache_hits") == 1
    assert stats.get_value("dns/negative_hits") == 1
    assert stats.get_value("dns/failures") == 1
    assert stats.get_value("fetch/blocked_address") == 1


def test_media_type() -> None:
    assert media_type(b"Text/HTML; charset=utf-8") == "text/html"
    assert media_type(None) == ""


def test_dns_cache_entries_expire_after_their_ttl() -> None:
    calls: list[str] = []

    async def lookup(host: str, port: int, family: socket.AddressFamily) -> list:  # type: ignore[type-arg]
        calls.append(host)
        return [_result("93.184.216.34")]

    stats = MemoryStatsCollector(get_crawler())
    resolver = CachingGuardedResolver(DnsCacheConfig(ttl=0.2, negative_ttl=0.2, max_size=100), AddressPolicy(),
                                      stats, lookup)

    async def main() -> None:
        await resolver.resolve("a.test", 80)
        await resolver.resolve("a.test", 80)
        assert calls == ["a.test"]
        await asyncio.sleep(0.25)
        await resolver.resolve("a.test", 80)
        assert calls == ["a.test", "a.test"]

    asyncio.run(main())


# -- a corpus of robots.txt cases, after RFC 9309 and the cases Google's and protego's tests cover ----
#: (case, robots.txt, our token, URL path, allowed). Written for this crawler; no parser's code.
GROUP_CASES = [
    ("a digit in the file's token: not a prefix of ours", "User-agent: MJ12bot\nDisallow: /\n\nUser-agent: *\n"
     "Disallow: /private/\n", "mjbot", "/page", True),
    ("a digit in the file's token: ours when it is ours, whole", "User-agent: MJ12bot\nDisallow: /\n", "MJ12bot",
     "/page", False),
    ("a shorter token is another crawler", "User-agent: Google\nDisallow: /\n", "Googlebot", "/page", True),
    ("a longer token is another crawler", "User-agent: Googlebot-News\nDisallow: /\n", "Googlebot", "/page", True),
    ("numbered tokens stay distinct groups", "".join(f"User-agent: Rule{n}TestBot\nDisallow: /r{n}\n\n"
                                                      for n in range(1, 8)), "Rule3TestBot", "/r5", True),
    ("numbered tokens: each keeps its own rules", "".join(f"User-agent: Rule{n}TestBot\nDisallow: /r{n}\n\n"
                                                           for n in range(1, 8)), "Rule3TestBot", "/r3", False),
    ("the token is case-insensitive", "user-agent: foobot\ndisallow: /\n", "FOOBOT", "/a", False),
    ("a value is read up to its first space", "User-Agent: Foo Bar\nAllow: /x/\nDisallow: /\n", "Foo", "/x/y", True),
    ("... and its version", "User-Agent: FooBot/2.1\nDisallow: /\n", "foobot", "/a", False),
    ("a trailing * is not part of the token", "User-Agent: foobot*\nDisallow: /\n", "foobot", "/a", False),
    ("rules before any group apply to no one", "Disallow: /\nUser-agent: *\nAllow: /\n", "foobot", "/a", True),
    ("groups naming us are combined", "User-agent: FooBot\nDisallow: /a\nUser-agent: BarBot\nDisallow: /\n"
     "User-agent: FooBot\nDisallow: /b\n", "foobot", "/b", False),
    ("... and nothing of the others", "User-agent: FooBot\nDisallow: /a\nUser-agent: BarBot\nDisallow: /c\n"
     "User-agent: FooBot\nDisallow: /b\n", "foobot", "/c", True),
    ("a blank line does not end a run of user-agents", "user-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\n"
     "disallow: /\n", "bazbot", "/z/d", True),
    ("... so both get the rules", "user-agent: BazBot\n\nuser-agent: FooBot\nallow: /z/\ndisallow: /\n", "bazbot",
     "/q", False),
    ("a blank line does not end a group's rules", "user-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\n",
     "barbot", "/w/a", True),
    ("a sitemap line does not split user-agents", "User-agent: FooBot\nSitemap: /s.xml\nUser-agent: BarBot\n"
     "Disallow: /\n", "foobot", "/a", False),
    ("our group replaces *'s whole", "User-agent: *\nDisallow: /x/\nUser-agent: FooBot\nDisallow: /y/\n", "FooBot",
     "/x/page", True),
    ("no group for us and no *: no rules", "User-agent: FooBot\nDisallow: /\nUser-agent: BarBot\nDisallow: /\n",
     "QuxBot", "/a", True),
    ("* in a run with others", "User-agent: a\nUser-agent: *\nDisallow: /\n", "QuxBot", "/a", False),
    ("* followed by more words is still *", "User-agent: * everyone\nDisallow: /\n", "QuxBot", "/a", False),
    ("an empty group naming us: no rules", "User-agent: *\nDisallow: /\nUser-agent: FooBot\n", "foobot", "/a", True),
    ("a missing colon is accepted", "user-agent FooBot\ndisallow /\n", "FooBot", "/x/y", False),
    ("directive names are case-insensitive", "USER-AGENT: FooBot\nALLOW: /x/\nDISALLOW: /\n", "FooBot", "/a/b",
     False),
    ("paths are case-sensitive", "user-agent: FooBot\ndisallow: /X/\n", "FooBot", "/x/y", True),
    ("the longest match wins", "user-agent: FooBot\ndisallow: /x/page.html\nallow: /x/\n", "FooBot",
     "/x/page.html", False),
    ("... whichever the order", "user-agent: FooBot\nallow: /x/page.html\ndisallow: /x/\n", "FooBot", "/x/page.html",
     True),
    ("allow wins a tie", "user-agent: FooBot\ndisallow: /\nallow: /\n", "FooBot", "/x", True),
    ("an empty disallow allows", "user-agent: FooBot\ndisallow:\n", "FooBot", "/x", True),
    ("* matches any run", "User-agent: FooBot\nDisallow: /foo/bar/quz\nAllow: /foo/*/qux\n", "FooBot", "/foo/bar/quz",
     False),
    ("$ anchors the end", "User-agent: FooBot\nDisallow: /foo/bar$\n", "FooBot", "/foo/bar/", True),
    ("... and matches the end", "User-agent: FooBot\nDisallow: /foo/bar$\n", "FooBot", "/foo/bar", False),
    ("a comment ends a line", "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\n", "FooBot", "/foo/quz",
     False),
    ("a commented rule is no rule", "User-agent: FooBot\n# Disallow: /\nDisallow: /foo/quz#qux\n", "FooBot", "/a",
     True),
    ("a rule's UTF-8 is matched percent-encoded", "User-agent: FooBot\nDisallow: /\nAllow: /foo/bar/ツ\n", "FooBot",
     "/foo/bar/%E3%83%84", True),
    ("the query is part of the path", "User-agent: FooBot\nDisallow: /*?sid=\n", "FooBot", "/a?sid=1", False),
    ("CR line endings", "User-agent: FooBot\rDisallow: /\r", "FooBot", "/a", False),
    ("CRLF line endings", "User-agent: FooBot\r\nDisallow: /\r\n", "FooBot", "/a", False),
    ("an empty file allows all", "", "FooBot", "/a", True),
    ("an allowed index.html allows its directory (as Google)", "User-agent: FooBot\nDisallow: /\n"
     "Allow: /dir/index.html\n", "FooBot", "/dir/", True),
    ("a crawl-delay ends a run of user-agents (Google differs)", "User-agent: FooBot\nCrawl-delay: 5\n"
     "User-agent: BarBot\nDisallow: /\n", "FooBot", "/a", True),
]


@pytest.mark.parametrize(("robots", "token", "path", "allowed"), [case[1:] for case in GROUP_CASES],
                         ids=[case[0] for case in GROUP_CASES])
def test_robots_corpus(robots: str, token: str, path: str, allowed: bool) -> None:
    assert rules(robots.encode(), token=token).allowed("http://foo.test" + path) is allowed, \
        prepare_robots(robots.encode(), token)


def test_crawl_delay_comes_from_our_group_only() -> None:
    body = b"User-agent: *\nCrawl-delay: 9\nUser-agent: mjbot\nCrawl-delay: 1\nUser-agent: MJ12bot\nCrawl-delay: 5\n"
    assert rules(body, token="mjbot").crawl_delay(60) == (1.0, False)
    assert rules(body, token="MJ12bot").crawl_delay(60) == (5.0, False)
    assert rules(body, token="otherbot").crawl_delay(60) == (9.0, False)


@pytest.mark.parametrize(("user_agent", "warned"), [("MJ12bot/1.7 (+http://x.test/bot)", "MJ"),
                                                     ("mybot/1.0 (+http://x.test/bot)", None)])
def test_a_token_outside_rfc_9309_is_warned_about_at_start(
    user_agent: str, warned: str | None, caplog: pytest.LogCaptureFixture,
) -> None:
    from scrapy.utils.test import get_crawler

    from crawler.middlewares.robots import RobotsTxtMiddleware

    crawler = get_crawler(settings_dict={"USER_AGENT": user_agent, "REDIS_URL": "redis://127.0.0.1:1/0"})
    with caplog.at_level("WARNING", logger="crawler.middlewares.robots"):
        RobotsTxtMiddleware.from_crawler(crawler)
    lines = [r.getMessage() for r in caplog.records if "RFC 9309" in r.getMessage()]
    if warned is None:
        assert not lines
    else:
        assert len(lines) == 1 and "'MJ12bot'" in lines[0] and f"would read '{warned}'" in lines[0]


def test_scrapys_dns_settings_are_read_by_the_crawlers_resolver() -> None:
    """DNSCACHE_SIZE bounds the names kept, DNSCACHE_ENABLED = False keeps none, and a lookup longer than
    DNS_TIMEOUT fails as a name that does not resolve (counted, and cached as a failure)."""
    from scrapy.settings import Settings

    from crawler.downloader.dns import resolver_from_settings

    stats = MemoryStatsCollector(get_crawler())
    calls: list[str] = []

    async def lookup(host: str, port: int, family: socket.AddressFamily) -> list:  # type: ignore[type-arg]
        calls.append(host)
        if host == "slow.test":
            await asyncio.sleep(5)
        return [_result("93.184.216.34")]

    def resolver(**given: object) -> CachingGuardedResolver:
        built = resolver_from_settings(Settings(given), stats)
        built._lookup = lookup
        return built

    assert resolver(DNSCACHE_SIZE=7).config.max_size == 7
    uncached = resolver(DNSCACHE_ENABLED=False)
    timed = resolver(DNS_TIMEOUT=0.05)

    async def main() -> None:
        for _ in range(2):
            await uncached.resolve("a.test", 80)
        assert calls == ["a.test", "a.test"], "nothing cached"
        for _ in range(2):
            with pytest.raises(socket.gaierror, match="DNS_TIMEOUT"):
                await timed.resolve("slow.test", 80)
        assert calls.count("slow.test") == 1  # the failure is cached (DNS_NEGATIVE_TTL)

    asyncio.run(main())
    assert stats.get_value("dns/timeouts") == 1
