"""Outlink extraction from HTML, with selectolax (lexbor).

Every ``<a href>`` is first read as browsers read it (leading and trailing
control characters and spaces stripped, tabs and newlines removed anywhere:
:func:`~crawler.urls.normalize.clean_reference`), then resolved against the
document's base URL (``<base href>`` when present, itself resolved against
the page URL), following RFC 3986
section 5 (``urllib.parse.urljoin``), with fast paths for the common absolute
and root-relative forms that give the same result without the general
algorithm. Fragments are dropped; links with schemes other than http(s)
(``mailto:``, ``javascript:``...) are skipped. The result is unique, in
document order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from selectolax.lexbor import LexborHTMLParser

from crawler.urls.normalize import clean_reference

_SKIP_PREFIXES = ("#", "javascript:", "mailto:", "tel:", "data:", "about:", "ftp:", "file:", "news:", "irc:")


#: ``scheme://authority`` at the start of an absolute URL (RFC 3986 section 3).
_ORIGIN = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://[^/?#]*")


class BaseUrl:
    __slots__ = ("origin", "scheme", "url")

    def __init__(self, url: str) -> None:
        self.url = url
        match = _ORIGIN.match(url)
        if match is not None and match.group(1).islower():
            self.scheme = match.group(1)
            self.origin = match.group(0)
        else:
            parts = urlsplit(url)
            self.scheme = parts.scheme
            self.origin = f"{parts.scheme}://{parts.netloc}"


def _needs_general_join(path: str) -> bool:
    return "/." in path


def resolve(base: BaseUrl, href: str) -> str | None:
    """The absolute http(s) URL of ``href`` without its fragment, or ``None``."""
    href = clean_reference(href)
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


@dataclass(frozen=True)
class PageLinks:
    #: Unique absolute http(s) outlinks, in document order.
    links: list[str]
    #: The ``<link rel="canonical">`` target, resolved, if any.
    canonical: str | None = None


_LINK_CANONICAL = re.compile(r'<\s*([^>]+)>\s*;[^,]*?\brel\s*=\s*"?canonical\b', re.IGNORECASE)


def canonical_from_link_header(value: str | None, page_url: str) -> str | None:
    """The target of ``Link: <url>; rel="canonical"`` (RFC 8288), resolved, if any."""
    if not value:
        return None
    match = _LINK_CANONICAL.search(value)
    if match is None:
        return None
    return resolve(BaseUrl(page_url), match.group(1))


class LinkExtractor:
    """Extracts outlinks of HTML documents. Stateless; cheap to share."""

    def extract(self, body: bytes | str, page_url: str) -> list[str]:
        return self.extract_page(body, page_url).links

    def extract_page(self, body: bytes | str, page_url: str) -> PageLinks:
        return self.extract_tree(LexborHTMLParser(body), page_url)

    def extract_tree(self, tree: LexborHTMLParser, page_url: str) -> PageLinks:
        """Links of an already parsed page (the tree is not modified)."""
        base = BaseUrl(page_url)
        for node in tree.tags("base"):
            base_href = node.attrs.get("href")
            if base_href is None:
                continue
            resolved = urljoin(page_url, clean_reference(base_href))
            if resolved.startswith(("http://", "https://")):
                base = BaseUrl(resolved)
            break
        origin = base.origin
        seen_hrefs: set[str] = set()
        links: list[str] = []
        for node in tree.tags("a"):
            href = node.attrs.get("href")
            if not href or href in seen_hrefs:
                continue
            seen_hrefs.add(href)
            # The common forms inline (same result as resolve()), the rest through it: a tab, a
            # newline or a control character anywhere (isprintable) or a space at the end takes
            # the general path, which reads the href as browsers do.
            if href[0] == "/" and href[1:2] != "/" and "/." not in href and href.isprintable() \
                    and href[-1] != " ":
                url = origin + href
            elif href.startswith(("http://", "https://")) and "/." not in href and href.isprintable() \
                    and href[-1] != " ":
                url = href
            else:
                resolved_href = resolve(base, href)
                if resolved_href is None:
                    continue
                url = resolved_href
            hash_at = url.find("#")
            links.append(url[:hash_at] if hash_at >= 0 else url)
        canonical = None
        for node in tree.tags("link"):
            rel = node.attrs.get("rel")
            if rel and "canonical" in rel.lower().split():
                href = node.attrs.get("href")
                if href is not None:
                    canonical = resolve(base, href)
                    break
        return PageLinks(list(dict.fromkeys(links)), canonical)
