"""The Redis protocol (RESP2), encoded by hand for hot paths.

redis-py's encoder costs microseconds per argument; a frontier step or a
batch of dedup calls has hundreds of arguments. :func:`command` is the C
extension ``crawler.redisconn._resp`` (about 30 ns an argument, built by
``make venv`` and ``pip install``) when it is there, else
:func:`command_python` (about 300 ns): the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable


def command_python(*args: bytes | str | int) -> bytes:
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


try:
    from crawler.redisconn._resp import command as _native_command
except ImportError:  # no C compiler at install time
    _native_command = None

#: True when :func:`command` runs in C (``crawler.redisconn._resp``).
NATIVE = _native_command is not None

command: Callable[..., bytes] = _native_command or command_python
