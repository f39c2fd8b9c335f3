"""The mock web's shape: hosts and their loopback addresses, the site graph, the pages (pure functions).

The site graph is a pure function of the parameters (:class:`WebSpec`), so a
test can compute the set of reachable pages without asking the server.
"""

from __future__ import annotations

import array
import hashlib
import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

HOSTS_PER_OCTET = 250


def host_ip(index: int) -> str:
    """The loopback address of host ``index`` (0-based)."""
    return (
        f"127.{20 + index // (HOSTS_PER_OCTET * HOSTS_PER_OCTET)}."
        f"{(index // HOSTS_PER_OCTET) % HOSTS_PER_OCTET + 1}.{index % HOSTS_PER_OCTET + 1}"
    )


def host_index(ip: str) -> int:
    """Inverse of :func:`host_ip`; -1 for an address that is not a mock host."""
    try:
        a, b, c, d = (int(part) for part in ip.split("."))
    except ValueError:
        return -1
    if a != 127 or b < 20 or c < 1 or d < 1:
        return -1
    return (b - 20) * HOSTS_PER_OCTET * HOSTS_PER_OCTET + (c - 1) * HOSTS_PER_OCTET + (d - 1)


@dataclass(frozen=True)
class WebSpec:
    """The shape of the mock web.

    ``sizes`` is ``uniform:N`` (every host has N pages) or ``zipf:MAX:S`` (host
    i has ``max(1, MAX / (i + 1) ** S)`` pages: a few big hosts, many small ones).
    Page j of a host links to pages ``j*fanout+1 .. j*fanout+fanout`` of the same
    host (a complete tree, so every page is reachable from ``/``), to ``nav``
    fixed pages of the same host (the repeated navigation links of real sites),
    and to the roots of ``cross`` other hosts.
    """

    hosts: int = 50
    sizes: str = "uniform:20"
    fanout: int = 4
    nav: int = 3
    cross: int = 2
    latency_ms: tuple[float, ...] = (0.0,)
    filler_words: int = 300
    seed: int = 1
    extras: bool = False
    #: A JSON file of per-host misbehaviour (see :class:`Scenario`), or "".
    scenario: str = ""
    #: Page paths: "short" (``/p/<n>``) or "real" (several segments, words, some query strings: URLs of
    #: 60-100 characters, as the real web's; :func:`page_path`).
    paths: str = "short"
    _size_cache: tuple[int, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_size_cache", tuple(self._compute_sizes()))

    def _compute_sizes(self) -> Iterator[int]:
        kind, _, rest = self.sizes.partition(":")
        if kind == "uniform":
            n = int(rest)
            for _ in range(self.hosts):
                yield n
        elif kind == "zipf":
            top, _, s = rest.partition(":")
            exponent = float(s or 1.0)
            for i in range(self.hosts):
                yield max(1, int(int(top) / (i + 1) ** exponent))
        else:
            raise ValueError(f"unknown sizes spec {self.sizes!r}")

    def pages(self, host: int) -> int:
        return self._size_cache[host]

    def total_pages(self) -> int:
        return sum(self._size_cache)

    def latency(self, host: int) -> float:
        return self.latency_ms[host % len(self.latency_ms)] / 1000.0

    def page_links(self, host: int, page: int) -> list[tuple[int, int]]:
        """Outlinks of a page as (host, page) pairs, in document order."""
        n = self.pages(host)
        links: list[tuple[int, int]] = []
        for k in range(1, self.fanout + 1):
            child = page * self.fanout + k
            if child < n:
                links.append((host, child))
        for k in range(self.nav):
            links.append((host, k % n))
        for k in range(1, self.cross + 1):
            other = (host * 7919 + k * 104729 + self.seed) % self.hosts
            links.append((other, 0))
        return links

    def reachable(self, seeds: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
        """Every (host, page) reachable from ``seeds`` by following links."""
        seen = set(seeds)
        stack = list(seen)
        while stack:
            node = stack.pop()
            for link in self.page_links(*node):
                if link not in seen:
                    seen.add(link)
                    stack.append(link)
        return seen


_SECTIONS = ("news", "blog", "products", "docs", "articles", "catalog", "support", "community", "events",
             "library", "research", "guides")
_TOPICS = ("technology", "science", "garden-tools", "home-and-living", "travel", "sports", "health", "finance",
           "education", "culture", "energy", "transport", "software", "outdoor-equipment", "kitchen", "music")
_SLUG_WORDS = ("annual", "report", "how", "to", "choose", "the", "best", "new", "guide", "review", "update",
               "release", "notes", "summer", "winter", "city", "council", "plan", "local", "market", "price",
               "history", "first", "look", "inside", "project", "team", "results", "open", "source", "data",
               "study", "shows", "growth", "questions", "answers", "week", "ahead", "top", "ten", "tips")


def _real_path(page: int) -> str:
    """A path of several segments with words, some with a query string (deterministic per page)."""
    digest = hashlib.blake2b(page.to_bytes(8, "little"), digest_size=8).digest()
    section, topic = _SECTIONS[digest[0] % len(_SECTIONS)], _TOPICS[digest[1] % len(_TOPICS)]
    slug = "-".join(_SLUG_WORDS[b % len(_SLUG_WORDS)] for b in digest[2 : 5 + digest[7] % 3])
    form = page % 4
    if form == 0:
        return f"/{section}/{2015 + digest[5] % 11}/{1 + digest[6] % 12:02d}/{slug}-{page}.html"
    if form == 1:
        return f"/{section}/{topic}/{slug}-{page}/"
    if form == 2:
        return f"/{section}/{topic}/item.php?id={page}&view=full&lang=en"
    return f"/{topic}/{section}/{slug}-{page}?sort=date&page=1"


def page_path(page: int, style: str = "short") -> str:
    """The path of a page: ``/p/<n>`` ("short"), or one like the real web's ("real", see :class:`WebSpec`)."""
    if page == 0:
        return "/"
    return _real_path(page) if style == "real" else f"/p/{page}"


_REAL_NUMBER = re.compile(r"(?:-(\d+)(?:\.html|/)?|/item\.php\?id=(\d+)&.*)(?:\?.*)?\Z")


def parse_page_path(path: str) -> int:
    """The page number of a path of either style, or -1."""
    if path == "/" or path == "/index.html":
        return 0
    if path.startswith("/p/"):
        tail = path[3:].split("?", 1)[0]
        if tail.isdigit():
            return int(tail)
        return -1
    match = _REAL_NUMBER.search(path)
    if match is not None:
        page = int(match.group(1) or match.group(2))
        if page > 0 and _real_path(page) == path:
            return page
    return -1


#: A 1x1 transparent PNG.
TINY_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


def near_duplicate_words(seed: int, count: int = 400) -> list[str]:
    """A deterministic article: words from a large vocabulary."""
    rng = random.Random(seed * 7919 + 17)
    return [f"word{rng.randrange(5000)}" for _ in range(count)]


_WORDS = ["crawler", "frontier", "politeness", "robots", "queue", "host", "lease", "redis", "scrapy", "archive", "index", "search", "page", "link", "anchor", "text", "content", "change", "rate", "fresh", "stale", "budget", "trap", "calendar", "session", "domain", "server", "client", "fetch", "parse", "store", "record"]
#: Every run of three words, indexed by 15 bits (twice over, so that any
#: 16-bit number indexes it).
_TRIPLES = [" ".join(_WORDS[(i >> shift) & 31] for shift in (0, 5, 10)) for i in range(1 << 16)]


def filler_text(host: int, page: int, seed: int, count: int) -> str:
    """``count`` words, a deterministic pseudo-random sequence per page.

    The words come from a hash stream of (host, page, seed), three words per
    16-bit number: cheap enough that the server spends its CPU on serving.
    """
    triples, rest = divmod(count, 3)
    stream = hashlib.shake_128(b"%d %d %d" % (host, page, seed)).digest(2 * triples + rest)
    text = " ".join(map(_TRIPLES.__getitem__, array.array("H", stream[: 2 * triples])))
    if rest:
        tail = " ".join(_WORDS[byte & 31] for byte in stream[2 * triples :])
        text = f"{text} {tail}" if text else tail
    return text


def render_page(spec: WebSpec, host: int, page: int, port: int) -> bytes:
    links = spec.page_links(host, page)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>Host {host} page {page}</title></head><body>",
        f"<h1>Host {host} page {page}</h1><p>",
    ]
    # Deterministic filler text, different on every page.
    parts.append(filler_text(host, page, spec.seed, spec.filler_words))
    parts.append("</p><ul>")
    for i, (other, target) in enumerate(links):
        if other == host:
            # Alternate relative and absolute forms, with a fragment now and then.
            href = page_path(target, spec.paths)
            if i % 3 == 1:
                href = f"http://{host_ip(host)}:{port}{href}"
            elif i % 3 == 2:
                href += "#section"
        else:
            href = f"http://{host_ip(other)}:{port}/"
        parts.append(f"<li><a href=\"{href}\">link {i}</a></li>")
    if spec.extras:
        parts.append('<li><a href="/data.bin">binary</a></li>')
        parts.append('<li><a href="/moved">moved</a></li>')
        parts.append('<li><a href="mailto:someone@example.org">mail</a></li>')
        parts.append('<li><a href="javascript:void(0)">js</a></li>')
    parts.append("</ul></body></html>")
    return "".join(parts).encode()


def spec_arguments(spec: WebSpec) -> list[str]:
    """Command-line arguments that reproduce ``spec`` in a server process."""
    return [
        "--hosts", str(spec.hosts), "--sizes", spec.sizes, "--fanout", str(spec.fanout),
        "--nav", str(spec.nav), "--cross", str(spec.cross),
        "--latency-ms", ",".join(str(x) for x in spec.latency_ms),
        "--filler-words", str(spec.filler_words), "--seed", str(spec.seed), "--paths", spec.paths,
    ] + (["--extras"] if spec.extras else []) + (["--scenario", spec.scenario] if spec.scenario else [])
