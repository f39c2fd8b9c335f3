"""The URL-seen set: a Bloom filter in front of an exact store, both in Redis.

* The **Bloom filter** is one Redis bitmap of ``m`` bits with ``k`` hash
  positions per URL, sized from ``SEEN_EXPECTED_URLS`` (n) and
  ``SEEN_FALSE_POSITIVE_RATE`` (p): ``m = -n ln p / (ln 2)^2`` and
  ``k = round(m / n ln 2)`` (100 million URLs at 1%: 9.6 bits per URL, about
  114 MiB, 7 hashes), and at most ``SEEN_BLOOM_SHARE`` of the Redis memory
  limit (a smaller filter answers "maybe" more often; the exact store keeps
  the answer right). Its size is fixed when the crawl starts (recorded in
  the crawl's metadata). The positions are computed client-side
  (:func:`crawler.urls.bloom_positions`). A bit that is 0 means "surely new".
* The **exact store** holds every URL's 64-bit key in intset buckets (8
  bytes per URL) that grow by linear hashing (``crawlstate/lua/lhash.lua``), so they
  stay intsets at any crawl size. A Bloom "maybe" is confirmed here, so a
  false positive never loses a URL.

The check and the exact store's add happen in the enqueue script, atomically
with the enqueue; the worker sets the Bloom bits of every URL it sent with a
plain ``BITFIELD`` right after the script, in the same round trip. A URL whose
bits are not set yet (another worker's call between the two) reads as "surely
new" and is then found in the exact store as the script adds it: a duplicate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_float, get_int

#: Redis refuses bit offsets at or past 2^32.
MAX_BLOOM_BITS = 2**32 - 1


@dataclass(frozen=True)
class SeenConfig:
    expected_urls: int
    false_positive_rate: float
    bloom_bits: int
    bloom_hashes: int

    @classmethod
    def sized(cls, expected_urls: int, false_positive_rate: float, max_bytes: int = 0) -> SeenConfig:
        """The filter for ``expected_urls`` at ``false_positive_rate``, at most ``max_bytes`` (0: no cap)."""
        bits = math.ceil(-expected_urls * math.log(false_positive_rate) / math.log(2) ** 2)
        if bits > MAX_BLOOM_BITS:
            raise ConfigurationError(
                "SEEN_EXPECTED_URLS",
                f"a Bloom filter for {expected_urls} URLs at {false_positive_rate} needs {bits} bits; "
                f"a Redis bitmap holds at most 2^32 (about 440 million URLs at 1%): shard the crawl",
            )
        if max_bytes:
            bits = max(8 * 1024, min(bits, max_bytes * 8))
        hashes = max(1, min(32, round(bits / expected_urls * math.log(2))))
        return cls(expected_urls, false_positive_rate, bits, hashes)

    @classmethod
    def of_bits(cls, expected_urls: int, false_positive_rate: float, bits: int) -> SeenConfig:
        """A filter of ``bits`` bits (a crawl's recorded size)."""
        hashes = max(1, min(32, round(bits / expected_urls * math.log(2))))
        return cls(expected_urls, false_positive_rate, bits, hashes)

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SeenConfig:
        expected = get_int(settings, "SEEN_EXPECTED_URLS", minimum=1000)
        rate = get_float(settings, "SEEN_FALSE_POSITIVE_RATE", minimum=1e-9)
        if rate >= 0.5:
            raise ConfigurationError("SEEN_FALSE_POSITIVE_RATE", f"must be below 0.5, got {rate}")
        return cls.sized(expected, rate)

    @property
    def bits_per_url(self) -> float:
        return self.bloom_bits / self.expected_urls
