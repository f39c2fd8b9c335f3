"""URL normalization (RFC 3986 sections 5 and 6), filters and registered domains."""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import urljoin

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.settings import Settings

from crawler.exceptions import ConfigurationError
from crawler.spiders.web import WebSpider
from crawler.urls import EncodedHostError, NormalizationConfig, UrlError, normalize_url
from crawler.urls.domains import RegisteredDomains
from crawler.urls.filters import (
    BROAD_CRAWL_DENY_EXTENSIONS,
    Dropped,
    DropReason,
    FilterConfig,
    UrlFilter,
    repeated_segments,
)
from crawler.urls.normalize import remove_dot_segments


def norm(url: str, config: NormalizationConfig | None = None) -> str:
    return normalize_url(url, config or NormalizationConfig())[0]


# -- RFC 3986 section 5.4: reference resolution --------------------------------------------

BASE = "http://a/b/c/d;p?q"
RFC_5_4 = {
    # 5.4.1 normal examples
    "g:h": "g:h", "g": "http://a/b/c/g", "./g": "http://a/b/c/g", "g/": "http://a/b/c/g/", "/g": "http://a/g",
    "//g": "http://g", "?y": "http://a/b/c/d;p?y", "g?y": "http://a/b/c/g?y", "#s": "http://a/b/c/d;p?q#s",
    "g#s": "http://a/b/c/g#s", "g?y#s": "http://a/b/c/g?y#s", ";x": "http://a/b/c/;x", "g;x": "http://a/b/c/g;x",
    "g;x?y#s": "http://a/b/c/g;x?y#s", "": "http://a/b/c/d;p?q", ".": "http://a/b/c/", "./": "http://a/b/c/",
    "..": "http://a/b/", "../": "http://a/b/", "../g": "http://a/b/g", "../..": "http://a/", "../../": "http://a/",
    "../../g": "http://a/g",
    # 5.4.2 abnormal examples
    "../../../g": "http://a/g", "../../../../g": "http://a/g", "/./g": "http://a/g", "/../g": "http://a/g",
    "g.": "http://a/b/c/g.", ".g": "http://a/b/c/.g", "g..": "http://a/b/c/g..", "..g": "http://a/b/c/..g",
    "./../g": "http://a/b/g", "./g/.": "http://a/b/c/g/", "g/./h": "http://a/b/c/g/h", "g/../h": "http://a/b/c/h",
    "g;x=1/./y": "http://a/b/c/g;x=1/y", "g;x=1/../y": "http://a/b/c/y", "g?y/./x": "http://a/b/c/g?y/./x",
    "g?y/../x": "http://a/b/c/g?y/../x", "g#s/./x": "http://a/b/c/g#s/./x", "g#s/../x": "http://a/b/c/g#s/../x",
    # "http:g" is "http:g" for strict parsers and "http://a/b/c/g" for backward-compatible
    # ones; RFC 3986 allows both, urljoin gives the second.
    "http:g": "http://a/b/c/g",
}


@pytest.mark.parametrize(("reference", "target"), RFC_5_4.items())
def test_reference_resolution_rfc3986_5_4(reference: str, target: str) -> None:
    assert urljoin(BASE, reference) == target


@pytest.mark.parametrize(
    ("path", "result"),
    [("/a/b/c/./../../g", "/a/g"), ("mid/content=5/../6", "mid/6"), ("/../a", "/a"), ("/a/.", "/a/"),
     ("/a/..", "/"), ("/", "/"), ("/a//b/../c", "/a//c")],
)
def test_remove_dot_segments_rfc3986_5_2_4(path: str, result: str) -> None:
    assert remove_dot_segments(path) == result


# -- RFC 3986 section 6.2: equivalences -------------------------------------------------------


@pytest.mark.parametrize(
    "variants",
    [
        # 6.2.2.1 case: scheme, host and percent-escapes
        ["HTTP://www.Example.com/", "http://www.example.com/"],
        ["http://example.com/%7Ea%2fb", "http://example.com/~a%2Fb"],
        # 6.2.2.2 unreserved escapes decode
        ["http://example.com/%7Esmith/home.html", "http://example.com/~smith/home.html"],
        ["http://example.com/%41%42c", "http://example.com/ABc"],
        # 6.2.2.3 dot segments
        ["http://example.com/a/./b/../c", "http://example.com/a/c"],
        # 6.2.3 scheme-based: empty path, default port
        ["http://example.com", "http://example.com/", "http://example.com:/", "http://example.com:80/"],
        ["https://example.com:443/x", "https://example.com/x"],
    ],
)
def test_rfc3986_6_2_equivalences(variants: list[str]) -> None:
    assert len({norm(v) for v in variants}) == 1


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://example.com/a#frag", "http://example.com/a"),
        ("http://EXAMPLE.com.:8080/", "http://example.com:8080/"),
        ("http://user:secret@example.com/", "http://example.com/"),
        ("http://bücher.example/ü", "http://xn--bcher-kva.example/%C3%BC"),
        ("http://example.com/a b", "http://example.com/a%20b"),
        ("http://example.com/100%", "http://example.com/100%25"),
        ("http://example.com/%zz", "http://example.com/%25zz"),
        # reserved escapes stay encoded
        ("http://example.com/a%2fb%23c%3fd%26e%3df%2bg", "http://example.com/a%2Fb%23c%3Fd%26e%3Df%2Bg"),
        ("http://example.com/?q=a%2Bb&x=%41", "http://example.com/?q=a%2Bb&x=A"),
        # tracking and session parameters
        ("http://example.com/p?utm_source=x&id=3&UTM_Medium=y&gclid=1&b=2", "http://example.com/p?id=3&b=2"),
        ("http://example.com/p?fbclid=1&mc_cid=2&mc_eid=3", "http://example.com/p"),
        ("http://example.com/p?PHPSESSID=abc&x=1&sid=9", "http://example.com/p?x=1"),
        ("http://example.com/p;jsessionid=ABC123?x=1", "http://example.com/p?x=1"),
        ("http://example.com/a;JSESSIONID=1/b;v=2", "http://example.com/a/b;v=2"),
        ("http://example.com/p?a=1&&b=2&", "http://example.com/p?a=1&b=2"),
        ("http://example.com/p?b=2&a=1", "http://example.com/p?b=2&a=1"),  # order kept
        ("http://[::1]:8080/x", "http://[::1]:8080/x"),
        # hosts as browsers read them: percent-decoded (UTF-8), then like any other host
        ("http://example%2Ecom/", "http://example.com/"),
        ("http://%41.test/", "http://a.test/"),
        ("http://b%C3%BCcher.example/", "http://xn--bcher-kva.example/"),
        # tabs and newlines anywhere are removed, as the WHATWG URL parser removes them
        ("http://x.test/a\tb\n/c\r\n?q=1\n", "http://x.test/ab/c?q=1"),
        ("\thttp://x.te\nst/", "http://x.test/"),
    ],
)
def test_normalization_table(url: str, expected: str) -> None:
    assert norm(url) == expected


def test_sorted_query_and_custom_lists() -> None:
    config = NormalizationConfig.from_settings(
        Settings({"URL_SORT_QUERY": True, "URL_TRACKING_PARAMS": ["ref", "src_*"], "URL_SESSION_PARAMS": ["token"]})
    )
    assert norm("http://x.test/?b=2&a=1&a=0&ref=z&src_a=1&utm_source=kept&token=9", config) == (
        "http://x.test/?a=0&a=1&b=2&utm_source=kept"
    )


@pytest.mark.parametrize(
    "url",
    ["ftp://x.test/", "http:///nohost", "http://x.test:99999/", "http://a..b/", "http://ex ample.com/",
     "http://x.test/\x00", "javascript:alert(1)", "http://[::1/", "//x.test/", "http://x.test/a\x01b"],
)
def test_bad_urls_raise_url_error(url: str) -> None:
    with pytest.raises(UrlError):
        normalize_url(url)


@pytest.mark.parametrize("url", ["http://ex%2Fample.com/", "http://%FF.test/", "http://a%2525.test/",
                                 "http://x%20y.test/", "http://a%00b.test/", "http://%2E%2E/"])
def test_percent_encoded_hosts_that_decode_to_no_host_are_refused_and_counted_apart(url: str) -> None:
    with pytest.raises(EncodedHostError):
        normalize_url(url)
    assert drop_reason(url) == DropReason.ENCODED_HOST


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=200))
def test_normalization_never_raises_anything_but_url_error(text: str) -> None:
    with contextlib.suppress(UrlError):
        normalize_url(text)


URL_PARTS = st.builds(
    lambda scheme, host, port, path, query, frag: f"{scheme}://{host}{port}{path}{query}{frag}",
    st.sampled_from(["http", "HTTP", "https"]),
    st.from_regex(r"[A-Za-z0-9]{1,8}(\.[A-Za-z0-9]{1,8}){0,3}", fullmatch=True),
    st.sampled_from(["", ":80", ":443", ":8080"]),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=40).map(lambda t: "/" + t),
    st.text(alphabet="abc=&%2F+utm_sidx;", max_size=30).map(lambda t: "?" + t if t else ""),
    st.text(max_size=5).map(lambda t: "#" + t if t else ""),
)


@settings(max_examples=500, deadline=None)
@given(URL_PARTS)
def test_normalization_is_idempotent(url: str) -> None:
    try:
        once = norm(url)
    except UrlError:
        return
    assert norm(once) == once


# -- filters -----------------------------------------------------------------------------------


def drop_reason(url: str, depth: int = 0, **settings: object) -> DropReason | None:
    url_filter = UrlFilter(FilterConfig.from_settings(Settings(settings)))
    try:
        url_filter.check(url, depth)
    except Dropped as dropped:
        return dropped.reason
    return None


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://x.test/page.html", None),
        ("mailto:someone@x.test", DropReason.SCHEME),
        ("ftp://x.test/file", DropReason.SCHEME),
        ("http://x.test:notaport/", DropReason.MALFORMED),
        ("http://x.test/" + "a" * 3000, DropReason.LENGTH),
        ("http://x.test/photo.JPG", DropReason.EXTENSION),
        ("http://x.test/paper.pdf?download=1", DropReason.EXTENSION),
        ("http://x.test/archive.tar.gz", DropReason.EXTENSION),
        ("http://x.test/a/b/a/b/a/b", DropReason.REPEATED_SEGMENTS),
        ("http://x.test/a/a/a/page", DropReason.REPEATED_SEGMENTS),
        ("http://x.test/a/b/a/b/page", None),
        ("http://x.test/2024/01/01/", None),
    ],
)
def test_the_web_spiders_filters(url: str, reason: DropReason | None) -> None:
    assert drop_reason(url, URL_DENY_EXTENSIONS=list(BROAD_CRAWL_DENY_EXTENSIONS)) == reason


def test_the_default_filter_denies_no_extension() -> None:
    # A team's spider gets the documents it asks for; the web spider denies media (its custom_settings).
    assert drop_reason("http://x.test/paper.pdf") is None
    assert WebSpider.custom_settings["URL_DENY_EXTENSIONS"] == list(BROAD_CRAWL_DENY_EXTENSIONS)


def test_filter_settings(tmp_path) -> None:  # type: ignore[no-untyped-def]
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# blocked\nbad.test\n")
    patterns = tmp_path / "patterns.txt"
    patterns.write_text(r"/calendar/\d{4}" + "\n")
    common = {"URL_BLOCKED_HOSTS_FILE": str(hosts), "URL_BLOCKED_PATTERNS_FILE": str(patterns)}
    assert drop_reason("http://www.bad.test/", **common) == DropReason.BLOCKED_HOST
    assert drop_reason("http://notbad.test/", **common) is None
    assert drop_reason("http://x.test/calendar/2031/01", **common) == DropReason.BLOCKED_PATTERN
    assert drop_reason("http://x.test/p", depth=26) == DropReason.DEPTH
    assert drop_reason("http://x.test/p", depth=26, URL_MAX_DEPTH=0) is None
    assert drop_reason("http://x.test/doc.pdf", URL_DENY_EXTENSIONS=["pdf", "jpg"], URL_ALLOW_EXTENSIONS=["pdf"]) is None
    scoped = {"URL_ALLOWED_DOMAINS": ["x.test"], "URL_ALLOWED_PREFIXES": ["http://y.test/docs/"]}
    assert drop_reason("http://sub.x.test/", **scoped) is None
    assert drop_reason("http://y.test/docs/a", **scoped) is None
    assert drop_reason("http://y.test/blog/", **scoped) == DropReason.OUT_OF_SCOPE
    assert drop_reason("http://x.test/" + "a" * 100, URL_MAX_LENGTH=64) == DropReason.LENGTH
    with pytest.raises(ConfigurationError, match="URL_BLOCKED_PATTERNS"):
        FilterConfig.from_settings(Settings({"URL_BLOCKED_PATTERNS": ["(unclosed"]}))
    with pytest.raises(ConfigurationError, match="URL_BLOCKED_HOSTS_FILE"):
        FilterConfig.from_settings(Settings({"URL_BLOCKED_HOSTS_FILE": str(tmp_path / "missing")}))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_filters_never_raise_on_hostile_input(text: str) -> None:
    url_filter = UrlFilter(FilterConfig())
    try:
        url_filter.check(text)
        url_filter.check("http://x.test/" + text)
    except Dropped:
        pass


def test_repeated_segments() -> None:
    assert repeated_segments("/a/b/c/a/b/c/a/b/c/a", 2) is False  # triples are not checked
    assert repeated_segments("/x/" + "y/" * 3, 2) is True
    assert repeated_segments("/" + "a/" * 500, 2) is True  # linear, whatever the length


# -- registered domains ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "domain"),
    [("www.bbc.co.uk", "bbc.co.uk"), ("a.b.example.com", "example.com"), ("user.github.io", "user.github.io"),
     ("h1.farm.test", "farm.test"), ("127.0.0.1", "127.0.0.1"), ("localhost", "localhost"),
     ("xn--bcher-kva.de", "xn--bcher-kva.de")],
)
def test_registered_domains_offline(host: str, domain: str) -> None:
    assert RegisteredDomains()(host) == domain


# -- rel=canonical ---------------------------------------------------------------------------


def test_canonical_from_link_element_and_header() -> None:
    from crawler.modules.linkextractor import LinkExtractor, canonical_from_link_header

    page = LinkExtractor().extract_page(
        b'<html><head><link rel="Canonical" href="/main#x"></head><body><a href="a">a</a></body></html>',
        "http://x.test/dir/print?view=1",
    )
    assert page.canonical == "http://x.test/main"
    assert page.links == ["http://x.test/dir/a"]
    header = '<https://x.test/next>; rel="next", </c>; rel=canonical'
    assert canonical_from_link_header(header, "http://x.test/p") == "http://x.test/c"
    assert canonical_from_link_header('<https://x.test/n>; rel="next"', "http://x.test/") is None


def _parse(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[Any, list[str]]:
    from scrapy.http import HtmlResponse, Request
    from scrapy.utils.test import get_crawler

    from crawler.spiders.web import WebSpider

    crawler = get_crawler(WebSpider)
    spider = WebSpider.from_crawler(crawler)
    crawler.spider = spider
    response = HtmlResponse(url, body=body, headers={"Content-Type": "text/html", **(headers or {})},
                            request=Request(url, meta={"depth": 2}))
    outputs = list(spider.parse(response))
    item = outputs[-1]
    followed = [r.url for r in outputs[:-1]]
    return item, followed


def test_canonical_rule_same_domain_is_followed_other_domain_only_recorded() -> None:
    item, followed = _parse("http://www.x.test/print/1", b'<link rel="canonical" href="https://x.test/article/1">')
    assert (item.canonical_url, item.primary) == ("https://x.test/article/1", False)
    assert "https://x.test/article/1" in followed
    item, followed = _parse("http://x.test/a", b'<link rel="canonical" href="https://evil.test/a">')
    assert (item.canonical_url, item.primary) == ("https://evil.test/a", True)
    assert "https://evil.test/a" not in followed
    item, _ = _parse("http://x.test/a?utm_source=z", b"<p>no link element</p>", {"Link": '<http://x.test/a>; rel="canonical"'})
    assert (item.canonical_url, item.primary) == ("http://x.test/a", True)  # itself, once normalized


# -- sitemaps --------------------------------------------------------------------------------


def test_sitemap_limits() -> None:
    import gzip

    from crawler.sitemaps import SitemapError, SitemapKind, parse_sitemap

    urlset = b"<urlset>" + b"".join(b"<url><loc>http://x.test/%d</loc></url>" % i for i in range(10)) + b"</urlset>"
    content = parse_sitemap(gzip.compress(urlset), max_urls=4)
    assert (content.kind, len(content.entries), content.truncated) == (SitemapKind.URLSET, 4, True)
    with pytest.raises(SitemapError, match="decompressed"):
        parse_sitemap(gzip.compress(b"<urlset>" + b" " * 200_000 + b"</urlset>"), max_bytes=100_000)
    with pytest.raises(SitemapError):
        parse_sitemap(b"\x1f\x8bnot gzip at all")
    with pytest.raises(SitemapError):
        parse_sitemap(b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><html>&e;</html>')
    index = parse_sitemap(b"<sitemapindex><sitemap><loc> http://x.test/s.xml </loc><lastmod>2026-01-02</lastmod>"
                          b"</sitemap></sitemapindex>")
    assert (index.kind, index.entries[0].loc, index.entries[0].lastmod) == (
        SitemapKind.INDEX, "http://x.test/s.xml", "2026-01-02")


@pytest.mark.parametrize(
    ("href", "expected"),
    [
        # absolute, root-relative and relative hrefs alike: tabs and newlines anywhere are removed
        ("http://x.test/a\n/b", "http://x.test/a/b"),
        ("https://x.test/a\t\tb\r\n", "https://x.test/ab"),
        ("http://x.te\nst/a", "http://x.test/a"),
        ("/long/\n    path.html", "http://page.test/long/    path.html"),  # the spaces stay (encoded later)
        ("/a\tb", "http://page.test/ab"),
        ("rel\native.html", "http://page.test/dir/relative.html"),
        # leading and trailing C0 controls and spaces are stripped
        ("\x01\x1f /a \x0c", "http://page.test/a"),
        ("\x0b http://x.test/q?x=1 \x1b", "http://x.test/q?x=1"),
        ("/a ", "http://page.test/a"),
        # a non-breaking space is not a C0 control: kept, and encoded later
        ("/a\xa0b", "http://page.test/a\xa0b"),
        # a scheme written over two lines is still the scheme
        ("java\nscript:alert(1)", None),
        ("\n#top", None),
    ],
)
def test_hrefs_are_read_as_browsers_read_them(href: str, expected: str | None) -> None:
    from crawler.modules.linkextractor import LinkExtractor

    html = f'<html><body><a href="{href}">x</a></body></html>'
    links = LinkExtractor().extract(html.encode(), "http://page.test/dir/page.html")
    assert links == ([expected] if expected else [])
    if expected:
        assert normalize_url(links[0])[0]


def test_a_base_href_over_two_lines() -> None:
    from crawler.modules.linkextractor import LinkExtractor

    html = '<html><head><base href=" http://other.test/\n  base/ "></head><body><a href="p">x</a></body></html>'
    assert LinkExtractor().extract(html.encode(), "http://page.test/") == ["http://other.test/  base/p"]


@pytest.mark.parametrize("hashes", [2, 4, 7])
def test_the_bloom_filter_keeps_its_false_positive_rate_at_any_hash_count(hashes: int) -> None:
    """The filter is sized so ``SEEN_BLOOM_HASHES`` hashes give ``SEEN_FALSE_POSITIVE_RATE`` once the
    expected URLs are in: fill one with that many URLs, then count the new URLs that read "maybe"."""
    from crawler.frontier.seen import SeenConfig
    from crawler.urls import bloom_offsets, url_fingerprint

    expected, rate = 20_000, 0.01
    seen = SeenConfig.from_settings(Settings({"SEEN_EXPECTED_URLS": expected, "SEEN_FALSE_POSITIVE_RATE": rate,
                                              "SEEN_BLOOM_HASHES": hashes}))
    assert seen.bloom_hashes == hashes
    bits = bytearray(seen.bloom_bits // 8 + 1)
    for i in range(expected):
        for p in bloom_offsets(url_fingerprint(f"http://in.test/{i}"), seen.bloom_bits, hashes):
            bits[p >> 3] |= 1 << (p & 7)
    maybe = sum(
        all(bits[p >> 3] >> (p & 7) & 1 for p in bloom_offsets(url_fingerprint(f"http://new.test/{i}"),
                                                               seen.bloom_bits, hashes))
        for i in range(expected)
    )
    assert 0.8 * rate < maybe / expected < 1.2 * rate  # the old size (9.6 bits) with 4 hashes: 1.3%


def test_fewer_bloom_hashes_take_more_bits_and_the_count_is_checked() -> None:
    from crawler.frontier.seen import SeenConfig

    def seen(**values: object) -> SeenConfig:
        return SeenConfig.from_settings(Settings({"SEEN_EXPECTED_URLS": 100_000_000, **values}))

    default, optimum = seen(), seen(SEEN_BLOOM_HASHES=7)
    assert default.bloom_hashes == 4
    assert round(default.bits_per_url, 1) == 10.5
    assert round(optimum.bits_per_url, 1) == 9.6  # m / n ln 2 = 7: the fewest bits for 1%
    assert seen(SEEN_BLOOM_HASHES=2).bits_per_url > default.bits_per_url > optimum.bits_per_url
    for bad in (0, 33, "four"):
        with pytest.raises(ConfigurationError, match="SEEN_BLOOM_HASHES"):
            seen(SEEN_BLOOM_HASHES=bad)


def test_each_shard_s_bloom_filter_must_fit_a_redis_bitmap() -> None:
    """A crawl too large for one bitmap is refused with what to change; its shards each size their own."""
    from crawler.frontier.seen import bits_for
    from crawler.frontier.sizing import planned_sizes

    billion = Settings({"SEEN_EXPECTED_URLS": 1_000_000_000})
    with pytest.raises(ConfigurationError, match="SEEN_EXPECTED_URLS") as refused:
        planned_sizes(billion, 1, 1, 0)
    assert "SEEN_BLOOM_HASHES" in str(refused.value) and "FRONTIER_SHARDS" in str(refused.value)
    seen, _ = planned_sizes(billion, 4, 4, 0)
    assert (seen.bloom_bits, seen.bloom_hashes) == (bits_for(250_000_000, 0.01, 4), 4)
    with pytest.raises(ConfigurationError, match="SEEN_EXPECTED_URLS"):  # one hash: 99.5 bits per URL
        planned_sizes(Settings({"SEEN_BLOOM_HASHES": 1}), 1, 1, 0)
