"""Scrapy's signal manager, sending the same way at a fraction of the cost (``TUNING_LEAN_SIGNALS``).

A crawl sends a few signals per page with receivers (``headers_received``,
``response_received``, ``item_scraped``). For each send and each receiver,
Scrapy (through PyDispatcher) walks four tables of receivers, resolves every
weak reference, inspects the receiver's code to know which arguments it takes
(``robustApply``) and, for a send that may be awaited
(``send_catch_log_async``), runs each receiver in a task of its own. None of
that changes between two sends but when a receiver connects, disconnects or is
collected.

:class:`LeanSignalManager` remembers, per sender and signal, the receivers
PyDispatcher gives and the arguments each takes, and works them out again
whenever PyDispatcher's tables for that pair change (their lists are compared
on every send: a receiver connected by any means, removed or collected is seen
at the next send). The rest is Scrapy's: receivers are called in
PyDispatcher's order with the same arguments; an exception is caught, logged
as ``Error caught on signal handler`` (unless it is ``StopDownload`` or in
``dont_log``) and returned in its place (a ``Failure`` from
:meth:`~LeanSignalManager.send_catch_log`, the exception itself from
:meth:`~LeanSignalManager.send_catch_log_async`); a Deferred returned to a
plain send is logged as an error. :meth:`~LeanSignalManager.send_catch_log_async`
calls each receiver at once and awaits together the awaitables (coroutines,
futures, Deferreds) they return, so asynchronous receivers still run
concurrently; no task is made for a receiver that returns a plain value.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from functools import partial
from inspect import isawaitable
from typing import Any

from pydispatch.dispatcher import WEAKREF_TYPES, connections, getAllReceivers
from pydispatch.dispatcher import Any as DispatchAny
from pydispatch.robustapply import function as receiver_code
from pydispatch.robustapply import robustApply
from scrapy.exceptions import StopDownload
from scrapy.signalmanager import SignalManager
from scrapy.utils.defer import ensure_awaitable
from scrapy.utils.python import global_object_name
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

logger = logging.getLogger("scrapy.utils.signal")  # where Scrapy logs a receiver's error

_ANY_SENDER = id(DispatchAny)

#: A receiver as PyDispatcher keeps it (a weak reference, or the receiver itself), and the names of the
#: arguments it takes (None: it takes any, ``**kwargs``; ROBUST: PyDispatcher cannot tell, so it is called
#: through ``robustApply`` as Scrapy calls it, which raises the error Scrapy logs).
_Entry = tuple[Any, bool, tuple[str, ...] | None]
ROBUST: tuple[str, ...] = ("<robustApply>",)
#: PyDispatcher's four lists of receivers for a sender and a signal (``getAllReceivers``' four; None
#: for an empty or missing one).
_Tables = tuple[list[Any] | None, list[Any] | None, list[Any] | None, list[Any] | None]


def _tables(sender_key: int, signal: Any) -> _Tables:
    """PyDispatcher's lists for a sender and a signal, as they are now (the lists themselves)."""
    by_sender, by_any = connections.get(sender_key), connections.get(_ANY_SENDER)
    if by_sender is None:
        mine = other = None
    else:
        mine, other = by_sender.get(signal) or None, by_sender.get(DispatchAny) or None
    if by_any is None:
        return mine, other, None, None
    return mine, other, by_any.get(signal) or None, by_any.get(DispatchAny) or None


def _entry(stored: Any) -> _Entry | None:
    """A receiver as PyDispatcher stores it, with the arguments it takes (``robustApply``'s rule:
    its positional-or-keyword parameters, past ``self`` for a method); None if it is gone."""
    weak = isinstance(stored, WEAKREF_TYPES)
    receiver = stored() if weak else stored
    if receiver is None:
        return None
    try:
        _, code, start = receiver_code(receiver)
    except Exception:  # not a function, method or callable object with code (a builtin, say)
        return stored, weak, ROBUST
    accepted = None if code.co_flags & 8 else tuple(code.co_varnames[start:code.co_argcount])
    return stored, weak, accepted


def _copied(tables: _Tables) -> _Tables:
    """A snapshot of PyDispatcher's lists (:func:`_tables`), to compare with them at the next send."""
    mine, other, anys, every = tables
    return mine and list(mine), other and list(other), anys and list(anys), every and list(every)


class LeanSignalManager(SignalManager):
    """See the module's docstring. Set on the crawler's signal manager (``__class__``) by
    :class:`crawler.extensions.tuning.RuntimeTuning`."""

    #: Per (sender id, signal): copies of PyDispatcher's lists as they were, and the receivers worked out of them.
    _plans: dict[tuple[int, Any], tuple[_Tables, list[_Entry]]]

    def _receivers(self, sender: Any, signal: Any) -> list[_Entry]:
        try:
            plans = self._plans
        except AttributeError:  # a SignalManager made a LeanSignalManager after it was built
            plans = self._plans = {}
        key = (id(sender), signal)
        tables = _tables(key[0], signal)
        plan = plans.get(key)
        if plan is not None and plan[0] == tables:  # lists compare by length, then receiver by receiver
            return plan[1]
        entries = [entry for entry in map(_entry, getAllReceivers(sender, signal)) if entry is not None]
        if len(plans) >= 256:  # bounded: senders and signals are few, but nothing stops a program making more
            plans.clear()
        plans[key] = (_copied(tables), entries)
        return entries

    def _calls(self, signal: Any, kwargs: dict[str, Any]) -> tuple[
            list[tuple[Any, Callable[..., Any], dict[str, Any]]], tuple[type[BaseException], ...], Any]:
        """The receivers, each with what to call and its arguments; the exceptions not to log; the spider."""
        sender = kwargs.pop("sender", self.sender)
        dont_log = kwargs.pop("dont_log", ())
        if type(dont_log) is not tuple:  # Scrapy's rule; the common case (none given) without an ABC check
            dont_log = tuple(dont_log) if isinstance(dont_log, Sequence) else (dont_log,)
        named = {**kwargs, "signal": signal, "sender": sender}
        calls = []
        for stored, weak, accepted in self._receivers(sender, signal):
            receiver = stored() if weak else stored
            if receiver is None:
                continue
            if accepted is None:
                calls.append((receiver, receiver, named))
            elif accepted is ROBUST:
                calls.append((receiver, partial(robustApply, receiver), named))
            else:
                calls.append((receiver, receiver, {name: named[name] for name in accepted if name in named}))
        return calls, dont_log, kwargs.get("spider")

    def send_catch_log(self, signal: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        calls, dont_log, spider = self._calls(signal, kwargs)
        dont_log += (StopDownload,)
        responses: list[tuple[Any, Any]] = []
        for receiver, function, arguments in calls:
            result: Any
            try:
                result = function(**arguments)
                if isinstance(result, Deferred):
                    logger.error("Cannot return deferreds from signal handler: %(receiver)s",
                                 {"receiver": receiver}, extra={"spider": spider})
            except dont_log:
                result = Failure()  # type: ignore[no-untyped-call]
            except Exception:
                result = Failure()  # type: ignore[no-untyped-call]
                _log_error(receiver, spider)
            responses.append((receiver, result))
        return responses

    async def send_catch_log_async(self, signal: Any, **kwargs: Any) -> list[tuple[Any, Any]]:
        calls, dont_log, spider = self._calls(signal, kwargs)
        responses: list[tuple[Any, Any]] = []
        waiting: list[tuple[int, Any, Any]] = []
        for receiver, function, arguments in calls:
            result: Any
            try:
                result = function(**arguments)
            except dont_log as exc:
                result = exc
            except Exception as exc:
                _log_error(receiver, spider)
                result = exc
            else:
                if isinstance(result, Deferred) or isawaitable(result):
                    waiting.append((len(responses), receiver,
                                    ensure_awaitable(result, _warn=global_object_name(receiver))))
            responses.append((receiver, result))
        if waiting:
            outcomes = await asyncio.gather(*(awaitable for _, _, awaitable in waiting), return_exceptions=True)
            for (at, receiver, _), outcome in zip(waiting, outcomes):
                if isinstance(outcome, Exception) and not isinstance(outcome, dont_log):
                    _log_error(receiver, spider, outcome)
                responses[at] = (receiver, outcome)
        return responses


def _log_error(receiver: Any, spider: Any, exc: BaseException | None = None) -> None:
    logger.error("Error caught on signal handler: %(receiver)s", {"receiver": receiver},
                 exc_info=exc or True, extra={"spider": spider})


def use_lean_signals(crawler: Any) -> bool:
    """Make the crawler's signal manager a :class:`LeanSignalManager` if it is Scrapy's own (one of
    another class is left as it is); whether it is one. Its receivers stay connected: PyDispatcher
    keeps them, by the crawler as sender."""
    manager = crawler.signals
    if type(manager) is SignalManager:
        manager.__class__ = LeanSignalManager
    return isinstance(manager, LeanSignalManager)
