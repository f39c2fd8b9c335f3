"""The Redis server settings the crawl's compact layout needs (``docs/sizing.md``).

Redis keeps a small hash, set, sorted set or list in a compact encoding
(listpack, intset, compressed list nodes) until it passes one of these limits;
the frontier sizes its buckets to stay under them
(:mod:`crawler.crawlstate.compact`). The embedded server is started with
:data:`SERVER_CONFIG`; for an external server, :func:`server_config_problems`
names what it lacks (the crawl runs either way; its state takes more room).
"""

from __future__ import annotations

from typing import Any

#: The Redis settings the compact layout is sized for (the embedded server uses them; an
#: external server should: ``docs/sizing.md``), with the least value each needs.
SERVER_CONFIG: dict[str, int] = {
    # Buckets of the exact seen store (8 bytes per URL key in an intset).
    "set-max-intset-entries": 4096,
    # URL records (50-200 bytes), duplicate-index buckets, near-duplicate SimHash strings.
    "hash-max-listpack-entries": 512,
    "hash-max-listpack-value": 1024,
    # Recrawl schedule buckets (512 URLs each: fewer keys, less overhead per URL).
    "zset-max-listpack-entries": 1024,
    # Queues: every list node but the one at each end is LZF-compressed.
    "list-compress-depth": 1,
}

def server_config_problems(config: dict[str, Any]) -> list[str]:
    """What an external server's settings lack for the compact layout: one line per setting."""
    problems = []
    for name, least in SERVER_CONFIG.items():
        raw = config.get(name)
        if raw is None and name.startswith(("hash-max-listpack", "zset-max-listpack")):
            raw = config.get(name.replace("listpack", "ziplist"))
        try:
            current = int(raw) if raw is not None else None
        except (TypeError, ValueError):
            current = None
        if current is None or current < least:
            problems.append(f"{name} {raw if raw is not None else '(unknown)'} (the compact layout wants {least})")
    return problems
