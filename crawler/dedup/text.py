"""Visible text and its SimHash (pure).

Visible text: the document's ``<body>`` (or root) text with ``script``,
``style``, ``noscript``, ``template``, ``svg`` and ``head`` removed, parsed
by lexbor (selectolax).

Tokenization: the visible text is lowercased and split into words, a word
being a run of Unicode letters, digits or underscores (``\\w+``); at most
``DEDUP_MAX_WORDS`` (2,000) words are used, which bounds the cost on huge
pages. Features: word 3-shingles (each run of 3 consecutive words), weighted
by their count; a page of fewer than 3 words uses its words. The 64-bit
fingerprint is the ``simhash`` package's, over those features.
"""

from __future__ import annotations

import re
from collections import Counter

from selectolax.lexbor import LexborHTMLParser
from simhash import Simhash

_WORD = re.compile(r"\w+")
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head")
SHINGLE = 3


def visible_text(tree: LexborHTMLParser) -> str:
    """The text a reader sees (whitespace-separated), from an already parsed page."""
    root = tree.body or tree.root
    if root is None:
        return ""
    root.strip_tags(list(_INVISIBLE))  # mutates the tree: run it after the link extraction
    return str(root.text(separator=" ", strip=True))


def words(text: str, max_words: int = 2000) -> list[str]:
    found = _WORD.findall(text.lower())
    return found[:max_words]


def simhash64(tokens: list[str]) -> int | None:
    """The 64-bit SimHash of word 3-shingles, or None for a page without words."""
    if not tokens:
        return None
    if len(tokens) < SHINGLE:
        features = Counter(tokens)
    else:
        features = Counter(" ".join(tokens[i : i + SHINGLE]) for i in range(len(tokens) - SHINGLE + 1))
    return int(Simhash(features).value)


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
