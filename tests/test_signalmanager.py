"""``LeanSignalManager`` (``TUNING_LEAN_SIGNALS``) sends as Scrapy's ``SignalManager`` does: the same
receivers in the same order, the same arguments, the same answers and logged errors, after receivers
connect, disconnect or are collected; an awaited send still runs asynchronous receivers together.

Each scenario runs on both managers and their answers are compared (a ``Failure`` or an exception by
its type and message)."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable
from typing import Any

import pytest
from scrapy.exceptions import StopDownload
from scrapy.signalmanager import SignalManager
from twisted.internet import defer
from twisted.python.failure import Failure

from crawler.extensions.signalmanager import LeanSignalManager, use_lean_signals

SIGNAL = object()
OTHER = object()


class Sender:
    pass


class Receivers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def some(self, spider: Any, response: Any = None) -> str:
        self.calls.append(("some", {"spider": spider, "response": response}))
        return "some"

    def everything(self, **kwargs: Any) -> str:
        self.calls.append(("everything", {**kwargs, "sender": isinstance(kwargs.get("sender"), Sender)}))
        return "everything"

    def signal_and_sender(self, signal: Any, sender: Any) -> tuple[bool, bool]:
        self.calls.append(("signal_and_sender", {}))
        return signal is SIGNAL, isinstance(sender, Sender)

    def nothing(self) -> None:
        self.calls.append(("nothing", {}))

    def fails(self, spider: Any) -> None:
        raise ValueError("the receiver failed")

    def stops(self) -> None:
        raise StopDownload(fail=False)

    def deferred(self) -> defer.Deferred[int]:
        return defer.succeed(1)


class CallableReceiver:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, item: Any, spider: Any = None) -> str:
        self.seen.append({"item": item, "spider": spider})
        return "callable"


def plain_function(item: Any) -> Any:
    return ("function", item)


def answers(responses: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """The answers of a send, comparable across managers: each receiver by its name, a Failure or an exception
    by its type and text."""
    out = []
    for receiver, result in responses:
        if isinstance(result, Failure):
            result = ("Failure", type(result.value), str(result.value))
        elif isinstance(result, BaseException):
            result = ("exception", type(result), str(result))
        elif isinstance(result, defer.Deferred):
            result = "Deferred"
        out.append((getattr(receiver, "__qualname__", type(receiver).__qualname__), result))
    return out


def both(scenario: Callable[[type[SignalManager]], Any]) -> tuple[Any, Any]:
    return scenario(SignalManager), scenario(LeanSignalManager)


def error_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    lines = [record.getMessage().split(":")[0] for record in caplog.records if record.levelno >= logging.ERROR]
    caplog.clear()
    return lines


def test_the_same_receivers_get_the_same_arguments_and_answers(caplog: pytest.LogCaptureFixture) -> None:
    def scenario(cls: type[SignalManager]) -> Any:
        sender, receivers, callable_receiver = Sender(), Receivers(), CallableReceiver()
        manager = cls(sender)
        for receiver in (receivers.some, receivers.everything, receivers.signal_and_sender, receivers.nothing,
                         receivers.fails, receivers.stops, receivers.deferred, callable_receiver, plain_function):
            manager.connect(receiver, SIGNAL)
        manager.connect(receivers.nothing, OTHER)
        sent = [answers(manager.send_catch_log(SIGNAL, spider="s", response="r", item="i")) for _ in range(3)]
        other = answers(manager.send_catch_log(OTHER, spider="s"))
        return sent, other, receivers.calls, callable_receiver.seen, error_lines(caplog)

    scrapy_result, lean_result = both(scenario)
    assert lean_result == scrapy_result
    sent, _, calls, seen, errors = lean_result
    assert sent[0] == sent[2]
    # What each took: only what it names; everything with **kwargs (signal and sender included).
    assert calls[0] == ("some", {"spider": "s", "response": "r"})
    assert calls[1][1] == {"spider": "s", "response": "r", "item": "i", "signal": SIGNAL, "sender": True}
    assert seen[0] == {"item": "i", "spider": "s"}
    # Logged: the failure and the Deferred, three times each; StopDownload never.
    assert sorted(errors) == sorted(["Error caught on signal handler", "Cannot return deferreds from signal handler"] * 3)


def test_a_receiver_pydispatcher_cannot_inspect_fails_alone_as_in_scrapy(caplog: pytest.LogCaptureFixture) -> None:
    def scenario(cls: type[SignalManager]) -> Any:
        receivers = Receivers()
        manager = cls(Sender())
        manager.connect(len, SIGNAL, weak=False)  # a builtin: no code for robustApply to read
        manager.connect(receivers.nothing, SIGNAL)
        sent = answers(manager.send_catch_log(SIGNAL, spider="s"))
        return sent, receivers.calls, error_lines(caplog)

    scrapy_result, lean_result = both(scenario)
    assert lean_result == scrapy_result
    sent, calls, errors = lean_result
    assert sent[0][1][:2] == ("Failure", ValueError) and calls == [("nothing", {})]
    assert errors == ["Error caught on signal handler"]


def test_dont_log_is_honoured(caplog: pytest.LogCaptureFixture) -> None:
    def scenario(cls: type[SignalManager]) -> Any:
        receivers = Receivers()
        manager = cls(Sender())
        manager.connect(receivers.fails, SIGNAL)
        quiet = answers(manager.send_catch_log(SIGNAL, spider="s", dont_log=ValueError))
        return quiet, error_lines(caplog)

    scrapy_result, lean_result = both(scenario)
    assert lean_result == scrapy_result
    assert lean_result[1] == []


def test_receivers_that_connect_disconnect_or_are_collected_are_seen_at_the_next_send() -> None:
    def scenario(cls: type[SignalManager]) -> Any:
        manager = cls(Sender())
        first, second = Receivers(), Receivers()
        manager.connect(first.nothing, SIGNAL)
        rounds = [len(manager.send_catch_log(SIGNAL))]
        manager.connect(second.nothing, SIGNAL)
        manager.connect(plain_function, SIGNAL)
        rounds.append(len(manager.send_catch_log(SIGNAL, item=1)))
        manager.disconnect(first.nothing, SIGNAL)
        rounds.append(len(manager.send_catch_log(SIGNAL, item=1)))
        del second
        gc.collect()
        rounds.append(len(manager.send_catch_log(SIGNAL, item=1)))
        # A receiver of any signal, and one from any sender (PyDispatcher's other tables).
        any_signal = Receivers()
        manager.connect(any_signal.nothing, signal=_any())
        rounds.append(len(manager.send_catch_log(SIGNAL, item=1)))
        from_anyone = Receivers()
        SignalManager(_any()).connect(from_anyone.nothing, SIGNAL)
        rounds.append(len(manager.send_catch_log(SIGNAL, item=1)))
        SignalManager(_any()).disconnect(from_anyone.nothing, SIGNAL)
        manager.disconnect(any_signal.nothing, signal=_any())
        rounds.append(len(manager.send_catch_log(SIGNAL, item=1)))
        return rounds

    scrapy_result, lean_result = both(scenario)
    assert lean_result == scrapy_result == [1, 3, 2, 1, 2, 3, 1]


def _any() -> Any:
    from pydispatch.dispatcher import Any as DispatchAny

    return DispatchAny


def test_an_awaited_send_runs_asynchronous_receivers_together(caplog: pytest.LogCaptureFixture) -> None:
    def scenario(cls: type[SignalManager]) -> Any:
        async def run() -> Any:
            manager = cls(Sender())
            ready = asyncio.Event()

            async def waits(item: Any) -> str:
                await asyncio.wait_for(ready.wait(), 5)  # set by the receiver after it: both run at once
                return f"waited {item}"

            async def sets(item: Any) -> str:
                await asyncio.sleep(0)
                ready.set()
                return f"set {item}"

            async def fails_later(spider: Any) -> None:
                await asyncio.sleep(0)
                raise ValueError("failed while awaited")

            receivers = Receivers()
            for receiver in (waits, sets, receivers.some, fails_later, receivers.fails, receivers.nothing):
                manager.connect(receiver, SIGNAL)
            sent = answers(await manager.send_catch_log_async(SIGNAL, item="i", spider="s"))
            quiet = answers(await manager.send_catch_log_async(SIGNAL, item="j", spider="s",
                                                               dont_log=(ValueError,)))
            return sent, quiet, error_lines(caplog)

        return asyncio.run(run())

    scrapy_result, lean_result = both(scenario)
    assert [[result for _, result in sent] for sent in lean_result[:2]] \
        == [[result for _, result in sent] for sent in scrapy_result[:2]]
    assert lean_result[2] == scrapy_result[2] == ["Error caught on signal handler"] * 2
    sent = [result for _, result in lean_result[0]]
    assert sent[:3] == ["waited i", "set i", "some"]
    assert sent[3:] == [("exception", ValueError, "failed while awaited"),
                        ("exception", ValueError, "the receiver failed"), None]


def test_only_scrapys_own_manager_is_made_lean() -> None:
    class Crawler:
        def __init__(self, signals: SignalManager) -> None:
            self.signals = signals

    class Custom(SignalManager):
        pass

    plain, custom = Crawler(SignalManager()), Crawler(Custom())
    receivers = Receivers()
    plain.signals.connect(receivers.nothing, SIGNAL)
    assert use_lean_signals(plain) is True and type(plain.signals) is LeanSignalManager
    assert len(plain.signals.send_catch_log(SIGNAL)) == 1  # connected before, still connected
    assert use_lean_signals(custom) is False and type(custom.signals) is Custom


def test_what_the_manager_remembers_is_bounded() -> None:
    manager = LeanSignalManager(Sender())
    for _ in range(600):
        manager.send_catch_log(object())
    assert len(manager._plans) <= 256
