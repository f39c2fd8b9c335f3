"""``scrapy frontier``: look at and act on a crawl's frontier without running a crawl.

Subcommands:

``dead-letters [--requeue] [--limit N]``
    List the URLs that ran out of retries (host, error class, time, message),
    or move them all back into the queues with their retry counters reset.

The crawl is chosen by ``FRONTIER_CRAWL_ID`` (default ``web``) and the Redis
by ``REDIS_URL``; without it, the crawl's embedded Redis (in its job
directory) is started for the command and stopped after.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import TYPE_CHECKING

import msgpack
from redis.exceptions import RedisError
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from crawler.exceptions import CodecError, ConfigurationError, CrawlerError
from crawler.frontier.codec import without_meta
from crawler.frontier.config import FrontierConfig
from crawler.frontier.shards import ShardRouter
from crawler.frontier.store import RedisFrontier
from crawler.middlewares.retry import RETRY_META, THROTTLED_META
from crawler.redisconn.config import RedisConfig
from crawler.redisconn.provider import RedisProvider

if TYPE_CHECKING:
    import argparse


class Command(ScrapyCommand):
    requires_project = True
    requires_crawler_process = False

    def syntax(self) -> str:
        return "dead-letters [--requeue] [--limit N]"

    def short_desc(self) -> str:
        return "Inspect or act on a crawl's frontier (dead letters)"

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--requeue", action="store_true", help="move dead letters back into the queues")
        parser.add_argument("--limit", type=int, default=1000, help="at most this many dead letters")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if args != ["dead-letters"]:
            raise UsageError("expected a subcommand: dead-letters")
        try:
            asyncio.run(self._run(opts))
        except (ConfigurationError, CrawlerError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            self.exitcode = 2
        except (RedisError, OSError) as exc:
            print(f"error: Redis: {exc}", file=sys.stderr)
            self.exitcode = 2

    async def _run(self, opts: argparse.Namespace) -> None:
        assert self.settings is not None
        crawl_id = str(self.settings.get("FRONTIER_CRAWL_ID") or "web")
        config = FrontierConfig.from_settings(self.settings, crawl_id)
        redis_config = RedisConfig.from_settings(self.settings, crawl_id)
        router = ShardRouter.from_settings(self.settings, crawl_id)
        if redis_config.url is None and not redis_config.embedded_dir.is_dir():
            raise ConfigurationError(
                "FRONTIER_CRAWL_ID", f"no crawl data for {crawl_id!r} in {redis_config.embedded_dir}"
            )
        provider = RedisProvider(redis_config)
        client = await provider.client()
        try:
            total = 0
            for keys in router.keys:
                frontier = RedisFrontier(client, keys, config)
                await frontier.load_scripts()
                letters = await frontier.dead_letters(opts.limit - total)
                total += len(letters)
                if not opts.requeue:
                    for letter in letters:
                        url_text = _url_of(letter.blob)
                        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(letter.died_at))
                        print(f"{when}\t{letter.error}\t{url_text}\t{letter.message}")
                elif letters:
                    entries = []
                    for letter in letters:
                        try:
                            entries.append(
                                (letter.request_id, without_meta(letter.blob, (RETRY_META, THROTTLED_META)))
                            )
                        except CodecError:
                            entries.append((letter.request_id, b""))
                    revived = await frontier.revive(entries)
                    print(f"requeued {revived} dead letters in crawl {crawl_id!r}"
                          + (f" (shard {keys.shard})" if router.count > 1 else ""))
                await frontier.close()
                if total >= opts.limit:
                    break
            if not total:
                print(f"no dead letters in crawl {crawl_id!r}")
            elif not opts.requeue:
                print(f"{total} dead letters in crawl {crawl_id!r}")
        finally:
            await provider.close()


def _url_of(blob: bytes) -> str:
    try:
        fields = msgpack.unpackb(blob, raw=False)
        return str(fields[1])
    except (ValueError, IndexError, TypeError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return "(unreadable request)"
