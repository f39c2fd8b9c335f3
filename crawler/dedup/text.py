"""Visible text and its SimHash (pure).

Visible text: the document's ``<body>`` (or root) text with ``script``,
``style``, ``noscript``, ``template``, ``svg`` and ``head`` removed, parsed
by lexbor (selectolax).

Tokenization: text is lowercased and split into words, a word being a run of
Unicode letters, digits or underscores (``\\w+``); at most ``DEDUP_MAX_WORDS``
(2,000) words are used, which bounds the cost on huge pages. Features: word
3-shingles (each run of 3 consecutive words, each occurrence counted); a page
of fewer than 3 words uses its words.

Boilerplate removal (:func:`content_text`): the fingerprint is taken over
the page's content blocks only, the text blocks (paragraphs, list items,
headings, cells, quotes...) of at least ``DEDUP_MIN_BLOCK_WORDS`` (10) words,
as jusText and the near-duplicate literature do: what differs between two
copies of one page is mostly short (a date, a counter, a banner, a session
id, a navigation line). A page whose long blocks hold less than half of its
words (navigation, listings, text in bare ``div`` elements) is fingerprinted
over all its visible text.

Fingerprint (version :data:`SIMHASH_VERSION`): Charikar's SimHash over the
features, each hashed to 64 bits with XXH3 (``xxhash``); bit *i* of the
fingerprint is set when more than half of the features have bit *i* set.
Computed by the C extension ``crawler.dedup._simhash`` where setup.py could
build it (:func:`text_simhash` tokenizes ASCII text in the same call), else by
:func:`simhash64_python`, which gives the same fingerprint (a test holds them
equal); :data:`NATIVE` says which one runs. The duplicate index keeps each
version's fingerprints apart (its keys carry the version). Costs: docs/storage.md.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Callable

from selectolax.lexbor import LexborHTMLParser
from xxhash import xxh3_64_intdigest

_WORD = re.compile(r"\w+")
_INVISIBLE = ("script", "style", "noscript", "template", "svg", "head")
SHINGLE = 3
#: Which fingerprint :func:`simhash64` computes (the duplicate index's keys carry it).
SIMHASH_VERSION = 2
_BIG_ENDIAN = sys.byteorder == "big"
#: ``_BIT[b]`` maps a byte to 1 if its bit ``b`` is set, else to 0 (for ``bytes.translate``).
_BIT = [bytes((value >> bit) & 1 for value in range(256)) for bit in range(8)]


def visible_text(tree: LexborHTMLParser) -> str:
    """The text a reader sees (whitespace-separated), from an already parsed page."""
    root = tree.body or tree.root
    if root is None:
        return ""
    root.strip_tags(list(_INVISIBLE))  # mutates the tree: run it after the link extraction
    return str(root.text(separator=" ", strip=True))


#: Elements whose text is one block of content (for :func:`content_text`).
_BLOCKS = "p, li, h1, h2, h3, h4, h5, h6, td, th, pre, blockquote, dd, dt, figcaption, caption"


def content_text(tree: LexborHTMLParser, text: str, min_block_words: int = 10) -> str:
    """The text a page is fingerprinted by: its long text blocks', else all of ``text``.

    ``tree`` is the page after :func:`visible_text` (invisible elements
    removed), ``text`` its visible text; ``min_block_words`` 0 keeps every word.
    A block's length is counted in whitespace-separated words, the share of
    the page in characters: cheap, and only the words kept are tokenized.
    """
    root = tree.body or tree.root
    if min_block_words > 0 and root is not None:
        # (At most min_block_words splits: a long block is not split whole to be counted.)
        blocks = [block for node in root.css(_BLOCKS)
                  if len((block := node.text(separator=" ", strip=True)).split(None, min_block_words))
                  >= min_block_words]
        if 2 * sum(map(len, blocks)) >= len(text):
            return " ".join(blocks)
    return text


def content_simhash(tree: LexborHTMLParser, text: str, max_words: int = 2000, min_block_words: int = 10) -> int | None:
    """The page's fingerprint: :func:`text_simhash` of :func:`content_text`."""
    return text_simhash(content_text(tree, text, min_block_words), max_words)


#: Bytes of ASCII text: word characters lowercased, every other byte a space (see :func:`words`).
_ASCII_WORD_BYTES = bytes(
    (byte | 0x20 if 65 <= byte <= 90 else byte) if byte < 128 and (chr(byte).isalnum() or byte == 95) else 32
    for byte in range(256)
)


def words(text: str, max_words: int = 2000) -> list[str]:
    """The lowercased ``\\w+`` runs of ``text``, at most ``max_words``.

    ASCII text (most pages) is lowercased and its non-word characters made
    spaces by one ``bytes.translate``, then split: the same tokens as the
    regular expression, several times faster.
    """
    if text.isascii():
        found = text.encode("ascii").translate(_ASCII_WORD_BYTES).decode("ascii").split(None, max_words)
    else:
        found = _WORD.findall(text.lower())
    return found[:max_words]


def simhash64_python(tokens: list[str]) -> int | None:
    """The 64-bit SimHash of word 3-shingles, or None for a page without words (pure Python)."""
    if not tokens:
        return None
    features = tokens if len(tokens) < SHINGLE else map(" ".join, zip(tokens, tokens[1:], tokens[2:]))
    # The features' hashes, little-endian: byte p of every hash is the column data[p::8].
    hashes = array("Q", map(xxh3_64_intdigest, features))
    if _BIG_ENDIAN:
        hashes.byteswap()  # the same fingerprint on every machine that shares the index
    data = hashes.tobytes()
    half = len(hashes)
    value = 0
    for position in range(8):
        column = data[position::8]
        for bit in range(8):
            if 2 * column.translate(_BIT[bit]).count(1) > half:
                value |= 1 << (8 * position + bit)
    return value


try:
    from crawler.dedup._simhash import simhash64 as _native_simhash64
    from crawler.dedup._simhash import simhash64_text as _native_simhash64_text
except ImportError:  # not built: no C compiler or no xxhash.h where the crawler was installed
    _native_simhash64 = None
    _native_simhash64_text = None

#: True when :func:`simhash64` runs in C (``crawler.dedup._simhash``).
NATIVE = _native_simhash64 is not None
#: The 64-bit SimHash of word 3-shingles of a list of str, or None for none (C if built, same result).
simhash64: Callable[[list[str]], int | None] = _native_simhash64 or simhash64_python


def text_simhash(text: str, max_words: int = 2000) -> int | None:
    """``simhash64(words(text, max_words))``; for ASCII text (most pages) tokenized and hashed in one C call,
    without a Python string per word."""
    if _native_simhash64_text is not None and text.isascii():
        fingerprint: int | None = _native_simhash64_text(text, max_words)
        return fingerprint
    return simhash64(words(text, max_words))


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()
