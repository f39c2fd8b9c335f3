"""The Redis protocol (RESP2), encoded by hand for hot paths.

redis-py's encoder costs microseconds per argument; a frontier step or a
batch of dedup calls has hundreds of arguments.
"""

from __future__ import annotations


def command(*args: bytes | str | int) -> bytes:
    """One command as RESP bytes."""
    parts = [b"*%d\r\n" % len(args)]
    append = parts.append
    for arg in args:
        data = arg if isinstance(arg, bytes) else arg.encode() if isinstance(arg, str) else b"%d" % arg
        append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(parts)


def text(value: bytes | str | int) -> str:
    """A reply (bytes with ``decode_responses=False``) as text; undecodable bytes survive as surrogates."""
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
