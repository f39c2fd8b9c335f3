"""``scrapy frontier``: look at and act on a crawl's frontier without running a crawl.

Subcommands::

    scrapy frontier stats                     the crawl's figures, from Redis
    scrapy frontier seed FILE|URL...          add seeds (a file: one URL per line)
    scrapy frontier hosts [--top N]           the busiest hosts
    scrapy frontier dead-letters [--requeue] [--limit N]
    scrapy frontier drain [--resume]          stop handing out URLs: workers finish and close
    scrapy frontier reset --crawl-id X --yes  delete one crawl's keys (its own namespace only)
    scrapy frontier report [--out FILE]       write the crawl report
    scrapy frontier render [on|off|auto HOST...]  render hosts (or domains) always / never /
                                              as detected; alone: list every mark
    scrapy frontier url URL                   what happened to one URL, and why
    scrapy frontier host HOST|URL             one host's state, delay, robots.txt and counts, and why

``--json`` on any of them prints one JSON document on stdout instead of text
(the schema is in docs/operating.md); a mistake is then ``{"error": ...}`` on
stdout as well as the line on stderr.

The crawl is chosen by ``--crawl-id``, else ``FRONTIER_CRAWL_ID``, else the
project's spider if it has exactly one (a crawl's id is its spider's name:
``web`` in this repository's project); the Redis by ``REDIS_URL`` / ``REDIS_CLUSTER_NODES``; without them,
the crawl's embedded Redis (in its job directory) is started for the command
and stopped after. Mistakes (no such crawl, unreachable Redis) are one line
on stderr and exit status 2.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from redis.exceptions import RedisError
from scrapy import Spider
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError
from scrapy.spiderloader import get_spider_loader

from crawler.crawlstate.compact import bucket_sizes
from crawler.crawlstate.shards import ShardRouter, check_crawl_metadata
from crawler.downloader.dns import resolver_from_settings
from crawler.exceptions import CodecError, ConfigurationError, CrawlerError
from crawler.frontier import (
    FrontierConfig,
    Intake,
    PriorityLevels,
    RedisFrontier,
    RequestCodec,
    SeedReport,
    crawl_keys,
    crawl_sizes,
    delete_keys,
    seed,
    seed_lines,
    shard_frontiers,
    stored_url,
    terminal_progress,
    without_meta,
)
from crawler.ops.hostanswer import host_answer, host_lines
from crawler.ops.lookup import Lookup
from crawler.ops.stats import crawl_stats
from crawler.ops.timeline import Timeline
from crawler.ops.urlanswer import url_answer, url_lines
from crawler.ops.view import describe_next, top_hosts
from crawler.policy.politeness import PolitenessKey
from crawler.policy.priority import PriorityPolicy
from crawler.redisconn.config import RedisConfig
from crawler.redisconn.outage import OutagePolicy
from crawler.redisconn.provider import RedisProvider
from crawler.render.marks import Mark
from crawler.render.marks import force as force_render
from crawler.render.marks import listing as render_marks
from crawler.requestmeta import RETRY_META, THROTTLED_META
from crawler.secrets import install as install_redaction
from crawler.secrets import redact
from crawler.seeds import load_seeds
from crawler.settings_parsing import get_int, setting
from crawler.urls.filters import FilterConfig, UrlFilter

if TYPE_CHECKING:
    import argparse

    from crawler.redisconn.link import AnyRedis

SUBCOMMANDS = ("stats", "seed", "hosts", "dead-letters", "drain", "reset", "report", "render", "url", "host")
#: Subcommands that take exactly one argument.
_ONE_ARGUMENT = ("url", "host")
#: ``scrapy frontier render on|off|auto``: an operator's mark, or back to detection.
RENDER_ACTIONS = {"on": Mark.ON, "off": Mark.OFF, "auto": None}


class _Counts(dict[str, int]):
    """Counters with the stats collector's ``inc_value`` (a command has no crawler's stats)."""

    def inc_value(self, key: str, count: int = 1, start: int = 0) -> None:
        self[key] = self.get(key, start) + count


@dataclass
class Output:
    """A subcommand's answer: a JSON document (``--json``), and the same as lines of text."""

    document: dict[str, Any]
    lines: list[str] = field(default_factory=list)


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return f"{{{'|'.join(SUBCOMMANDS)}}} [options]"

    def short_desc(self) -> str:
        return ("Inspect or act on a crawl's frontier (stats, url, host, seed, hosts, dead-letters, drain, reset, "
                "report, render)")

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--crawl-id", dest="crawl_id",
                            help="the crawl (default: FRONTIER_CRAWL_ID, or the project's spider if it has one)")
        parser.add_argument("--requeue", action="store_true", help="dead-letters: move them back into the queues")
        parser.add_argument("--limit", type=int, default=1000, help="dead-letters: at most this many")
        parser.add_argument("--top", type=int, default=20, help="hosts: how many")
        parser.add_argument("--resume", action="store_true", help="drain: hand out URLs again")
        parser.add_argument("--yes", action="store_true", help="reset: really delete")
        parser.add_argument("--out", help="report: the HTML file to write")
        parser.add_argument("--json", action="store_true", help="print one JSON document (schema: docs/operating.md)")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in SUBCOMMANDS:
            raise UsageError(f"expected a subcommand: {', '.join(SUBCOMMANDS)}")
        if args[0] == "render" and len(args) > 1 and (args[1] not in RENDER_ACTIONS or len(args) < 3):
            raise UsageError("render takes no arguments (list the marks), or on|off|auto and hosts or domains")
        if args[0] in _ONE_ARGUMENT and len(args) != 2:
            raise UsageError(f"{args[0]} takes one argument: {'a URL' if args[0] == 'url' else 'a host or URL'}")
        if args[0] not in ("seed", "render", *_ONE_ARGUMENT) and len(args) > 1:
            raise UsageError(f"{args[0]} takes no arguments")
        if args[0] == "seed" and len(args) < 2:
            raise UsageError("seed needs a seeds file or URLs")
        assert self.settings is not None
        install_redaction(self.settings)
        self.as_json = bool(opts.json)
        try:
            output = asyncio.run(self._run(args[0], args[1:], opts))
        except (ConfigurationError, CrawlerError) as exc:
            self._fail(redact(str(exc)))
            return
        except (RedisError, OSError) as exc:
            self._fail(f"Redis: {redact(str(exc))}")
            return
        if self.as_json:
            print(json.dumps(output.document, indent=2, sort_keys=True, default=str))
        else:
            for line in output.lines:
                print(line)

    def _fail(self, message: str) -> None:
        print(f"error: {message}", file=sys.stderr)
        if self.as_json:
            print(json.dumps({"error": message}))
        self.exitcode = 2

    async def _run(self, name: str, args: list[str], opts: argparse.Namespace) -> Output:
        assert self.settings is not None
        crawl_id = self._crawl_id(opts)
        self.settings.set("FRONTIER_CRAWL_ID", crawl_id, priority="cmdline")
        config = FrontierConfig.from_settings(self.settings, crawl_id)
        redis_config = RedisConfig.from_settings(self.settings, crawl_id)
        router = ShardRouter.from_settings(self.settings, crawl_id, cluster=bool(redis_config.cluster_nodes))
        if redis_config.url is None and not redis_config.embedded_dir.is_dir() and name != "seed":
            raise ConfigurationError(
                "FRONTIER_CRAWL_ID", f"no crawl data for {crawl_id!r} in {redis_config.embedded_dir}"
            )
        # An operator's command says at once that Redis is unreachable; a crawl waits an outage out.
        provider = self.provider = RedisProvider(redis_config, OutagePolicy(timeout=0), router=router)
        client = await provider.client()
        try:
            if name not in ("seed", "reset") and not await client.exists(router.crawl_keys.crawl_key("meta")):
                raise ConfigurationError("FRONTIER_CRAWL_ID", f"no crawl {crawl_id!r} in Redis at {provider.url}")
            handler = getattr(self, "_" + name.replace("-", "_"))
            output: Output = await handler(client, router, config, args, opts)
            output.document.setdefault("crawl", crawl_id)
            return output
        finally:
            await provider.close()

    def _crawl_id(self, opts: argparse.Namespace) -> str:
        """``--crawl-id``, else ``FRONTIER_CRAWL_ID``, else the project's spider when it has exactly
        one (a crawl's id is its spider's name unless told otherwise)."""
        assert self.settings is not None
        if opts.crawl_id:
            return str(opts.crawl_id)
        if self.settings.get("FRONTIER_CRAWL_ID"):
            return str(self.settings.get("FRONTIER_CRAWL_ID"))
        names = sorted(get_spider_loader(self.settings).list())
        if len(names) == 1:
            return names[0]
        which = f"this project has the spiders {', '.join(names)}" if names else "no spider in this project"
        raise ConfigurationError("--crawl-id", f"{which}: name the crawl with --crawl-id (a crawl's id is its "
                                 "spider's name, unless FRONTIER_CRAWL_ID or -a crawl_id= gave another)")

    # -- subcommands -----------------------------------------------------------------

    async def _stats(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                     opts: argparse.Namespace) -> Output:
        document, lines = await crawl_stats(client, router, self.provider.config.memory_limit)
        return Output(document, lines)

    async def _seed(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                    opts: argparse.Namespace) -> Output:
        """Stream the seed files (and URLs) into the frontier in bounded batches (:mod:`crawler.frontier.seeding`)."""
        assert self.settings is not None
        for arg in args:
            if not Path(arg).is_file():
                load_seeds(None, arg)  # URLs given here are checked first: one line for a mistyped one
        await check_crawl_metadata(client, router)
        sizes = await crawl_sizes(client, router, self.settings, self.provider.config.memory_limit)
        frontiers = shard_frontiers(client, router, replace(config, inlink_cells=sizes.inlink_cells), sizes.seen)
        buckets = await bucket_sizes(client, router.keys[0].leases, external=self.provider.embedded is None)
        for frontier in frontiers:
            frontier.sizes = buckets
            await frontier.prepare()
        counts = _Counts()
        # The crawl's own intake: the same filters, scoring, routing (and, with
        # FRONTIER_POLITENESS_KEY = "ip", address groups) as a worker's.
        intake = Intake(
            router, UrlFilter(FilterConfig.from_settings(self.settings)), PriorityLevels(config.levels),
            counts,  # type: ignore[arg-type]
            local_seen_size=0, priority=PriorityPolicy.from_settings(self.settings),
            resolver=resolver_from_settings(self.settings, counts)  # type: ignore[arg-type]
            if config.politeness_key is PolitenessKey.IP else None,
        )
        intake.bind(RequestCodec(Spider("web")), frontiers)
        report = SeedReport()
        progress = terminal_progress(sys.stderr)
        try:
            await seed(intake, counts, frontiers, seed_lines(args, report), report, progress)
        finally:
            if progress is not None:
                sys.stderr.write("\n")
            for frontier in frontiers:
                await frontier.close()
        document = {"added": report.added, "known": report.known, "dropped": dict(report.dropped),
                    "lines": report.lines, "seconds": round(report.seconds, 3)}
        return Output(document, [report.summary(router.crawl_id)])

    async def _hosts(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                     opts: argparse.Namespace) -> Output:
        rows = await top_hosts(client, router, max(1, opts.top))
        now = time.time()
        document = {"hosts": [
            {"host": row.host, "pages": row.pages, "queued": row.queued, "errors": row.errors,
             "near_duplicates": row.near_duplicates, "next_allowed_in_s": None if row.next_allowed is None
             else round(row.next_allowed - now, 3), "crawl_delay_floor": row.delay,
             "error_rate": round(row.error_rate, 4), "near_duplicate_rate": round(row.near_duplicate_rate, 4)}
            for row in rows
        ]}
        if not rows:
            return Output(document, [f"no host fetched yet in crawl {router.crawl_id!r}"])
        width = max(len(row.host) for row in rows)
        lines = [f"{'host':<{width}}  {'pages':>8}  {'queued':>7}  {'next':>10}  {'delay':>7}  {'errors':>6}  near-dup"]
        for row in rows:
            delay = "-" if row.delay is None else f"{row.delay:g}s"
            lines.append(f"{row.host:<{width}}  {row.pages:>8,}  {row.queued:>7,}  "
                         f"{describe_next(row.next_allowed, now):>10}  {delay:>7}  {row.error_rate:>6.1%}  "
                         f"{row.near_duplicate_rate:.1%}")
        return Output(document, lines)

    async def _dead_letters(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig,
                            args: list[str], opts: argparse.Namespace) -> Output:
        total = requeued = 0
        lines: list[str] = []
        listed: list[dict[str, Any]] = []
        for keys in router.keys:
            frontier = RedisFrontier(client, keys, config)
            await frontier.load_scripts()
            letters = await frontier.dead_letters(opts.limit - total)
            total += len(letters)
            if not opts.requeue:
                for letter in letters:
                    url_text = _url_of(letter.blob, letter.host)
                    when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(letter.died_at))
                    lines.append(f"{when}\t{letter.error}\t{url_text}\t{letter.message}")
                    listed.append({"id": letter.request_id, "url": url_text, "host": letter.host,
                                   "level": letter.level, "at": when.replace(" ", "T") + "Z",
                                   "error": letter.error, "message": letter.message, "shard": keys.shard})
            elif letters:
                entries = []
                for letter in letters:
                    try:
                        entries.append((letter.request_id, without_meta(letter.blob, (RETRY_META, THROTTLED_META))))
                    except CodecError:
                        entries.append((letter.request_id, b""))
                revived = await frontier.revive(entries)
                requeued += revived
                lines.append(f"requeued {revived} dead letters in crawl {router.crawl_id!r}"
                             + (f" (shard {keys.shard})" if router.count > 1 else ""))
            await frontier.close()
            if total >= opts.limit:
                break
        if not total:
            lines.append(f"no dead letters in crawl {router.crawl_id!r}")
        elif not opts.requeue:
            lines.append(f"{total} dead letters in crawl {router.crawl_id!r}")
        document: dict[str, Any] = {"requeued": requeued} if opts.requeue else {"dead_letters": listed}
        return Output(document, lines)

    async def _drain(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                     opts: argparse.Namespace) -> Output:
        key = router.crawl_keys.crawl_key("draining")
        if opts.resume:
            await client.delete(key)
            return Output({"draining": False},
                          [f"crawl {router.crawl_id!r}: handing out URLs again (start workers to continue)"])
        await client.set(key, int(time.time()))
        return Output({"draining": True}, [
            f"crawl {router.crawl_id!r} is draining: workers finish what they hold and close within "
            f"{config.idle_poll:g} s plus their fetches in flight; nothing queued is lost "
            f"(`scrapy frontier drain --resume` to undo)"])

    async def _reset(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                     opts: argparse.Namespace) -> Output:
        if not opts.crawl_id:
            raise ConfigurationError("--crawl-id", "reset needs the crawl id spelled out: --crawl-id X --yes")
        keys = await crawl_keys(client, router.crawl_id)
        if not opts.yes:
            return Output({"keys": len(keys), "deleted": 0},
                          [f"crawl {router.crawl_id!r} has {len(keys)} keys; add --yes to delete them"])
        deleted = await delete_keys(client, keys)
        return Output({"keys": len(keys), "deleted": deleted}, [f"crawl {router.crawl_id!r}: deleted {deleted} keys"])

    async def _report(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                      opts: argparse.Namespace) -> Output:
        from crawler.report.html import write_report

        path = Path(opts.out or f"report-{router.crawl_id}.html")
        await write_report(Timeline(client, router.crawl_id), client, router, router.crawl_id, path,
                           self._lookup(router, config))
        return Output({"path": str(path)}, [f"wrote {path}"])

    async def _render(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                      opts: argparse.Namespace) -> Output:
        key = router.crawl_keys.crawl_key("render")
        if not args:
            marks = await render_marks(client, key)
            now = time.time()
            lines: list[str] = []
            listed: dict[str, dict[str, Any]] = {}
            for name, mark in marks.items():
                if mark.mark.forced:
                    lines.append(f"{name}\t{mark.mark.value} (operator)")
                    listed[name] = {"mark": mark.mark.value, "by": "operator"}
                elif mark.stands(now):
                    lines.append(f"{name}\t{mark.mark.value} (detected, for {mark.until - now:.0f} s more)")
                    listed[name] = {"mark": mark.mark.value, "by": "detection", "for_s": round(mark.until - now)}
                else:
                    lines.append(f"{name}\t{mark.mark.value} (detected, expired: sampled again)")
                    listed[name] = {"mark": mark.mark.value, "by": "detection", "for_s": 0}
            if not marks:
                lines.append(f"crawl {router.crawl_id!r}: no render marks")
            return Output({"marks": listed}, lines)
        action, names = RENDER_ACTIONS[args[0]], args[1:]
        for name in names:
            await force_render(client, key, name, action)
        what = {Mark.ON: "always rendered", Mark.OFF: "never rendered", None: "rendered as detected"}[action]
        return Output({"set": {name: args[0] for name in names}}, [
            f"crawl {router.crawl_id!r}: {', '.join(names)} {what} (workers see it within RENDER_CACHE_SECONDS)"])

    def _lookup(self, router: ShardRouter, config: FrontierConfig) -> Lookup:
        assert self.settings is not None
        jobdir = self.settings.get("JOBDIR")
        job = Path(jobdir) if jobdir else Path(setting(self.settings, "CRAWL_DATA_DIR")) / router.crawl_id
        return Lookup(self.settings, router, config, job, self.provider.config.memory_limit,
                      get_int(self.settings, "FRONTIER_PAGE_BYTES", minimum=1))

    async def _url(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                   opts: argparse.Namespace) -> Output:
        answer = await url_answer(client, self._lookup(router, config), args[0])
        return Output(answer, url_lines(answer))

    async def _host(self, client: AnyRedis, router: ShardRouter, config: FrontierConfig, args: list[str],
                    opts: argparse.Namespace) -> Output:
        answer = await host_answer(client, self._lookup(router, config), args[0])
        return Output(answer, host_lines(answer))


def _url_of(blob: bytes, host: str) -> str:
    try:
        return stored_url(blob, host)
    except CodecError:
        return "(unreadable request)"
