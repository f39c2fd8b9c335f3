"""Page modules: every step after the HTML parser is one (``WEB_PAGE_MODULES``).

The ``web`` spider parses an HTML page once (lexbor) and hands the parsed
page to each enabled module in order; a module reads the tree, fills the
item, and may yield ``Follow`` (URLs to follow, sent on by the spider). The defaults are the link extractor
(:mod:`crawler.modules.links`) and the text extractor
(:mod:`crawler.modules.text`); :mod:`crawler.modules.png` (off by default)
shows that adding one changes nothing else.
"""

from crawler.modules.base import Follow, Page, PageModule

__all__ = ["Follow", "Page", "PageModule"]
