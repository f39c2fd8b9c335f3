"""Where finished WARC files go (``WARC_STORE``): a local directory, or S3 (boto3).

* A plain path or ``file://`` URL: files are written there directly (the
  spool is the store).
* ``s3://bucket/prefix``: files are written to a local spool
  (``crawl-data/<crawl id>/warc-spool/``), then uploaded by a background
  thread (multipart above 8 MiB), each ``.warc.gz`` with its ``.cdxj``. A
  file is deleted locally only after S3 reports the object with the same
  size. If S3 is unreachable the files stay spooled and the upload is retried
  with exponential backoff (``WARC_UPLOAD_RETRY_DELAY`` doubling up to
  ``WARC_UPLOAD_RETRY_MAX_DELAY``); finished files found in the spool at
  start-up (a previous run's) are uploaded first. Nothing is lost while the
  disk holds.

Endpoint, region and credentials: ``WARC_S3_ENDPOINT_URL`` (any S3-compatible
store), else Scrapy's ``AWS_ENDPOINT_URL``; ``AWS_REGION_NAME``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN`` when
set, else boto3's usual chain (environment, config files, instance roles).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_float
from crawler.warc.writer import ClosedFile

logger = logging.getLogger(__name__)

MULTIPART_CHUNK = 8 * 1024 * 1024


@dataclass(frozen=True)
class WarcStoreConfig:
    #: Local directory where files are written (the store itself, or the S3 spool).
    spool: Path
    bucket: str | None = None
    key_prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    session_token: str | None = None
    retry_delay: float = 1.0
    retry_max_delay: float = 300.0
    #: Seconds an S3 request may take (connect: at most 10 s of it).
    timeout: float = 60.0

    @property
    def is_s3(self) -> bool:
        return self.bucket is not None

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.key_prefix}" if self.is_s3 else str(self.spool)

    @classmethod
    def from_settings(cls, settings: BaseSettings, job_dir: Path) -> WarcStoreConfig:
        store = str(settings.get("WARC_STORE") or "")
        retry = get_float(settings, "WARC_UPLOAD_RETRY_DELAY", minimum=0.01)
        retry_max = get_float(settings, "WARC_UPLOAD_RETRY_MAX_DELAY", minimum=0.01)
        timeout = get_float(settings, "WARC_UPLOAD_TIMEOUT", minimum=0.1)
        if store.startswith("s3://"):
            parts = urlsplit(store)
            if not parts.netloc:
                raise ConfigurationError("WARC_STORE", f"{store!r} names no bucket (s3://bucket/prefix)")
            return cls(
                spool=job_dir / "warc-spool",
                bucket=parts.netloc,
                key_prefix=parts.path.strip("/"),
                endpoint_url=settings.get("WARC_S3_ENDPOINT_URL") or settings.get("AWS_ENDPOINT_URL") or None,
                region=settings.get("AWS_REGION_NAME") or None,
                access_key=settings.get("AWS_ACCESS_KEY_ID") or None,
                secret_key=settings.get("AWS_SECRET_ACCESS_KEY") or None,
                session_token=settings.get("AWS_SESSION_TOKEN") or None,
                retry_delay=retry,
                retry_max_delay=retry_max,
                timeout=timeout,
            )
        if "://" in store and not store.startswith("file://"):
            raise ConfigurationError("WARC_STORE", f"{store!r}: expected a directory, file:///dir or s3://bucket/prefix")
        path = Path(urlsplit(store).path if store.startswith("file://") else store) if store else job_dir / "warc"
        return cls(spool=path, retry_delay=retry, retry_max_delay=retry_max)


class Uploader:
    """A background thread that moves finished files to S3, never losing one."""

    def __init__(self, config: WarcStoreConfig, stats: Any) -> None:
        self.config = config
        self.stats = stats
        self._queue: queue.Queue[ClosedFile | None] = queue.Queue()
        self._pending = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, leftovers: list[ClosedFile]) -> None:
        for closed in leftovers:
            self.put(closed)
        self._thread = threading.Thread(target=self._run, name="warc-uploader", daemon=True)
        self._thread.start()

    def put(self, closed: ClosedFile) -> None:
        with self._lock:
            self._pending += 1
        self._queue.put(closed)

    @property
    def pending(self) -> int:
        return self._pending

    def close(self, timeout: float) -> int:
        """Wait up to ``timeout`` s for the queue to drain; returns the files left spooled."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending and time.monotonic() < deadline:
                self._idle.wait(min(0.2, max(deadline - time.monotonic(), 0.01)))
            left = self._pending
        self._stop.set()
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(timeout=5)
        return left

    def _client(self) -> Any:
        return s3_client(self.config)

    def _run(self) -> None:
        client = None
        while not self._stop.is_set():
            closed = self._queue.get()
            if closed is None:
                return
            delay = self.config.retry_delay
            while not self._stop.is_set():
                try:
                    if client is None:
                        client = self._client()
                    self._upload(client, closed)
                    break
                except Exception as exc:
                    self.stats.inc_value("warc/upload_errors")
                    logger.warning("WARC upload of %s failed (%s: %s); retrying in %.1f s",
                                   closed.warc.name, type(exc).__name__, exc, delay)
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.config.retry_max_delay)
            else:
                return
            with self._lock:
                self._pending -= 1
                self._idle.notify_all()

    def _upload(self, client: Any, closed: ClosedFile) -> None:
        from boto3.s3.transfer import TransferConfig

        transfer = TransferConfig(multipart_threshold=MULTIPART_CHUNK, multipart_chunksize=MULTIPART_CHUNK)
        for path in (closed.index, closed.warc):  # the index first: a WARC is never visible without it
            if not path.exists():
                continue
            key = f"{self.config.key_prefix}/{path.name}" if self.config.key_prefix else path.name
            size = path.stat().st_size
            client.upload_file(str(path), self.config.bucket, key, Config=transfer)
            stored = client.head_object(Bucket=self.config.bucket, Key=key)["ContentLength"]
            if stored != size:
                raise OSError(f"S3 holds {stored} bytes of {key}, expected {size}")
        for path in (closed.warc, closed.index):
            path.unlink(missing_ok=True)
        self.stats.inc_value("warc/files_uploaded")
        logger.info("Uploaded %s to s3://%s/%s", closed.warc.name, self.config.bucket, self.config.key_prefix)


def spooled_files(spool: Path) -> list[ClosedFile]:
    """Finished files waiting in a spool directory (a previous run's uploads)."""
    found = []
    for warc in sorted(spool.glob("*.warc.gz")):
        found.append(ClosedFile(warc, warc.with_name(warc.name.removesuffix(".warc.gz") + ".cdxj")))
    return found


def s3_client(config: WarcStoreConfig) -> Any:
    """A boto3 S3 client for the store's endpoint, region and credentials (boto3's chain otherwise)."""
    import boto3
    from botocore.config import Config

    session = boto3.session.Session(
        aws_access_key_id=config.access_key,
        aws_secret_access_key=config.secret_key,
        aws_session_token=config.session_token,
        region_name=config.region,
    )
    return session.client(
        "s3", endpoint_url=config.endpoint_url,
        config=Config(
            retries={"max_attempts": 2, "mode": "standard"},
            connect_timeout=min(10.0, config.timeout),
            read_timeout=config.timeout,
        ),
    )
