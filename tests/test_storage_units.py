"""Storage units: golden WARC bytes, header rules, SURT, recovery, text and SimHash, metadata records."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import re
import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import BufferWARCWriter, WARCWriter

from crawler.dedup import text as text_module
from crawler.dedup.text import (
    content_simhash,
    content_text,
    hamming,
    simhash64,
    simhash64_python,
    visible_text,
    words,
)
from crawler.metadata.recordstore import UrlRecord, UrlState, digest4
from crawler.warc.dates import warc_date
from crawler.warc.digests import payload_digest
from crawler.warc.gzip import Gzip, GzipLibrary
from crawler.warc.records import Fetch, RecordBuilder, RecordIds, RevisitProfile, stored_response_headers
from crawler.warc.uploads import WarcStoreConfig
from crawler.warc.writer import WarcFileWriter, record_bytes, recover_open_files, surt

GOLDEN = Path(__file__).parent / "golden" / "fetch.warc"


def fixed_builder() -> RecordBuilder:
    counter = itertools.count(1)
    return RecordBuilder(RecordIds(lambda: f"<urn:uuid:00000000-0000-4000-8000-{next(counter):012d}>"))


def sample_fetch(**changes: object) -> Fetch:
    fetch = Fetch(
        url="http://www.example.test/a/page.html?x=1",
        method="GET",
        request_headers=[("User-Agent", "testbot/1.0 (+https://example.org/bot)"), ("Accept-Encoding", "gzip")],
        status=200,
        reason="OK",
        protocol="HTTP/1.1",
        response_headers=[("Content-Type", "text/html; charset=utf-8"), ("Content-Encoding", "gzip"),
                          ("Content-Length", "31"), ("Transfer-Encoding", "chunked")],
        payload=b"<html><body>hello</body></html>\n",
        fetched_at=1_700_000_000.25,
        original_encoding="gzip",
        ip_address="127.0.0.1",
        outlinks=["http://www.example.test/b"],
        fetch_duration=0.125,
    )
    for name, value in changes.items():
        setattr(fetch, name, value)
    return fetch


def serialize(records: list[Any]) -> bytes:
    return b"".join(record_bytes(record) for record in records)


class WarcioReference:
    """The records of a fetch built with warcio's own record builder and writer: the oracle for
    crawler.warc.records, which writes the same bytes without warcio's objects."""

    def __init__(self, ids: RecordIds) -> None:
        self.ids = ids
        self.factory = BufferWARCWriter(gzip=False, warc_version="WARC/1.1")

    def headers(self, fetch: Fetch, record_id: str, **extra: str) -> dict[str, str]:
        headers = {"WARC-Record-ID": record_id, "WARC-Date": warc_date(fetch.fetched_at)}
        if fetch.ip_address:
            headers["WARC-IP-Address"] = fetch.ip_address
        headers.update(extra)
        return headers

    def records(self, fetch: Fetch, with_metadata: bool = True) -> bytes:
        response_id = self.ids()
        f = self.factory
        http = StatusAndHeaders(f"{fetch.status} {fetch.reason}".strip(), stored_response_headers(fetch),
                                protocol=fetch.protocol)
        if fetch.revisit_of and fetch.revisit_profile is RevisitProfile.SERVER_NOT_MODIFIED:
            main = f.create_warc_record(fetch.url, "revisit", payload=io.BytesIO(b""), length=0, http_headers=http,
                                        warc_headers_dict=self.headers(fetch, response_id, **{
                                            "WARC-Profile": fetch.revisit_profile.value,
                                            "WARC-Refers-To-Target-URI": fetch.revisit_of[0],
                                            "WARC-Refers-To-Date": fetch.revisit_of[1]}))
        elif fetch.revisit_of:
            main = f.create_revisit_record(fetch.url, payload_digest(fetch.payload), *fetch.revisit_of,
                                           http_headers=http, warc_headers_dict=self.headers(fetch, response_id))
        else:
            main = f.create_warc_record(fetch.url, "response", payload=io.BytesIO(fetch.payload),
                                        length=len(fetch.payload), http_headers=http,
                                        warc_headers_dict=self.headers(fetch, response_id))
        parts = urlsplit(fetch.url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        request_headers = list(fetch.request_headers)
        if not any(name.lower() == "host" for name, _ in request_headers):
            request_headers.insert(0, ("Host", parts.netloc))
        request = f.create_warc_record(
            fetch.url, "request", payload=io.BytesIO(b""), length=0,
            http_headers=StatusAndHeaders(f"{fetch.method} {target} {fetch.protocol}", request_headers,
                                          is_http_request=True),
            warc_headers_dict=self.headers(fetch, self.ids(), **{"WARC-Concurrent-To": response_id}))
        records = [request, main]
        lines = ([f"fetchTimeMs: {int(fetch.fetch_duration * 1000)}"] if fetch.fetch_duration is not None else []) \
            + [f"outlink: {link}" for link in fetch.outlinks]
        if with_metadata and lines:
            body = ("\r\n".join(lines) + "\r\n").encode("utf-8", "surrogateescape")
            records.append(f.create_warc_record(
                fetch.url, "metadata", payload=io.BytesIO(body), length=len(body),
                warc_content_type="application/warc-fields",
                warc_headers_dict=self.headers(fetch, self.ids(), **{"WARC-Concurrent-To": response_id})))
        buffer = io.BytesIO()
        writer = WARCWriter(buffer, gzip=False, warc_version="1.1")
        for record in records:
            writer.write_record(record)
        return buffer.getvalue()


@pytest.mark.parametrize("changes", [
    {},
    {"original_encoding": None, "response_headers": [("Content-Length", "32"), ("Content-Type", "text/plain")]},
    {"payload": b"", "response_headers": [], "ip_address": None, "fetch_duration": None, "outlinks": []},
    {"status": 404, "reason": "", "protocol": "HTTP/1.0", "method": "POST"},
    {"revisit_of": ("http://www.example.test/first", "2023-11-14T22:13:20Z")},
    {"revisit_of": ("http://www.example.test/a/page.html?x=1", "2023-11-13T10:00:00Z"), "status": 304,
     "reason": "Not Modified", "payload": b"", "revisit_profile": RevisitProfile.SERVER_NOT_MODIFIED},
    # Header values that are not ASCII (the crawler's URLs always are): warcio's %-encoding rule.
    {"url": "https://xn--bcher-kva.example/%C3%BCber?q=%C3%BC",
     "response_headers": [("Set-Cookie", "a=\u00fc; path=/"), ("Content-Disposition", "x\u00e9")]},
    {"request_headers": [("Host", "other.test"), ("Referer", "http://www.example.test/")],
     "outlinks": [f"http://www.example.test/{i}" for i in range(50)], "payload": bytes(range(256)) * 40},
])
def test_fetch_records_are_warcios_bytes(changes: dict[str, Any]) -> None:
    fetch = sample_fetch(**changes)
    for metadata in (True, False):
        ours = serialize(fixed_builder().fetch_records(fetch, with_metadata=metadata))
        counter = itertools.count(1)
        reference = WarcioReference(RecordIds(lambda c=counter: f"<urn:uuid:00000000-0000-4000-8000-{next(c):012d}>"))
        assert ours == reference.records(fetch, with_metadata=metadata)
    # The dedup pipeline's digest, handed over, is the one written (not computed again).
    given = sample_fetch(**changes, payload_digest=payload_digest(fetch.payload))
    assert serialize(fixed_builder().fetch_records(given)) == serialize(fixed_builder().fetch_records(fetch))


def test_record_builder_golden_bytes() -> None:
    builder = fixed_builder()
    data = serialize(
        [builder.warcinfo("t.warc.gz", {"software": "test"}, 1_700_000_000.0), *builder.fetch_records(sample_fetch()),
         *builder.fetch_records(sample_fetch(revisit_of=("http://www.example.test/first", "2023-11-14T22:13:20Z")),
                                with_metadata=False)]
    )
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_bytes(data)
    assert data == GOLDEN.read_bytes()


def test_golden_file_is_valid_warc() -> None:
    kinds = [record.rec_type for record in ArchiveIterator(io.BytesIO(GOLDEN.read_bytes()))]
    assert kinds == ["warcinfo", "request", "response", "metadata", "request", "revisit"]


def test_stored_headers_agree_with_the_payload() -> None:
    headers = stored_response_headers(sample_fetch())
    assert ("X-Crawler-Content-Encoding", "gzip") in headers
    assert ("X-Crawler-Content-Length", "31") in headers
    assert ("X-Crawler-Transfer-Encoding", "chunked") in headers
    assert ("Content-Length", "32") in headers
    assert not [h for h in headers if h[0] in ("Content-Encoding", "Transfer-Encoding")]
    plain = stored_response_headers(sample_fetch(original_encoding=None, response_headers=[("Content-Length", "32")]))
    assert plain == [("Content-Length", "32")]


def test_payload_digest_form() -> None:
    assert payload_digest(b"") == "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ"
    assert len(digest4(payload_digest(b"x"))) == 4


@pytest.mark.parametrize(
    ("url", "key"),
    [("http://www.Example.com/Path?Q=1", "com,example)/path?q=1"), ("https://a.b.example.org:8443/", "org,example,b,a:8443)/"),
     ("http://127.0.0.1:8080/x", "1,0,0,127:8080)/x"), ("http://example.com", "com,example)/"),
     # The canonical form replay tools use: query arguments sorted, escapes decoded, www dropped.
     ("http://x.test/p?b=2&a=1&c=3", "test,x)/p?a=1&b=2&c=3"), ("http://example.com/a%2Fb?x=%41", "com,example)/a/b?x=a"),
     # Simple URLs (the fast path): the host reversed, one trailing slash dropped.
     ("http://127.20.1.4:8000/p/2", "4,1,20,127:8000)/p/2"), ("https://a-b.example.org/x/~y/", "org,example,a-b)/x/~y"),
     ("http://www3.example.org/", "org,example)/"), ("http://example.org:80/a/./b", "org,example)/a/b")],
)
def test_surt(url: str, key: str) -> None:
    assert surt(url) == key


_HOST_LABELS = st.sampled_from(["www", "www2", "a", "example", "com", "co", "uk", "x-y", "0", "1", "127", "255",
                                "256", "010", "8", "xn--bcher-kva", "", "WWW", "Ex"])
_PATH_PARTS = st.sampled_from(["p", "2", "a.b", "~u", "_", "-", ".", "..", "", "A", "%41", "x;y", "(s)", "q=1"])


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(["http", "https"]), st.lists(_HOST_LABELS, min_size=1, max_size=5),
       st.sampled_from(["", ":80", ":443", ":8000", ":08", ":1"]), st.lists(_PATH_PARTS, max_size=5),
       st.sampled_from(["", "/", "?b=1&a=2", "#f"]))
def test_surt_keys_are_the_surt_package_s(scheme: str, labels: list[str], port: str, parts: list[str],
                                          tail: str) -> None:
    """The fast path for simple URLs gives exactly the package's key, and the rest goes to the package:
    hosts with www, numbers and addresses in every form, default ports, dot segments, double slashes,
    trailing slashes, escapes, upper case, queries, fragments."""
    import surt as surt_package

    url = f"{scheme}://{'.'.join(labels)}{port}" + ("/" + "/".join(parts) if parts else "") + tail
    try:
        expected = surt_package.surt(url)
    except Exception:  # the package refuses it: so must we (the same call)
        with pytest.raises(Exception):  # noqa: B017
            surt(url)
        return
    assert surt(url) == expected


def test_rotation_names_and_recovery(tmp_path: Path) -> None:
    builder = fixed_builder()
    writer = WarcFileWriter(tmp_path, "crawl", 2000, builder, {"software": "test"}, clock=lambda: 1_700_000_000.0,
                            worker_id="w1")
    closed = []
    for i in range(6):
        closed += writer.write(builder.fetch_records(sample_fetch(url=f"http://example.test/{i}")))
    assert len(closed) >= 2
    assert [c.warc.name for c in closed][:2] == ["crawl-20231114221320-00001-w1.warc.gz",
                                                  "crawl-20231114221320-00002-w1.warc.gz"]
    assert all(c.index.exists() for c in closed)
    # A file left open by a crash, with a torn last record, is cut back and closed.
    if writer.current is None:
        writer.write(builder.fetch_records(sample_fetch(url="http://example.test/last"), with_metadata=False))
    assert writer.current is not None
    open_path = writer.current
    writer._handle.write(b"\x1f\x8b\x08\x00garbage")  # type: ignore[union-attr]
    writer._handle.flush()  # type: ignore[union-attr]
    # While its writer lives (holds the lock), another worker's recovery leaves it alone.
    assert recover_open_files(tmp_path) == []
    assert open_path.exists()
    writer._handle.close()  # type: ignore[union-attr]  # the process dies: the kernel drops the lock
    recovered = recover_open_files(tmp_path)
    assert [r.warc.name for r in recovered] == [open_path.name.removesuffix(".open")]
    kinds = [r.rec_type for r in ArchiveIterator(io.BytesIO(recovered[0].warc.read_bytes()))]
    assert kinds[0] == "warcinfo" and kinds.count("response") == len(recovered[0].index.read_text().splitlines())


def test_store_settings(tmp_path: Path) -> None:
    from scrapy.settings import Settings

    from crawler.exceptions import ConfigurationError

    assert WarcStoreConfig.from_settings(Settings({}), tmp_path).spool == tmp_path / "warc"
    assert WarcStoreConfig.from_settings(Settings({"WARC_STORE": f"file://{tmp_path}/w"}), tmp_path).spool == tmp_path / "w"
    s3 = WarcStoreConfig.from_settings(Settings({"WARC_STORE": "s3://bucket/a/b", "WARC_S3_ENDPOINT_URL": "http://x"}),
                                       tmp_path)
    assert (s3.bucket, s3.key_prefix, s3.endpoint_url, s3.spool) == ("bucket", "a/b", "http://x", tmp_path / "warc-spool")
    with pytest.raises(ConfigurationError, match="WARC_STORE"):
        WarcStoreConfig.from_settings(Settings({"WARC_STORE": "ftp://x/y"}), tmp_path)


def test_visible_text_and_simhash() -> None:
    html = b"""<html><head><title>T</title><style>.x{}</style></head><body><script>var a=1;</script>
      <p>The quick brown fox</p><noscript>enable js</noscript><div>jumps over the lazy dog</div></body></html>"""
    text = visible_text(LexborHTMLParser(html))
    assert words(text) == ["the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog"]
    # One word changed in 600 changes 3 of 598 shingles: SimHash moves about 2 bits on average
    # (64 x angle / pi), so most such pairs, not all, are within 3; unrelated pages are ~32 bits apart.
    rng = random.Random(7)
    near = far = 0
    for _ in range(200):
        doc = [f"v{rng.randrange(50_000)}" for _ in range(600)]
        edited = list(doc)
        edited[rng.randrange(600)] = "changed"
        other = [f"v{rng.randrange(50_000)}" for _ in range(600)]
        near += hamming(simhash64(doc) or 0, simhash64(edited) or 0) <= 3
        far += hamming(simhash64(doc) or 0, simhash64(other) or 0) > 3
    assert near >= 0.75 * 200 and far == 200
    assert simhash64([]) is None
    # The fingerprint is fixed by the features alone (version 2: XXH3 per 3-shingle).
    assert simhash64(["a", "b", "c", "d"]) == simhash64(["a", "b", "c", "d"])
    assert simhash64(["one", "two"]) != simhash64(["two", "three"])


def test_boilerplate_is_left_out_of_the_fingerprint() -> None:
    article = " ".join(f"word{i}" for i in range(60))
    page = f"<html><body><p>Updated 2026-11-30 10:42</p><div>Sale 40 percent</div><p>{article}</p></body></html>"
    copy = f"<html><body><p>Updated 2026-12-01 08:00</p><div>Sale 10 percent</div><p>{article}</p></body></html>"

    def content(html: str, min_block_words: int = 10) -> list[str]:
        tree = LexborHTMLParser(html.encode())
        return words(content_text(tree, visible_text(tree), min_block_words=min_block_words))

    def fingerprint(html: str) -> int | None:
        tree = LexborHTMLParser(html.encode())
        return content_simhash(tree, visible_text(tree))

    assert content(page) == content(copy) == words(article)
    assert fingerprint(page) == fingerprint(copy) == simhash64(words(article))
    assert content(page, min_block_words=0)[:2] == ["updated", "2026"], "0: every word"
    # Little long text (a listing, text in bare divs): every visible word counts.
    listing = "<html><body>" + "".join(f"<li>item {i}</li>" for i in range(30)) + "<p>" + article[:40] + "</p></body></html>"
    assert content(listing)[:2] == ["item", "0"]
    assert content("<html><body><div>" + article + "</div></body></html>") == words(article)


def test_url_record_round_trip() -> None:
    from crawler.metadata.record import KIND_SITEMAP

    record = UrlRecord(UrlState.FETCHED, 1_700_000_000, 200, b"1234", (2**63 + 5).to_bytes(8, "big"), 'W/"e"',
                       1_699_999_000, 1234, 7, 3, 1, 1_700_086_400, 1_699_000_000, 1_700_000_000_123_456, 2, 5,
                       KIND_SITEMAP, "https://a.example:8443/p/1?q=2", "a.example")
    assert UrlRecord.unpack(record.pack()) == record
    assert record.simhash == 2**63 + 5
    # The URL is kept once, after its scheme: the host, then the rest in six bits per character.
    assert len(record.pack()) == 55 + len('W/"e"') + len("a.example") + (len(":8443/p/1?q=2") + 3) // 4 * 3
    # A record whose host is not the start of its URL (a host queued under another name) keeps both.
    apart = replace(record, url="http://b.example/x", host="a.example")
    assert UrlRecord.unpack(apart.pack()) == apart
    # A character outside the packing alphabet: the rest of the URL is kept as it is.
    for url in ("http://a.example/Wiki/Main_Page", "http://a.example/%E2%82%AC?Q=1", "http://a.example/"):
        plain = replace(record, url=url)
        assert UrlRecord.unpack(plain.pack()) == plain
    # No URL, no digest, no SimHash (a dead letter's record): they stay empty.
    bare = UrlRecord(UrlState.DEAD, 1_700_000_000)
    assert UrlRecord.unpack(bare.pack()) == bare and len(bare.pack()) == 55


@pytest.mark.parametrize(("library", "level"), [(GzipLibrary.ISAL, 0), (GzipLibrary.ISAL, None),
                                                (GzipLibrary.ISAL, 3), (GzipLibrary.ZLIB, 1), (GzipLibrary.ZLIB, 9)])
def test_writer_gzips_each_record_alone(tmp_path: Path, library: GzipLibrary, level: int | None) -> None:
    builder = fixed_builder()
    writer = WarcFileWriter(tmp_path, "crawl", 10**9, builder, {"software": "test"}, clock=lambda: 1_700_000_000.0,
                            worker_id="w1", gzip=Gzip(library, level))
    records = builder.fetch_records(sample_fetch())
    writer.write(records)
    closed = writer.close()
    data = closed.warc.read_bytes()
    # Every record is a gzip member of its own: the CDXJ offsets point at members.
    members = []
    while data:
        inflater = zlib.decompressobj(zlib.MAX_WBITS | 16)
        members.append(inflater.decompress(data))
        data = inflater.unused_data
    assert len(members) == 1 + len(records)
    fresh = fixed_builder()  # the same record ids, made in the same order
    fetch_records = fresh.fetch_records(sample_fetch())
    expected = serialize([fresh.warcinfo(closed.warc.name, {"software": "test"}, 1_700_000_000.0), *fetch_records])
    assert b"".join(members) == expected
    for line in closed.index.read_text().splitlines():
        fields = json.loads(line.split(" ", 2)[2])
        start, length = int(fields["offset"]), int(fields["length"])
        record = next(iter(ArchiveIterator(io.BytesIO(closed.warc.read_bytes()[start:start + length]))))
        assert record.rec_type == "response"


def test_gzip_settings_are_checked() -> None:
    from scrapy.settings import Settings

    from crawler.exceptions import ConfigurationError

    assert Gzip.from_settings(Settings()) == Gzip(GzipLibrary.ISAL, 2)
    assert Gzip.from_settings(Settings({"WARC_GZIP_LEVEL": "3"})) == Gzip(GzipLibrary.ISAL, 3)
    assert Gzip.from_settings(Settings({"WARC_GZIP_LIBRARY": "ZLIB"})) == Gzip(GzipLibrary.ZLIB, 6)
    assert Gzip.from_settings(Settings({"WARC_GZIP_LIBRARY": "zlib", "WARC_GZIP_LEVEL": 9})).level == 9
    with pytest.raises(ConfigurationError, match="WARC_GZIP_LEVEL.*isal has levels 0-3, got 6.*'zlib' has 1-9"):
        Gzip.from_settings(Settings({"WARC_GZIP_LEVEL": 6}))
    with pytest.raises(ConfigurationError, match="WARC_GZIP_LEVEL.*zlib has levels 1-9, got 10"):
        Gzip.from_settings(Settings({"WARC_GZIP_LIBRARY": "zlib", "WARC_GZIP_LEVEL": 10}))
    with pytest.raises(ConfigurationError, match="WARC_GZIP_LEVEL.*expected an integer"):
        Gzip.from_settings(Settings({"WARC_GZIP_LEVEL": "fast"}))
    with pytest.raises(ConfigurationError, match="WARC_GZIP_LIBRARY.*expected one of isal, zlib, got 'brotli'"):
        Gzip.from_settings(Settings({"WARC_GZIP_LIBRARY": "brotli"}))


@pytest.mark.parametrize("library", list(GzipLibrary))
def test_every_gzip_library_writes_members_warcio_and_gzip_read(tmp_path: Path, library: GzipLibrary) -> None:
    """A file of one library's members is read whole by warcio and by Python's gzip (one stream)."""
    import gzip as gzip_module

    builder = fixed_builder()
    writer = WarcFileWriter(tmp_path, "crawl", 10**9, builder, {"software": "test"}, clock=lambda: 1_700_000_000.0,
                            worker_id="w1", gzip=Gzip(library))
    for i in range(3):
        writer.write(builder.fetch_records(sample_fetch(url=f"http://example.test/{i}")))
    closed = writer.close()
    records = list(ArchiveIterator(io.BytesIO(closed.warc.read_bytes())))
    assert [record.rec_type for record in records].count("response") == 3
    assert gzip_module.decompress(closed.warc.read_bytes()).count(b"WARC/1.1\r\n") == len(records)


def test_append_batches_rotate_between_fetches(tmp_path: Path) -> None:
    builder = fixed_builder()
    writer = WarcFileWriter(tmp_path, "crawl", 1500, builder, {"software": "test"}, clock=lambda: 1_700_000_000.0,
                            worker_id="w1")
    batch = [writer.encode(builder.fetch_records(sample_fetch(url=f"http://example.test/{i}"))) for i in range(5)]
    closed = writer.append(batch) + writer.close_if_open()
    assert len(closed) >= 2
    urls = []
    for finished in closed:
        data = finished.warc.read_bytes()
        records = list(ArchiveIterator(io.BytesIO(data)))
        kinds = [r.rec_type for r in records]
        # Every file starts with warcinfo and holds whole fetches only.
        assert kinds[0] == "warcinfo" and kinds[1:] == ["request", "response", "metadata"] * ((len(kinds) - 1) // 3)
        for line in finished.index.read_text().splitlines():
            fields = json.loads(line.split(" ", 2)[2])
            start, length = int(fields["offset"]), int(fields["length"])
            record = next(iter(ArchiveIterator(io.BytesIO(data[start:start + length]))))
            assert record.rec_type == "response" and fields["filename"] == finished.warc.name
            urls.append(fields["url"])
    assert sorted(urls) == [f"http://example.test/{i}" for i in range(5)]


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200)
       | st.text(alphabet=st.sampled_from(list("aZ9_ -.,;:!?'\"()[]{}<>/\\@#$%^&*+=|~`\t\n\u212a\u00e9")), max_size=200))
def test_words_are_the_regex_word_runs(text: str) -> None:
    """The ASCII fast path of :func:`words` gives exactly the tokens of ``\\w+`` on the lowercased text."""
    assert words(text, max_words=10_000) == re.findall(r"\w+", text.lower())
    assert words(text, max_words=3) == re.findall(r"\w+", text.lower())[:3]


def test_simhash_version_2_fingerprints_are_pinned() -> None:
    """The duplicate index shares fingerprints across workers and crawls: any change to them needs a new
    SIMHASH_VERSION (its keys carry it). These values are version 2's."""
    tokens = words("The quick brown fox jumps over the lazy dog; crawlers archive the web, politely, one host at a time.")
    assert len(tokens) == 19
    for fingerprint in (simhash64, simhash64_python):
        assert fingerprint(tokens) == 0x9DE901EBC088B821
        assert fingerprint(["solo"]) == 0x0713DCD8811C0AE3
        assert fingerprint(["one", "two", "three", "four"]) != fingerprint(["four", "three", "two", "one"])
        assert fingerprint([]) is None


def test_the_c_simhash_is_built_and_used() -> None:
    """``make venv`` builds crawler.dedup._simhash (setup.py, libxxhash-dev); the crawl uses it when there."""
    from crawler.dedup import _simhash

    assert text_module.NATIVE
    assert simhash64 is _simhash.simhash64
    with pytest.raises(TypeError):
        _simhash.simhash64(("a", "b", "c"))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        _simhash.simhash64(["a", b"b", "c"])  # type: ignore[list-item]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(min_size=0, max_size=40), max_size=80)
       | st.lists(st.sampled_from(["a", "b", "\u00e9t\u00e9", "\U0001f600", "x" * 700, ""]), max_size=600))
def test_the_c_simhash_gives_the_python_fingerprint(tokens: list[str]) -> None:
    """Same features, same hash, same majority rule: the two implementations never disagree
    (any token, non-ASCII and astral characters, empty tokens, a shingle past the C stack buffer)."""
    assert simhash64(tokens) == simhash64_python(tokens)


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=400)
       | st.text(alphabet=st.sampled_from(list("aZ9_ -.,;:!?'\"()\t\n")), max_size=400)
       | st.text(max_size=100),
       st.integers(min_value=0, max_value=120))
def test_the_text_fingerprint_is_the_fingerprint_of_its_words(text: str, max_words: int) -> None:
    """ASCII text tokenized and hashed in one C call gives simhash64(words(text)): the same tokens (runs of
    [0-9A-Za-z_], lowercased), the same cut at max_words, the same fingerprint; other text goes through words()."""
    from crawler.dedup.text import text_simhash

    assert text_simhash(text, max_words) == simhash64(words(text, max_words)) == simhash64_python(words(text, max_words))
    if text.isascii():
        from crawler.dedup import _simhash

        assert _simhash.simhash64_text(text, max_words) == simhash64(words(text, max_words))


def test_the_c_text_fingerprint_refuses_what_it_cannot_tokenize() -> None:
    from crawler.dedup import _simhash

    with pytest.raises(ValueError, match="ASCII"):
        _simhash.simhash64_text("caf\u00e9 au lait", 10)
    with pytest.raises(ValueError, match="max_words"):
        _simhash.simhash64_text("a b c", -1)
    with pytest.raises(TypeError):
        _simhash.simhash64_text(b"a b c", 10)  # type: ignore[arg-type]
    assert _simhash.simhash64_text("", 10) is None and _simhash.simhash64_text("...", 10) is None


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300), st.floats(min_value=0, max_value=4e9, allow_nan=False)
       | st.integers(min_value=0, max_value=4 * 10**15).map(lambda n: n / 1e6 + 5e-7))
def test_digests_and_dates_are_the_standard_library_s(data: bytes, epoch: float) -> None:
    """The WARC digests' base32 and dates, written without base64/strftime per call, are the same strings."""
    import base64
    import hashlib
    from datetime import UTC, datetime

    from crawler.warc.dates import warc_date
    from crawler.warc.digests import sha1_base32

    assert sha1_base32(data) == "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")
    expected = datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert warc_date(epoch) == expected
    assert warc_date(epoch) == expected  # the cached second too


def test_record_ids_are_random_version_4_uuids() -> None:
    import uuid

    from crawler.warc.records import RecordIds

    ids = [RecordIds()() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for record_id in ids:
        assert record_id.startswith("<urn:uuid:") and record_id.endswith(">")
        parsed = uuid.UUID(record_id[len("<urn:uuid:"):-1])
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == record_id[len("<urn:uuid:"):-1]


_URL_PIECES = st.sampled_from(["http", "https", "HTTP", "h", "://", ":", "/", "//", "?", "#", "[", "]", "::1", "@",
                                "a", "b.example", ":8080", "%20", " ", "\t", "\n", "\x7f", "é", ";", "=", "&", ""])


@settings(max_examples=3000, deadline=None)
@given(st.lists(_URL_PIECES, max_size=12).map("".join))
def test_a_request_target_is_read_as_urlsplit_reads_it(url: str) -> None:
    """The WARC request line's target and Host (crawler/warc/records.py url_target) are urlsplit's, for
    any text; a URL urlsplit refuses is refused alike."""
    from urllib.parse import urlsplit

    from crawler.warc.records import url_target

    try:
        parts = urlsplit(url)
    except ValueError:
        with pytest.raises(ValueError):
            url_target(url)
        return
    target = parts.path or "/"
    assert url_target(url) == (parts.netloc, f"{target}?{parts.query}" if parts.query else target)
    assert url_target("http://a.example/p;x/q?k=v#frag") == ("a.example", "/p;x/q?k=v")


def test_a_forked_child_draws_its_own_record_ids() -> None:
    """Record ids come from random bytes read ahead; a child forked after a read must not repeat the
    parent's next ids (two workers started by fork would write the same WARC-Record-IDs)."""
    import os

    from crawler.warc.records import random_record_id

    random_record_id()  # the parent has bytes read ahead
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.write(write, "".join(random_record_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    child = os.read(read, 4096).decode()
    os.close(read)
    assert len(child) == 3 * 47
    assert child != "".join(random_record_id() for _ in range(3))


def test_url_parts_pack_six_bits_per_character_and_back() -> None:
    from crawler.metadata.record import pack_url_part, unpack_url_part

    rng = random.Random(11)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789/-._~?=&%:+,;!*'()@$ABCDEFG"
    for length in range(0, 120):
        part = "".join(rng.choice(alphabet) for _ in range(length)).encode()
        packed = pack_url_part(part)
        assert packed is not None and len(packed) == (length + 3) // 4 * 3
        assert unpack_url_part(packed) == part
    assert pack_url_part(b"/Path") is None and pack_url_part(b"/caf\xc3\xa9") is None


@pytest.mark.parametrize("encodings", [["gzip"], ["gzip", "br"]])
def test_a_decoded_body_keeps_the_servers_content_encoding_in_place(encodings: list[str]) -> None:
    # Through Scrapy's own decompression (which deletes the header) and the page item: the WARC
    # record keeps the header as sent, renamed, where the server put it.
    import gzip

    import brotli
    from scrapy import Request
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from crawler.frontier.codec import PROCESS_LOCAL_META
    from crawler.items import page_item
    from crawler.middlewares.fetchlimits import BoundedHttpCompressionMiddleware
    from crawler.requestmeta import ORIGINAL_ENCODING_AT_META, ORIGINAL_ENCODING_META

    html = b"<html><body>" + b"hello " * 200 + b"</body></html>"
    body = html
    for coding in encodings:
        body = gzip.compress(body) if coding == "gzip" else brotli.compress(body)
    sent = [("Date", "Mon, 30 Nov 2026 10:00:00 GMT"), ("Content-Type", "text/html"),
            *(("Content-Encoding", coding) for coding in encodings), ("Content-Length", str(len(body))),
            ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("Vary", "Accept-Encoding")]
    middleware = BoundedHttpCompressionMiddleware.from_crawler(get_crawler())
    request = Request("http://127.0.0.1/page.html", meta={ORIGINAL_ENCODING_META: ["stale"]})
    headers: dict[str, list[str]] = {}
    for name, value in sent:
        headers.setdefault(name, []).append(value)
    response = HtmlResponse(request.url, status=200, headers=headers, body=body, request=request)
    decoded = middleware.process_response(request, response)
    assert decoded.body == html and b"Content-Encoding" not in decoded.headers
    item = page_item(decoded)
    assert item.headers == sent
    assert item.original_encoding == ", ".join(encodings)
    assert {ORIGINAL_ENCODING_META, ORIGINAL_ENCODING_AT_META} <= PROCESS_LOCAL_META
    fetch = sample_fetch(response_headers=item.headers, payload=item.body, original_encoding=item.original_encoding)
    stored = stored_response_headers(fetch)
    assert stored == [
        ("Date", "Mon, 30 Nov 2026 10:00:00 GMT"), ("Content-Type", "text/html"),
        *(("X-Crawler-Content-Encoding", coding) for coding in encodings),
        ("X-Crawler-Content-Length", str(len(body))), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"),
        ("Vary", "Accept-Encoding"), ("Content-Length", str(len(html))),
    ]
    # The next answer to the same request (a retry's copy of its meta), not encoded: nothing renamed.
    plain = HtmlResponse(request.url, status=200, headers={"Content-Type": "text/html"}, body=html, request=request)
    assert page_item(middleware.process_response(request, plain)).original_encoding is None
    assert ORIGINAL_ENCODING_META not in request.meta


def test_an_unknown_content_encoding_is_stored_as_received() -> None:
    from scrapy import Request
    from scrapy.http import Response
    from scrapy.utils.test import get_crawler

    from crawler.items import page_item
    from crawler.middlewares.fetchlimits import BoundedHttpCompressionMiddleware

    middleware = BoundedHttpCompressionMiddleware.from_crawler(get_crawler())
    request = Request("http://127.0.0.1/blob")
    response = Response(request.url, headers={"Content-Encoding": "x-private"}, body=b"\x01\x02", request=request)
    item = page_item(middleware.process_response(request, response))
    assert item.original_encoding is None and item.body == b"\x01\x02"
    fetch = sample_fetch(response_headers=item.headers, payload=item.body, original_encoding=item.original_encoding)
    assert ("Content-Encoding", "x-private") in stored_response_headers(fetch)


def test_sha1_bytes_is_the_inverse_of_the_warc_digest_form() -> None:
    """The digest's 20 bytes read back by pairs of base32 characters equal base64's decoding, for every
    digest the crawl writes; another form goes to base64 (lowercase, padded) or is refused by it."""
    import base64
    import binascii
    import hashlib

    from crawler.warc.digests import payload_digest, sha1_bytes

    for n in range(300):
        payload = bytes(range(n % 256)) * (n % 7 + 1)
        assert sha1_bytes(payload_digest(payload)) == hashlib.sha1(payload).digest()
    digest = payload_digest(b"page")
    assert sha1_bytes(digest.removeprefix("sha1:")) == hashlib.sha1(b"page").digest()
    assert sha1_bytes("sha1:MZXW6===") == base64.b32decode("MZXW6===") == b"foo"
    with pytest.raises(binascii.Error):
        sha1_bytes("sha1:" + "1" * 32)
