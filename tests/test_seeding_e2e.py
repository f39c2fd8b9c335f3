"""Seed lists of any size: `scrapy frontier seed` streams a file of a million URLs into a real redis-server,
in bounded batches, and a run interrupted mid-way is finished by running the same command again."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from crawler.crawlstate.keys import ShardKeys
from tests.conftest import ROOT, RedisServer, crawl_command, crawl_env

SEEDS = 1_000_000


def write_seeds(path: Path, count: int) -> Path:
    """``count`` distinct URLs (~90 characters) over 20,000 hosts of 50 registered domains (every budget
    holds), and four lines that are not seeds: a comment, a blank line, an FTP URL and a malformed one."""
    with path.open("w") as out:
        out.write("# a previous crawl's URLs\n\n")
        for i in range(count):
            out.write(f"http://site{i % 20_000}.example{i % 50}.com/archive/{i // 20_000}/articles/"
                      f"item-{i}.html?ref=seedlist&n={i * 7}\n")
            if i == count // 2:
                out.write("ftp://files.example.com/pub/\nhttp://exa mple.com/\n")
    return path


def seed_command(seeds: Path, redis_url: str, crawl_id: str) -> list[str]:
    return [*crawl_command()[:3], "frontier", "seed", str(seeds), "--json", "-s", f"REDIS_URL={redis_url}",
            "-s", f"FRONTIER_CRAWL_ID={crawl_id}"]


def test_a_million_seeds_stream_in_and_a_rerun_after_an_interruption_adds_only_the_rest(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path
) -> None:
    seeds = write_seeds(tmp_path / "seeds.txt", SEEDS)
    client = redis_server.client()
    queued = ShardKeys(crawl_id).queued
    # The first run is killed once a good part is in (SIGKILL: no chance to finish a batch).
    first = subprocess.Popen(seed_command(seeds, redis_server.url, crawl_id), cwd=ROOT, env=crawl_env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        while int(client.get(queued) or 0) < SEEDS // 4:
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            assert time.monotonic() < deadline, "the first run did not get a quarter in"
            time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    before = int(client.get(queued) or 0)
    assert SEEDS // 4 <= before < SEEDS, before
    # The same command again: what the first run stored is known, the rest is added; nothing twice.
    second = subprocess.run(seed_command(seeds, redis_server.url, crawl_id), cwd=ROOT, env=crawl_env(),
                            capture_output=True, text=True, timeout=900, check=False)
    assert second.returncode == 0, second.stderr[-3000:]
    report: dict[str, Any] = json.loads(second.stdout)
    assert report["added"] + report["known"] == SEEDS
    assert report["known"] >= before  # (a batch the kill cut short may be in Redis, not in the count)
    assert report["dropped"] == {"scheme": 1, "malformed": 1}, report["dropped"]
    assert report["lines"] == SEEDS + 4
    assert int(client.get(queued) or 0) == SEEDS
    assert int(client.get(ShardKeys(crawl_id).seen_count) or 0) == SEEDS


def test_on_a_terminal_seeding_shows_its_progress(redis_server: RedisServer, crawl_id: str, tmp_path: Path) -> None:
    """Its standard error a terminal (a pty), the command rewrites one progress line in place."""
    import os
    import pty

    seeds = write_seeds(tmp_path / "seeds.txt", 25_000)
    leader, follower = pty.openpty()
    try:
        result = subprocess.run(seed_command(seeds, redis_server.url, crawl_id), cwd=ROOT, env=crawl_env(),
                                stdout=subprocess.PIPE, stderr=follower, timeout=300, check=False)
        os.close(follower)
        follower = -1
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    assert result.returncode == 0
    assert json.loads(result.stdout)["added"] == 25_000
    assert re.search(rb"\r[\d,]+ lines, [\d.]+ MiB: [\d,]+ added, [\d,]+ known, [\d,]+ dropped \([\d,]+ lines/s\)",
                     shown), shown[-500:]


def test_a_crawls_seeds_file_is_handed_to_the_frontier_as_it_is_read(
    redis_server: RedisServer, crawl_id: str, tmp_path: Path, mockweb_factory: Any
) -> None:
    """`scrapy crawl web -a seeds=FILE` with 60,000 seeds: every one reaches the shared frontier (its seen
    set counts them) while the crawl runs politely; drained, the worker closes."""
    from support.mockweb import WebSpec, host_ip

    web = mockweb_factory(WebSpec(hosts=300, sizes="uniform:2", fanout=0, nav=0, cross=0))
    seeds = tmp_path / "seeds.txt"
    with seeds.open("w") as out:
        for i in range(60_000):
            out.write(f"http://{host_ip(i % 300)}:{web.port}/p/{i // 300}?seed={i}\n")
    command = crawl_command("-a", f"seeds={seeds}", settings={"REDIS_URL": redis_server.url,
                                                              "FRONTIER_CRAWL_ID": crawl_id})
    crawl = subprocess.Popen(command, cwd=ROOT, env=crawl_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
    client = redis_server.client()
    seen = ShardKeys(crawl_id).seen_count
    try:
        deadline = time.monotonic() + 300
        while int(client.get(seen) or 0) < 60_000:
            assert crawl.poll() is None, (crawl.stderr.read() if crawl.stderr else "")[-3000:]
            assert time.monotonic() < deadline, f"{client.get(seen)} seeds in"
            time.sleep(0.2)
        drained = subprocess.run([*crawl_command()[:3], "frontier", "drain", "-s", f"REDIS_URL={redis_server.url}",
                                  "-s", f"FRONTIER_CRAWL_ID={crawl_id}"], cwd=ROOT, env=crawl_env(),
                                 capture_output=True, text=True, timeout=60, check=False)
        assert drained.returncode == 0, drained.stderr[-2000:]
        _, stderr = crawl.communicate(timeout=120)
    finally:
        if crawl.poll() is None:
            crawl.kill()
    assert crawl.returncode == 0, stderr[-3000:]
    assert int(client.get(seen) or 0) == 60_000
    from support.mockweb import politeness

    report = politeness(web.entries(), min_gap=1.0)  # FRONTIER_MIN_DELAY, as shipped
    assert report.overlaps == 0 and report.short_gaps == 0, report
