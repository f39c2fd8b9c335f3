"""Every fetch into WARC files (``WARC_*``), off the event loop.

Per item: a request record and a response record (or a revisit for a payload
already archived, see the dedup pipeline), plus a metadata record (outlinks,
fetch time; ``WARC_METADATA_RECORDS``). Records are built, gzipped and
appended to the open file on the event loop (appends into the page cache:
a thread hand-off per batch cost more CPU than the writes); the item
completes (and its URL's lease is acked) only after its records are written
and flushed. A file that reaches ``WARC_MAX_SIZE`` is finished (``fsync``,
CDXJ index, rename) by a worker thread, then goes to the store
(:mod:`crawler.warc.uploads`).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scrapy.exceptions import NotConfigured

import crawler
from crawler.archiving import Archive
from crawler.items import PageItem
from crawler.redisconn.provider import crawl_id_for
from crawler.settings_parsing import get_bool, get_float, get_int, setting
from crawler.warc.gzip import Gzip
from crawler.warc.records import Fetch, RecordBuilder, RevisitProfile
from crawler.warc.uploads import Uploader, WarcStoreConfig, spooled_files
from crawler.warc.writer import ClosedFile, FullFile, WarcFileWriter, recover_open_files

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def job_dir(crawler: Crawler) -> Path:
    settings = crawler.settings
    jobdir = settings.get("JOBDIR")
    if jobdir:
        return Path(jobdir)
    return Path(setting(settings, "CRAWL_DATA_DIR")) / crawl_id_for(crawler)


class WarcPipeline:
    def __init__(self, crawler: Crawler, store: WarcStoreConfig, max_size: int, metadata: bool,
                 close_timeout: float, gzip: Gzip | None = None) -> None:
        self.crawler = crawler
        self.store = store
        self.max_size = max_size
        self.metadata = metadata
        self.close_timeout = close_timeout
        self.gzip = gzip or Gzip()
        self.stats = crawler.stats
        self.builder = RecordBuilder()
        self.writer: WarcFileWriter | None = None
        self.uploader: Uploader | None = None
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="warc-writer")
        #: Full files being finished in the thread.
        self._finishing: set[asyncio.Future[ClosedFile]] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not get_bool(settings, "WARC_ENABLED"):
            raise NotConfigured
        pipeline = cls(
            crawler,
            WarcStoreConfig.from_settings(settings, job_dir(crawler)),
            get_int(settings, "WARC_MAX_SIZE", minimum=1024),
            get_bool(settings, "WARC_METADATA_RECORDS"),
            get_float(settings, "WARC_UPLOAD_CLOSE_TIMEOUT", minimum=0.0),
            Gzip.from_settings(settings),
        )
        Archive.for_crawler(crawler).join(pipeline)
        return pipeline

    def _warcinfo(self) -> dict[str, Any]:
        settings = self.crawler.settings
        return {
            "software": f"crawler/{crawler.__version__} (Scrapy)",
            "hostname": socket.gethostname(),
            "crawl-id": crawl_id_for(self.crawler),
            "http-header-user-agent": settings.get("USER_AGENT"),
            "robots": "obey (RFC 9309)" if get_bool(settings, "ROBOTS_ENABLED") else "ignore",
            "format": "WARC File Format 1.1",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        }

    async def open_spider(self) -> None:
        loop = asyncio.get_running_loop()
        prefix = str(self.crawler.settings.get("WARC_PREFIX") or crawl_id_for(self.crawler))
        self.writer = WarcFileWriter(
            self.store.spool, prefix, self.max_size, self.builder, self._warcinfo(), gzip=self.gzip
        )
        recovered = await loop.run_in_executor(self._thread, recover_open_files, self.store.spool)
        if recovered:
            logger.info("Recovered %d unfinished WARC files in %s", len(recovered), self.store.spool)
        if self.store.is_s3:
            self.uploader = Uploader(self.store, self.stats)
            leftovers = await loop.run_in_executor(self._thread, spooled_files, self.store.spool)
            self.uploader.start(leftovers)
        logger.info("WARC files: %s (spool %s, rotation at %d bytes)", self.store.describe(), self.store.spool,
                    self.max_size)

    async def process_item(self, item: Any) -> Any:
        if not isinstance(item, PageItem) or self.writer is None:
            return item
        fetch = Fetch(
            url=item.url, method=item.method, request_headers=item.request_headers, status=item.status,
            reason=item.reason, protocol=item.protocol, response_headers=item.headers, payload=item.body,
            fetched_at=item.fetched_at, original_encoding=item.original_encoding, ip_address=item.ip_address,
            outlinks=item.outlinks, fetch_duration=item.fetch_duration, revisit_of=item.duplicate_of,
            payload_digest=item.payload_digest, rendered=item.rendered_html,
        )
        if item.revalidated is not None:
            fetch.revisit_of = (item.url, item.revalidated)
            fetch.revisit_profile = RevisitProfile.SERVER_NOT_MODIFIED
        encoded = self.writer.encode(self.builder.fetch_records(fetch, with_metadata=self.metadata))
        for full in self.writer.fill([encoded]):
            self._finish(full)
        self.stats.inc_value("warc/revisit_records" if fetch.revisit_of else "warc/response_records")
        return item

    def _finish(self, full: FullFile) -> None:
        """Finish a full file in the writer thread (fsync, index, rename), then hand it to the store."""
        future = asyncio.get_running_loop().run_in_executor(self._thread, full.finish)
        self._finishing.add(future)
        future.add_done_callback(self._finished)

    def _finished(self, future: asyncio.Future[ClosedFile]) -> None:
        self._finishing.discard(future)
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            # The records were flushed to the spool file: the file is recovered at the next start.
            self.stats.inc_value("warc/finish_errors")
            logger.error("Could not finish a WARC file (it is recovered at the next start): %r", exc)
            return
        self._hand_over([future.result()])

    def _hand_over(self, closed: list[ClosedFile]) -> None:
        for finished in closed:
            self.stats.inc_value("warc/files_closed")
            if self.uploader is not None:
                self.uploader.put(finished)

    async def close_spider(self) -> None:
        loop = asyncio.get_running_loop()
        if self._finishing:
            await asyncio.gather(*self._finishing, return_exceptions=True)
        if self.writer is not None:
            self._hand_over(await loop.run_in_executor(self._thread, self.writer.close_if_open))
        if self.uploader is not None:
            left = await loop.run_in_executor(None, self.uploader.close, self.close_timeout)
            if left:
                logger.warning("%d WARC files are still spooled in %s; they are uploaded at the next start",
                               left, self.store.spool)
        self._thread.shutdown(wait=True)


__all__ = ["WarcPipeline", "job_dir"]
