"""Does a page need a browser? Decided from its raw HTML (pure, no I/O).

A page built by JavaScript arrives as a shell: scripts, an empty application
root (``<div id="root"></div>``, ``<app-root>``), a ``<noscript>`` asking for
JavaScript, and little text or few links of its own. A page with text and
links of its own does not need a browser, whatever scripts it also has; a
page without scripts cannot gain anything from one.

The signals, in order:

1. no ``<script`` in the page at all: static (decided without parsing);
2. at least ``min_text`` characters of visible text and ``min_links`` links:
   static (its content is there);
3. an application root element that is empty: needs JavaScript;
4. a ``<noscript>`` whose text mentions JavaScript: needs JavaScript;
5. little text and few links but scripts: needs JavaScript;
6. otherwise static.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from selectolax.lexbor import LexborHTMLParser

#: Elements single-page applications mount into (React, Vue, Next.js, Nuxt, Gatsby, Angular...).
APP_ROOTS = ("#root", "#app", "#__next", "#__nuxt", "#___gatsby", "#app-root", "#main-app", "app-root",
             "[data-reactroot]", "[ng-app]", "[ng-version]")
_INVISIBLE = ("script", "style", "noscript", "template", "svg")


class Verdict(Enum):
    STATIC = "static"
    NEEDS_JS = "needs_js"


@dataclass(frozen=True, slots=True)
class Detection:
    verdict: Verdict
    #: Why, for the log and the stats (``render/detected/<reason>``).
    reason: str

    @property
    def needs_js(self) -> bool:
        return self.verdict is Verdict.NEEDS_JS


def needs_browser(body: bytes, min_text: int = 200, min_links: int = 3) -> Detection:
    """Whether the page of raw HTML ``body`` needs a browser to show its content and links."""
    if b"<script" not in body and b"<SCRIPT" not in body:
        return Detection(Verdict.STATIC, "no_scripts")
    tree = LexborHTMLParser(body)
    root = tree.body or tree.root
    if root is None:
        return Detection(Verdict.STATIC, "empty")
    scripts = len(tree.css("script"))
    links = len(root.css("a[href]"))
    noscript = " ".join(node.text(strip=True) for node in root.css("noscript")).lower()
    app_root = next((node for node in root.css(", ".join(APP_ROOTS))), None)
    root.strip_tags(list(_INVISIBLE))
    text = root.text(separator=" ", strip=True)
    if len(text) >= min_text and links >= min_links:
        return Detection(Verdict.STATIC, "has_content")
    if app_root is not None and not app_root.text(strip=True) and app_root.css_first("a[href]") is None:
        return Detection(Verdict.NEEDS_JS, "empty_app_root")
    if "javascript" in noscript:
        return Detection(Verdict.NEEDS_JS, "noscript")
    if scripts and len(text) < min_text and links < min_links:
        return Detection(Verdict.NEEDS_JS, "little_content")
    return Detection(Verdict.STATIC, "has_content")
