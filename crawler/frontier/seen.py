"""The URL-seen set: a Bloom filter in front of an exact store, both in Redis.

* The **Bloom filter** is one Redis bitmap of ``m`` bits with ``k`` hash
  positions per URL, sized from ``SEEN_EXPECTED_URLS`` (n) and
  ``SEEN_FALSE_POSITIVE_RATE`` (p): ``m = -n ln p / (ln 2)^2`` and
  ``k = round(m / n ln 2)`` (100 million URLs at 1%: 9.6 bits per URL, about
  114 MiB, 7 hashes). The positions are computed client-side
  (:func:`crawler.urls.bloom_positions`). A bit that is 0 means "surely new".
* The **exact store** holds a 64-bit fingerprint per URL in Redis sets that
  stay intset-encoded (8 bytes per entry): the fingerprints are spread over
  ``2^b`` sets by their top bits, with ``b`` chosen so a set holds about 256
  of the expected URLs (Redis keeps a set an intset up to
  ``set-max-intset-entries``, 512 by default; the embedded server raises it to
  4,096 so a crawl can outgrow its estimate several times before any set
  converts). A Bloom "maybe" is confirmed here, so a false positive never
  loses a URL.

Check and add happen in the enqueue script, atomically with the enqueue.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from scrapy.settings import BaseSettings

from crawler.exceptions import ConfigurationError
from crawler.settings_parsing import get_float, get_int

#: Redis refuses bit offsets at or past 2^32.
MAX_BLOOM_BITS = 2**32 - 1
TARGET_PER_SET = 256


@dataclass(frozen=True)
class SeenConfig:
    expected_urls: int
    false_positive_rate: float
    bloom_bits: int
    bloom_hashes: int
    exact_set_bits: int

    @classmethod
    def sized(cls, expected_urls: int, false_positive_rate: float) -> SeenConfig:
        bits = math.ceil(-expected_urls * math.log(false_positive_rate) / math.log(2) ** 2)
        if bits > MAX_BLOOM_BITS:
            raise ConfigurationError(
                "SEEN_EXPECTED_URLS",
                f"a Bloom filter for {expected_urls} URLs at {false_positive_rate} needs {bits} bits; "
                f"a Redis bitmap holds at most 2^32 (about 440 million URLs at 1%): shard the crawl",
            )
        hashes = max(1, min(32, round(bits / expected_urls * math.log(2))))
        set_bits = max(0, math.ceil(math.log2(max(expected_urls / TARGET_PER_SET, 1))))
        return cls(expected_urls, false_positive_rate, bits, hashes, min(set_bits, 24))

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> SeenConfig:
        expected = get_int(settings, "SEEN_EXPECTED_URLS", minimum=1000)
        rate = get_float(settings, "SEEN_FALSE_POSITIVE_RATE", minimum=1e-9)
        if rate >= 0.5:
            raise ConfigurationError("SEEN_FALSE_POSITIVE_RATE", f"must be below 0.5, got {rate}")
        return cls.sized(expected, rate)

    def exact_set(self, key: int) -> int:
        """Which exact-store set a 64-bit (signed) fingerprint belongs to."""
        return (key & 0xFFFFFFFFFFFFFFFF) >> (64 - self.exact_set_bits) if self.exact_set_bits else 0

    @property
    def bits_per_url(self) -> float:
        return self.bloom_bits / self.expected_urls
