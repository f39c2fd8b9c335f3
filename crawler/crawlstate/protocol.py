"""The step protocol between the frontier's Python and its Lua scripts, declared once.

A frontier step (:mod:`crawler.frontier.wire`) calls the scripts ``enqueue``, ``ack`` and ``claim``
with positional arguments: a fixed head, then the same fields for each item (a URL to enqueue, a
lease to complete, a front queue's weight). Each :class:`Message` here names them in order, and
the reply's values. From the one table:

* the Python encoder builds a call's head by name (:meth:`Message.head_args`: a name missing or not
  declared is an error) and an item's fields with :meth:`Message.item_getter` (the fields of the
  item's object of the same names, in the declared order);
* the Python decoder reads a reply by name (:meth:`Message.reply_values`);
* the scripts read their arguments through names written in as literals when the library is
  composed (:mod:`crawler.crawlstate.library`): ``ARGV[ENQUEUE.prefix]`` is ``ARGV[1]``; items start
  at ``ENQUEUE.items``, each ``ENQUEUE_ITEM.width`` values (plus what the head says is variable),
  field ``ARGV[i + ENQUEUE_ITEM.host]``.

The contract tests check that the three scripts read no argument by a number of their own and that
each returns as many values as its reply declares. Adding a field to a URL's enqueue: one name in
:data:`ENQUEUE`'s ``item`` (and the field of :class:`crawler.frontier.steps.EnqueueEntry`), then its
use in ``enqueue.lua``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any, NamedTuple


class Message(NamedTuple):
    """One script's call: its fixed ``head`` (``ARGV[1]``...), the ``item`` fields repeated after it,
    what follows each item's fields (``variable``, in words) and its ``reply``, all in order."""

    script: str
    head: tuple[str, ...]
    item: tuple[str, ...]
    reply: tuple[str, ...]
    variable: str = ""

    def head_args(self, **values: Any) -> list[Any]:
        """The head's values in order, from their names."""
        if values.keys() != set(self.head):
            missing = [name for name in self.head if name not in values]
            unknown = [name for name in values if name not in self.head]
            raise ValueError(f"{self.script}: head fields missing {missing}, not declared {unknown}")
        return [values[name] for name in self.head]

    def item_getter(self) -> Callable[[Any], tuple[Any, ...]]:
        """An item's fields in order, read from the attributes of the same names (one C call)."""
        getter = attrgetter(*self.item)
        if len(self.item) == 1:
            return lambda obj: (getter(obj),)
        return getter

    def reply_values(self, reply: Sequence[Any]) -> dict[str, Any]:
        """A reply's values by name (an error if Redis answered another number of values)."""
        if len(reply) != len(self.reply):
            raise ValueError(f"{self.script}: {len(reply)} values in its reply, {len(self.reply)} declared")
        return dict(zip(self.reply, reply))

    def lua_tables(self) -> dict[str, dict[str, str]]:
        """What the scripts read: ``<SCRIPT>.<head field>`` its ARGV position, ``<SCRIPT>.items`` the
        first item's; ``<SCRIPT>_ITEM.<field>`` a field's offset in its item, ``.width`` the fields."""
        name = self.script.upper()
        head = {field: str(index) for index, field in enumerate(self.head, start=1)}
        head["items"] = str(len(self.head) + 1)
        item = {field: str(offset) for offset, field in enumerate(self.item)}
        item["width"] = str(len(self.item))
        return {name: head, f"{name}_ITEM": item}


#: Seen-check, budget-check, admit and enqueue URLs (``crawler/frontier/lua/enqueue.lua``).
ENQUEUE = Message(
    "enqueue",
    head=("prefix", "hashes", "host_budget", "domain_budget", "grouping", "admit_level", "admit_new_hosts",
          "seen_load"),
    item=("key", "lh", "host", "domain", "level", "flags", "blob"),
    variable="the URL's politeness group when grouping is 2, then its `hashes` Bloom bit offsets",
    reply=("added", "duplicates", "over_host", "over_domain", "false_positives", "refused"),
)

#: Complete leases (``crawler/frontier/lua/ack.lua``).
ACK = Message(
    "ack",
    head=("prefix", "now_ms", "throttle_base_ms", "throttle_max_ms", "park_after", "park_base_ms", "park_max_ms",
          "horizon_ms", "grouped", "levels", "records_load", "per_key", "slot_limited"),
    item=("member", "next_allowed_ms", "completed_ms", "action", "not_before_ms", "blob", "host_signal",
          "dead_info", "record_key"),
    reply=("acked", "stale", "requeued", "dead", "parked"),
)

#: Expire leases, open hosts and claim URLs under leases (``crawler/frontier/lua/claim.lua``).
CLAIM = Message(
    "claim",
    head=("prefix", "now_ms", "max_claim", "lease_until_ms", "max_awake", "refill_limit", "expire_limit",
          "horizon_ms", "robots_first", "grouped", "records_load", "per_key", "min_delay_ms", "slot_limited"),
    item=("weight",),
    reply=("claimed", "expired", "moved", "next_ready_ms", "next_expiry_ms", "queued", "leased", "missing",
           "opened", "woken"),
)

#: The step's messages, by script.
STEP_MESSAGES: dict[str, Message] = {message.script: message for message in (ENQUEUE, ACK, CLAIM)}
