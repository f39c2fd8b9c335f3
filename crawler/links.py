"""Outlink extraction from HTML, with selectolax (lexbor).

Every ``<a href>`` is resolved against the document's base URL (``<base href>``
when present, itself resolved against the page URL), following RFC 3986
section 5 (``urllib.parse.urljoin``), with fast paths for the common absolute
and root-relative forms that give the same result without the general
algorithm. Fragments are dropped; links with schemes other than http(s)
(``mailto:``, ``javascript:``...) are skipped. The result is unique, in
document order.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

_SKIP_PREFIXES = ("#", "javascript:", "mailto:", "tel:", "data:", "about:", "ftp:", "file:", "news:", "irc:")


class _Base:
    __slots__ = ("origin", "scheme", "url")

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.url = url
        self.scheme = parts.scheme
        self.origin = f"{parts.scheme}://{parts.netloc}"


def _needs_general_join(path: str) -> bool:
    return "/." in path


def resolve(base: _Base, href: str) -> str | None:
    """The absolute http(s) URL of ``href`` without its fragment, or ``None``."""
    href = href.strip()
    if not href:
        return None
    lowered = href[:11].lower()
    if lowered.startswith(_SKIP_PREFIXES):
        return None
    if lowered.startswith(("http://", "https://")) and not _needs_general_join(href):
        url = href
    elif href.startswith("//"):
        url = urljoin(base.url, href)
    elif href[0] == "/" and not _needs_general_join(href):
        url = base.origin + href
    else:
        url = urljoin(base.url, href)
        if not url.startswith(("http://", "https://")):
            return None
    hash_at = url.find("#")
    if hash_at >= 0:
        url = url[:hash_at]
    return url


class LinkExtractor:
    """Extracts outlinks of HTML documents. Stateless; cheap to share."""

    def extract(self, body: bytes | str, page_url: str) -> list[str]:
        tree = LexborHTMLParser(body)
        base = _Base(page_url)
        base_node = tree.css_first("base[href]")
        if base_node is not None:
            base_href = base_node.attributes.get("href")
            if base_href:
                resolved = urljoin(page_url, base_href.strip())
                if resolved.startswith(("http://", "https://")):
                    base = _Base(resolved)
        seen_hrefs: set[str] = set()
        links: list[str] = []
        seen_links: set[str] = set()
        for node in tree.css("a[href]"):
            href = node.attributes.get("href")
            if not href or href in seen_hrefs:
                continue
            seen_hrefs.add(href)
            url = resolve(base, href)
            if url is not None and url not in seen_links:
                seen_links.add(url)
                links.append(url)
        return links
