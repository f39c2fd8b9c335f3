"""Times as WARC writes them (``WARC-Date``: ISO 8601 UTC with microseconds) and epoch microseconds,
the form the URL records, the duplicate index and the frontier's codec keep them in."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any


def _second_micro(epoch: float) -> tuple[int, int]:
    second = int(epoch // 1)
    micro = round((epoch - second) * 1_000_000)  # as datetime rounds: half to even, carried over
    if micro >= 1_000_000:
        second, micro = second + 1, micro - 1_000_000
    return second, micro


def warc_micros(epoch: float) -> int:
    """Epoch microseconds of :func:`warc_date` of ``epoch``: ``micros_of_warc_date(warc_date(epoch))``."""
    second, micro = _second_micro(epoch)
    return second * 1_000_000 + micro


def warc_date(epoch: float) -> str:
    """ISO 8601 UTC with microseconds, as WARC/1.1 allows."""
    second, micro = _second_micro(epoch)
    if second != _last_second[0]:
        _last_second[0], _last_second[1] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_last_second[1]}.{micro:06d}Z"


def warc_date_micros(micros: int) -> str:
    """:func:`warc_date` of a time given in epoch microseconds (exactly)."""
    second, micro = divmod(micros, 1_000_000)
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{micro:06d}Z"


#: The last whole second :func:`micros_of_warc_date` read, and its epoch second (a crawl's dates
#: mostly fall in the same second as the one before: no date parsing for them).
_last_read: list[Any] = ["", 0]


def micros_of_warc_date(text: str) -> int:
    """Epoch microseconds of a WARC date (``2026-01-02T03:04:05Z``, with or without a fraction); 0 if unreadable."""
    head, _, fraction = text.rstrip("Z").partition(".")
    if head == _last_read[0]:
        second = int(_last_read[1])
    else:
        try:
            if len(head) != 19 or head[4] != "-" or head[7] != "-" or head[10] != "T" or head[13] != ":" \
                    or head[16] != ":":
                return 0
            second = int(datetime(int(head[0:4]), int(head[5:7]), int(head[8:10]), int(head[11:13]),
                                  int(head[14:16]), int(head[17:19]), tzinfo=UTC).timestamp())
        except ValueError:
            return 0
        _last_read[0], _last_read[1] = head, second
    digits = (fraction + "000000")[:6]
    return second * 1_000_000 + (int(digits) if digits.isdigit() else 0)


#: The last whole second :func:`warc_date` formatted (most dates of a crawl fall in the same second as the one before).
_last_second: list[Any] = [None, ""]
