"""Storage end to end: WARC files to a real S3-compatible server (moto), dedup, metadata, modules."""

from __future__ import annotations

import io
import json
import signal
import subprocess
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
import redis
from warcio.archiveiterator import ArchiveIterator

from crawler.crawlstate.keys import ShardKeys
from support.mockweb import WebSpec, host_ip
from tests.conftest import (
    ROOT,
    S3_ENV,
    MockWeb,
    MotoServer,
    RedisServer,
    crawl_command,
    crawl_env,
    run_crawl,
    stat,
    url_record,
)


def warc_check(path: Path) -> None:
    result = subprocess.run([str(Path(ROOT) / ".venv/bin/warcio"), "check", str(path)], capture_output=True,
                            text=True, check=False)
    if result.returncode != 0:
        import sys

        result = subprocess.run([sys.executable, "-m", "warcio.cli", "check", str(path)], capture_output=True,
                                text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def records(data: bytes) -> list[Any]:
    out = []
    for record in ArchiveIterator(io.BytesIO(data)):
        body = record.content_stream().read()
        out.append((record.rec_type, record.rec_headers.get_header("WARC-Target-URI"), record, body))
    return out


def fetched_urls(web: MockWeb) -> set[str]:
    """The pages the crawl fetched (each has a URL record)."""
    return {f"http://{e.host}:{web.port}{e.path}" for e in web.entries() if e.path != "/robots.txt"}


def answered_urls(web: MockWeb) -> set[str]:
    """Every URL the mock web answered, robots.txt included: every answer is archived."""
    return {f"http://{e.host}:{web.port}{e.path}" for e in web.entries()}


def test_warc_files_reach_s3_even_when_it_goes_down_mid_crawl(
    mockweb_factory: Any, redis_server: RedisServer, moto: MotoServer, tmp_path: Path
) -> None:
    spec = WebSpec(hosts=20, sizes="uniform:12", fanout=3, nav=1, cross=1, latency_ms=(15,))
    web = mockweb_factory(spec)
    moto.client().create_bucket(Bucket="archive")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(20)))
    settings = {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "s3-outage", "CRAWL_DATA_DIR": tmp_path / "data",
        "FRONTIER_MIN_DELAY": 0.3, "FRONTIER_DELAY_FACTOR": 0, "CONCURRENT_REQUESTS": 8,
        "WARC_STORE": "s3://archive/crawls/test", "WARC_S3_ENDPOINT_URL": moto.endpoint,
        "WARC_MAX_SIZE": 8000, "WARC_UPLOAD_RETRY_DELAY": 0.2, "WARC_UPLOAD_RETRY_MAX_DELAY": 1,
        "WARC_UPLOAD_CLOSE_TIMEOUT": 60, "WARC_UPLOAD_TIMEOUT": 1,
        "STATS_JSON_FILE": tmp_path / "stats.json",
    }
    process = subprocess.Popen(crawl_command("-a", f"seeds={seeds}", settings=settings), cwd=ROOT,
                               env=crawl_env(**S3_ENV), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while len(moto.objects("archive")) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(moto.objects("archive")) >= 2, "some files were uploaded before the outage"
    # S3 stops answering mid-crawl: the server process is stopped (SIGSTOP;
    # a restarted moto would come back empty, unlike S3), then resumes.
    assert moto.process is not None
    moto.process.send_signal(signal.SIGSTOP)
    spool = tmp_path / "data" / "s3-outage" / "warc-spool"
    deadline = time.monotonic() + 30
    while len(list(spool.glob("*.warc.gz"))) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)  # finished files pile up in the spool while S3 is away
    assert len(list(spool.glob("*.warc.gz"))) >= 3, "files wait in the spool during the outage"
    time.sleep(6)  # longer than an upload attempt's timeouts and retries
    moto.process.send_signal(signal.SIGCONT)
    _, stderr = process.communicate(timeout=180)
    assert process.returncode == 0, stderr[-3000:]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["finish_reason"] == "finished"
    objects = moto.objects("archive")
    assert not list(spool.glob("*.warc.gz*")), "every file left the spool"
    warcs = {key: body for key, body in objects.items() if key.endswith(".warc.gz")}
    indexes = {key for key in objects if key.endswith(".cdxj")}
    assert len(warcs) == stats["warc/files_closed"] == stats["warc/files_uploaded"]
    assert {k.removesuffix(".warc.gz") + ".cdxj" for k in warcs} == indexes
    assert all(key.startswith("crawls/test/s3-outage-") for key in warcs)
    # Every fetched page is in the archive, once.
    archived = []
    for key, body in warcs.items():
        path = tmp_path / Path(key).name
        path.write_bytes(body)
        warc_check(path)
        archived += [uri for kind, uri, _, _ in records(body) if kind in ("response", "revisit")]
    assert sorted(archived) == sorted(answered_urls(web))
    # The operator finds a page's record through the CDXJ indexes in S3.
    command = [*crawl_command()[:3], "frontier", "url", web.url(0), "--json"]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    done = subprocess.run(command, cwd=ROOT, env=crawl_env(**S3_ENV), capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    warc = json.loads(done.stdout)["warc"]
    assert warc["store"] == "s3://archive/crawls/test" and "error" not in warc, warc
    [record] = warc["records"]
    assert record["file"] in {Path(key).name for key in warcs} and record["status"] == "200"
    body = warcs[next(key for key in warcs if key.endswith(record["file"]))]
    member = body[record["offset"]:record["offset"] + record["length"]]
    assert [uri for kind, uri, _, _ in records(member) if kind == "response"] == [web.url(0)]


def test_files_spooled_while_s3_is_down_are_uploaded_at_the_next_start(
    mockweb_factory: Any, redis_server: RedisServer, moto: MotoServer, tmp_path: Path
) -> None:
    web = mockweb_factory(WebSpec(hosts=3, sizes="uniform:4", cross=0))
    moto.client().create_bucket(Bucket="archive")
    moto.stop()
    settings = {
        "REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "s3-restart", "CRAWL_DATA_DIR": tmp_path / "data",
        "FRONTIER_MIN_DELAY": 0, "WARC_STORE": "s3://archive", "WARC_S3_ENDPOINT_URL": moto.endpoint,
        "WARC_UPLOAD_RETRY_DELAY": 0.2, "WARC_UPLOAD_CLOSE_TIMEOUT": 2,
    }
    urls = ",".join(web.url(h) for h in range(3))
    result = run_crawl("-a", f"urls={urls}", settings=settings, env=crawl_env(**S3_ENV))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "still spooled" in result.stderr
    spool = tmp_path / "data" / "s3-restart" / "warc-spool"
    spooled = sorted(p.name for p in spool.glob("*.warc.gz"))
    assert len(spooled) == 1
    moto.start()
    moto.client().create_bucket(Bucket="archive")
    result = run_crawl(settings=settings, env=crawl_env(**S3_ENV))  # the same crawl, resumed: nothing to fetch
    assert result.returncode == 0, result.stderr[-3000:]
    keys = set(moto.objects("archive"))
    assert set(spooled) <= keys
    assert not list(spool.glob("*.warc.gz"))


@pytest.fixture(scope="module")
def content_crawl(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> dict[str, Any]:
    from tests.conftest import start_mockweb

    tmp = tmp_path_factory.mktemp("content")
    scenario = tmp / "scenario.json"
    scenario.write_text(json.dumps({"traps": {"0": "dups", "1": "images", "2": "images"}}))
    spec = WebSpec(hosts=4, sizes="uniform:3", fanout=2, nav=0, cross=0, scenario=str(scenario))
    web = start_mockweb(spec, tmp / "web.log")
    try:
        result = run_crawl(
            "-a", "urls=" + ",".join(web.url(h) for h in range(4)),
            settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "content", "CRAWL_DATA_DIR": tmp / "data",
                      "FRONTIER_MIN_DELAY": 0, "PNG_MODULE_ENABLED": True},
        )
        entries = web.entries()
    finally:
        web.stop()
    warcs = sorted((tmp / "data" / "content" / "warc").glob("*.warc.gz"))
    return {"result": result, "entries": entries, "warcs": warcs, "web": web, "tmp": tmp}


def test_local_warc_files_pass_warcio_check_and_hold_every_page(content_crawl: dict[str, Any]) -> None:
    result = content_crawl["result"]
    assert result.returncode == 0 and result.stats["finish_reason"] == "finished", result.stderr[-3000:]
    assert len(content_crawl["warcs"]) == 1
    path = content_crawl["warcs"][0]
    warc_check(path)
    found = records(path.read_bytes())
    assert found[0][0] == "warcinfo"
    info = found[0][3].decode()
    assert "crawl-id: content" in info and "robots: obey (RFC 9309)" in info
    web = content_crawl["web"]
    archived = sorted(uri for kind, uri, _, _ in found if kind in ("response", "revisit"))
    assert archived == sorted(answered_urls(web))
    # request and response are linked; the metadata record lists outlinks
    by_id = {r.rec_headers.get_header("WARC-Record-ID"): r for _, _, r, _ in found}
    for kind, _, record, body in found:
        if kind in ("request", "metadata"):
            assert record.rec_headers.get_header("WARC-Concurrent-To") in by_id
        if kind == "metadata" and record.rec_headers.get_header("WARC-Target-URI").endswith(f":{web.port}/"):
            assert b"outlink: " in body
    index = path.with_name(path.name.removesuffix(".warc.gz") + ".cdxj").read_text().splitlines()
    assert len(index) == len(archived)
    first = json.loads(index[0].split(" ", 2)[2])
    assert first["filename"] == path.name and int(first["offset"]) > 0


def test_exact_duplicates_are_revisits_near_duplicates_are_flagged(
    content_crawl: dict[str, Any], redis_server: RedisServer
) -> None:
    found = records(content_crawl["warcs"][0].read_bytes())
    web = content_crawl["web"]
    kinds = {uri: kind for kind, uri, _, _ in found if kind in ("response", "revisit")}
    base = f"http://{host_ip(0)}:{web.port}"
    # /dup/<i> serve one payload: the first fetched is stored, the others are revisits of it.
    dups = [f"{base}/dup/{i}" for i in range(1, 5)]
    first_capture = [u for u in dups if kinds[u] == "response"]
    assert len(first_capture) == 1
    dup_revisits = [r for kind, uri, r, _ in found if kind == "revisit" and uri in dups]
    assert len(dup_revisits) == 3
    for record in dup_revisits:
        assert record.rec_headers.get_header("WARC-Profile").endswith("identical-payload-digest")
        assert record.rec_headers.get_header("WARC-Refers-To-Target-URI") == first_capture[0]
        assert record.rec_headers.get_header("WARC-Refers-To-Date")
    # The two image hosts serve the same logo: the second is a revisit of the first.
    logo_kinds = sorted(kind for kind, uri, _, _ in found
                        if kind in ("response", "revisit") and uri.endswith("/img/logo.png"))
    assert logo_kinds == ["response", "revisit"]
    result = content_crawl["result"]
    # 3 dup pages, the second logo, and the second image host's root page (the same HTML).
    assert stat(result, "dedup/exact") == 5
    assert stat(result, "warc/revisit_records") == 5
    # /near/<i>: small edits of the same article: flagged, archived in full, kept from the index.
    near = [f"{base}/near/{i}" for i in range(1, 5)]
    assert all(kinds[u] == "response" for u in near)
    assert stat(result, "dedup/near") >= 3  # small edits of one article: most, if not all, within distance 3
    assert stat(result, "index/skipped/near_duplicate") == stat(result, "dedup/near")
    client = redis.Redis.from_url(redis_server.url)
    quality = ShardKeys("content").host_quality
    assert int(client.hget(quality, f"{host_ip(0)}|d") or 0) == stat(result, "dedup/near")
    # Unrelated pages (the other hosts) are not near duplicates of anything.
    assert client.hget(quality, f"{host_ip(3)}|d") is None


def test_url_metadata_is_recorded_for_every_fetched_page(
    content_crawl: dict[str, Any], redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    web = content_crawl["web"]
    keys = ShardKeys("content")
    url = f"http://{host_ip(3)}:{web.port}/"
    record = url_record(client, "content", url)
    assert record is not None
    assert (record.status, record.observations, record.outlinks) == (200, 1, len(["/p/1", "/p/2"]))
    assert len(record.digest) == 4 and len(record.simhash8) == 8
    assert (record.url, record.host) == (url, host_ip(3))
    total = sum(client.hlen(key) for key in client.scan_iter(match=keys.urls() + "*"))
    assert total == len(fetched_urls(web))


def test_png_module_stores_images_and_nothing_else_changes(content_crawl: dict[str, Any]) -> None:
    found = records(content_crawl["warcs"][0].read_bytes())
    pngs = [(kind, r) for kind, uri, r, body in found
            if kind in ("response", "revisit") and uri.endswith("/img/logo.png")]
    assert sorted(kind for kind, _ in pngs) == ["response", "revisit"]  # one per image host, the same bytes
    assert all(r.http_headers.get_header("Content-Type") == "image/png" for _, r in pngs)
    # The JPEG is not fetched: only the PNG module's type was enabled.
    assert not [e for e in content_crawl["entries"] if e.path.endswith(".jpg")]


def test_without_the_png_module_images_are_not_fetched(
    mockweb_factory: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    scenario = tmp_path / "scenario.json"
    scenario.write_text(json.dumps({"traps": {"0": "images"}}))
    web = mockweb_factory(WebSpec(hosts=1, sizes="uniform:2", cross=0, scenario=str(scenario)))
    result = run_crawl("-a", f"urls={web.url(0)}",
                       settings={"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "no-png",
                                 "CRAWL_DATA_DIR": tmp_path / "data", "FRONTIER_MIN_DELAY": 0})
    assert result.returncode == 0, result.stderr[-2000:]
    assert not [e for e in web.entries() if "/img/" in e.path]
    assert {e.path for e in web.entries()} == {"/robots.txt", "/", "/p/1"}


def test_a_killed_writer_leaves_a_file_that_is_recovered(
    mockweb_factory: Any, redis_server: RedisServer, tmp_path: Path
) -> None:
    web = mockweb_factory(WebSpec(hosts=10, sizes="uniform:30", fanout=3, nav=1, cross=1, latency_ms=(10,)))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(web.url(h) + "\n" for h in range(10)))
    settings = {"REDIS_URL": redis_server.url, "FRONTIER_CRAWL_ID": "recover", "CRAWL_DATA_DIR": tmp_path / "data",
                "FRONTIER_MIN_DELAY": 0.02, "FRONTIER_LEASE_TIMEOUT": 2}
    process = subprocess.Popen(crawl_command("-a", f"seeds={seeds}", settings=settings), cwd=ROOT, env=crawl_env(),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    warc_dir = tmp_path / "data" / "recover" / "warc"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        opened = list(warc_dir.glob("*.open"))
        if opened and opened[0].stat().st_size > 20_000:
            break
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert list(warc_dir.glob("*.warc.gz.open"))
    result = run_crawl("-a", f"seeds={seeds}", settings=settings)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Recovered 1 unfinished WARC files" in result.stderr
    files = sorted(warc_dir.glob("*.warc.gz"))
    assert len(files) == 2 and not list(warc_dir.glob("*.open"))
    archived = []
    for path in files:
        warc_check(path)
        archived += [uri for kind, uri, _, _ in records(path.read_bytes()) if kind in ("response", "revisit")]
    # Every page is archived; only leases in flight at the kill were fetched twice: a host has one lease
    # at a time (FRONTIER_CONCURRENCY_PER_KEY 1; its robots.txt too, which is archived), so at most one
    # answer per host (10 hosts) was archived and not acked when the worker died.
    assert set(archived) == answered_urls(web)
    assert len(archived) - len(set(archived)) <= 10


def test_gzip_members_one_per_record(content_crawl: dict[str, Any]) -> None:
    data = content_crawl["warcs"][0].read_bytes()
    members = position = 0
    while position < len(data):
        member = zlib.decompressobj(31)
        member.decompress(data[position:])
        assert member.eof
        position = len(data) - len(member.unused_data)
        members += 1
    assert members == len(records(data))
