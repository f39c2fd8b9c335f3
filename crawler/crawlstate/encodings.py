"""The Redis server settings the crawl's compact layout needs (``docs/sizing.md``).

Redis keeps a small hash, set, sorted set or list in a compact encoding
(listpack, intset, compressed list nodes) until it passes one of these limits;
the frontier sizes its buckets to stay under them
(:mod:`crawler.crawlstate.compact`). The embedded server is started with
:data:`SERVER_CONFIG`; for an external server, :func:`server_config_problems`
names what it lacks (the crawl runs either way; its state takes more room, or
Redis more CPU).
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
    # Recrawl schedule buckets (at most 64 URLs each). Also the most: see SERVER_CONFIG_MOST.
    "zset-max-listpack-entries": 128,
    # Queues: every list node but the one at each end is LZF-compressed.
    "list-compress-depth": 1,
}

#: Settings whose larger values cost Redis CPU, with the most each should have. The frontier's
#: sorted sets with an entry per host or per request in flight (the ready heap, leases, sleeping
#: hosts) are written on every page; as a listpack each write scans it (``ZADD`` finds the member,
#: then walks to its score): at a limit of 1024 that was a third of Redis' instructions on a web of
#: 2,000 hosts, and 1.17x the instructions per page on one of 300 (``benchmarks/redis_cost.py``,
#: 2026-12-06). Past 128 entries they are skip lists; the ready heap and the leases at any size, while
#: ``zset-max-listpack-value`` (Redis' default, 64) is below the length of their anchor member
#: (``schema.ZSET_ANCHOR``).
SERVER_CONFIG_MOST: dict[str, int] = {
    "zset-max-listpack-entries": 128,
    "zset-max-listpack-value": 64,
}


def server_arguments() -> list[str]:
    """:data:`SERVER_CONFIG` as redis-server's command-line arguments (the embedded server's and the
    benchmarks' servers)."""
    return [arg for name, value in SERVER_CONFIG.items() for arg in (f"--{name}", str(value))]


def _configured(config: dict[str, Any], name: str) -> tuple[Any, int | None]:
    raw = config.get(name)
    if raw is None and name.startswith(("hash-max-listpack", "zset-max-listpack")):
        raw = config.get(name.replace("listpack", "ziplist"))
    try:
        return raw, int(raw) if raw is not None else None
    except (TypeError, ValueError):
        return raw, None


def server_config_problems(config: dict[str, Any]) -> list[str]:
    """What an external server's settings lack for the compact layout: one line per setting."""
    problems = []
    for name, least in SERVER_CONFIG.items():
        raw, current = _configured(config, name)
        if current is None or current < least:
            problems.append(f"{name} {raw if raw is not None else '(unknown)'} (the compact layout wants {least})")
    for name, most in SERVER_CONFIG_MOST.items():
        raw, current = _configured(config, name)
        if current is not None and current > most:
            problems.append(f"{name} {raw} (the frontier wants at most {most}: above it Redis scans the per-host "
                            "sorted sets on every write)")
    return problems
