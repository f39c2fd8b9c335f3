"""The URL-seen set: a Bloom filter in front of an exact store, both in Redis.

* The **Bloom filter** is one Redis bitmap of ``m`` bits with ``k`` hash
  positions per URL: ``k`` is ``SEEN_BLOOM_HASHES`` (4), and ``m`` the size at
  which ``k`` hashes answer "maybe" for a new URL at ``SEEN_FALSE_POSITIVE_RATE``
  (p) once ``SEEN_EXPECTED_URLS`` (n) are in: ``m = -k n / ln(1 - p^(1/k))``
  (100 million URLs at 1%: 10.5 bits per URL, about 125 MiB), and at most
  ``SEEN_BLOOM_SHARE`` of the Redis memory limit (a smaller filter answers
  "maybe" more often; the exact store keeps the answer right). Fewer hashes
  than the optimal ``m / n ln 2`` (7 at 1%: 9.6 bits per URL) cost a little
  memory and save Redis CPU: every hash is a bit Redis sets for each new URL
  and reads for each known one (docs/benchmarks.md, "Four Bloom hashes").
  Its size and hash count are fixed when the crawl starts (recorded in the
  crawl's metadata). The positions are computed client-side
  (:func:`crawler.urls.bloom_positions`). A bit that is 0 means "surely new".
* The **exact store** holds every URL's 64-bit key in intset buckets (8
  bytes per URL) that grow by linear hashing (``crawlstate/lua/lhash.lua``), so they
  stay intsets at any crawl size. A Bloom "maybe" is confirmed here, so a
  false positive never loses a URL.

The check and the exact store's add happen in the enqueue script, atomically
with the enqueue; the worker sets the Bloom bits of every URL it sent with
plain ``BITFIELD`` commands right after the script (``BITFIELD_CHUNK`` bits
each, ``crawler/frontier/wire.py``), in the same round trip. A URL whose bits
are not set yet (another worker's call between the two) reads as "surely new"
and is then found in the exact store as the script adds it: a duplicate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from scrapy.settings import BaseSettings

from crawler import defaults
from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_float, get_int

#: Redis refuses bit offsets at or past 2^32.
MAX_BLOOM_BITS = 2**32 - 1
#: Hashes per URL at most (``POSITIONS`` packs up to 32).
MAX_HASHES = 32


def bits_for(expected_urls: int, false_positive_rate: float, hashes: int) -> int:
    """Bits at which ``hashes`` hashes of ``expected_urls`` URLs set a share ``p^(1/k)`` of the filter, so a
    new URL finds its ``k`` bits all set (a false "maybe") at ``false_positive_rate`` (p)."""
    return math.ceil(-expected_urls * hashes / math.log(1 - false_positive_rate ** (1 / hashes)))


def legacy_hashes(expected_urls: int, bits: int) -> int:
    """The hash count of a crawl recorded before the count was: its size's optimum, ``m / n ln 2``."""
    return max(1, min(MAX_HASHES, round(bits / expected_urls * math.log(2))))


@dataclass(frozen=True)
class SeenConfig:
    expected_urls: int
    false_positive_rate: float
    bloom_bits: int
    bloom_hashes: int

    @classmethod
    def sized(
        cls, expected_urls: int, false_positive_rate: float, max_bytes: int = 0,
        hashes: int = defaults.SEEN_BLOOM_HASHES,
    ) -> SeenConfig:
        """The filter of ``hashes`` hashes for ``expected_urls`` at ``false_positive_rate``, at most
        ``max_bytes`` (0: no cap)."""
        bits = bits_for(expected_urls, false_positive_rate, hashes)
        if bits > MAX_BLOOM_BITS:
            most = MAX_BLOOM_BITS * expected_urls // bits
            raise ConfigurationError(
                "SEEN_EXPECTED_URLS",
                f"a Bloom filter for {expected_urls} URLs at {false_positive_rate} with {hashes} hashes "
                f"(SEEN_BLOOM_HASHES) needs {bits} bits; a Redis bitmap holds at most 2^32, about {most:,} URLs "
                f"at this rate and hash count: shard the crawl (FRONTIER_SHARDS)",
            )
        if max_bytes:
            bits = max(8 * 1024, min(bits, max_bytes * 8))
        return cls(expected_urls, false_positive_rate, bits, hashes)

    def recorded(self, bits: int, hashes: int) -> SeenConfig:
        """This filter at a crawl's recorded size and hash count."""
        return replace(self, bloom_bits=bits, bloom_hashes=hashes)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SeenConfig:
        expected = get_int(settings, "SEEN_EXPECTED_URLS", minimum=1000)
        rate = get_float(settings, "SEEN_FALSE_POSITIVE_RATE", minimum=1e-9)
        if rate >= 0.5:
            raise ConfigurationError("SEEN_FALSE_POSITIVE_RATE", f"must be below 0.5, got {rate}")
        hashes = get_int(settings, "SEEN_BLOOM_HASHES", minimum=1, maximum=MAX_HASHES)
        # The whole crawl's filter, unchecked: each shard's is sized (and checked) for its share.
        return cls(expected, rate, bits_for(expected, rate, hashes), hashes)

    @property
    def bits_per_url(self) -> float:
        return self.bloom_bits / self.expected_urls
