"""Items produced by the crawler's spiders."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class PageItem:
    """One fetched page (any status, any content type).

    ``headers`` keeps every response header as ``(name, value)`` pairs in the
    order received; ``body`` is the payload as the downloader delivered it.
    ``outlinks`` are the absolute links found in HTML (empty for other types).
    ``canonical_url`` is the page's rel="canonical" (link element, else HTTP
    ``Link`` header), normalized; ``primary`` is False when the page names
    another URL of the same registered domain as its canonical: that URL is
    crawled as the primary copy and consumers of primary pages skip this one.
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
