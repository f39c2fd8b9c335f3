"""Items produced by the crawler's spiders."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class PageItem:
    """One fetched resource (any status, any content type).

    ``headers`` keeps every response header as ``(name, value)`` pairs in the
    order received; ``body`` is the payload as the downloader delivered it
    (decompressed if it came with ``original_encoding``). ``outlinks`` are the
    absolute links found in HTML. ``canonical_url`` is the page's
    rel="canonical", normalized; ``primary`` is False when the page names
    another URL of the same registered domain as its canonical (that URL is
    crawled as the primary copy). ``text`` and ``simhash`` come from the text
    module; ``payload_digest``, ``duplicate_of`` (first capture: URL, WARC
    date) and ``near_duplicate_of`` from the dedup pipeline; ``changed``,
    ``observations``, ``changes``, ``first_fetch``, ``previous_fetch`` and
    ``inlinks`` from the URL metadata store.
    """

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    content_type: str
    fetched_at: float
    fetch_duration: float | None
    depth: int
    outlinks: list[str] = field(default_factory=list)
    redirect_to: str | None = None
    canonical_url: str | None = None
    primary: bool = True
    # -- the exchange, for the WARC records
    method: str = "GET"
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    protocol: str = "HTTP/1.1"
    reason: str = ""
    ip_address: str | None = None
    original_encoding: str | None = None
    # -- modules and pipelines
    text: str | None = None
    simhash: int | None = None
    payload_digest: str | None = None
    duplicate_of: tuple[str, str] | None = None
    #: A 304 answer to a conditional revisit: the WARC date of the capture it revalidates.
    revalidated: str | None = None
    near_duplicate_of: str | None = None
    near_distance: int | None = None
    changed: bool | None = None
    observations: int = 0
    changes: int = 0
    #: Crawl-clock seconds of this URL's first observation and of the fetch before this one (0: none).
    first_fetch: int = 0
    previous_fetch: int = 0
    #: Links to this URL the crawl has found so far (the in-link sketch's estimate).
    inlinks: int = 0
    #: The fetch's time in the crawl clock (:mod:`crawler.policy.clock`), set by the metadata pipeline.
    crawl_time: float = 0.0
    #: Set by a page module for resources it fetched (e.g. "png").
    module: str | None = None
    #: The spider callback that made the item ("parse", "parse_sitemap", "parse_resource").
    callback: str = "parse"
