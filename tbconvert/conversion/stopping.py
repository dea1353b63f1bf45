"""Stopping a conversion on Ctrl-C (SIGINT) or SIGTERM after its current transaction.

Inside :func:`on_signals` (the CLI's conversions), a first SIGINT or SIGTERM only asks the
conversion to stop: it does at the next point where no transaction is open (:func:`check`,
after a chunk commits, while waiting for workers or between ``--watch`` passes) by raising
:class:`Interrupted`.  A second signal stops at once (``KeyboardInterrupt``); the open
transaction then rolls back.  Either way the store holds whole chunks only (design §7), and the
next run continues from them.  ``--jobs`` workers ignore SIGINT, which a terminal sends to the
whole process group: the writer stops them.

Outside a conversion (the command line's start-up, its imports, a command that reads),
:func:`stop_at_once` makes either signal raise :class:`Stopped`, so that the command ends
with one line and exit 130 / 143 at any moment (SPEC §2), not with a traceback or click's
``Aborted!``.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tbconvert.conversion.summary import Summary

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_requested: list[int] = []
_event = threading.Event()


class Interrupted(Exception):
    """The conversion stopped on a signal, between transactions.

    Attributes:
        signum: The signal; exit_code: 128 + signum (130 for SIGINT, 143 for SIGTERM).
        kept: What the store keeps of the conversion, as a phrase (set by the job).
        summary: What the stopped pass counted of the chunks it committed (set by the job).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum
        self.exit_code = 128 + signum
        self.kept = "every transaction committed before it"
        self.summary: Summary | None = None


class Stopped(BaseException):
    """A signal that arrived outside :func:`on_signals` (see :func:`stop_at_once`).

    A BaseException, as ``KeyboardInterrupt`` is, so that no ``except Exception`` swallows it;
    not a ``KeyboardInterrupt``, which click turns into ``Aborted!`` and exit 1.

    Attributes:
        signum: The signal; exit_code: 128 + signum (130 for SIGINT, 143 for SIGTERM).
    """

    def __init__(self, signum: int) -> None:
        name = signal.Signals(signum).name
        super().__init__(
            f"stopped by {name}: nothing half-made is kept; run the same command again to continue"
        )
        self.signum = signum
        self.exit_code = 128 + signum


class StoppedAtOnce(KeyboardInterrupt):
    """A second signal during a conversion: it stops at once, rolling back the transaction
    under way.  ``exit_code`` is the first signal's (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.exit_code = 128 + signum


def stop_at_once() -> None:
    """From now on, SIGINT and SIGTERM raise :class:`Stopped` in the main thread (a program's
    entry point calls this first; a conversion's :func:`on_signals` takes over while it runs
    and puts this back after)."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signum)

    for number in _SIGNALS:
        signal.signal(number, stop)


@contextmanager
def on_signals() -> Iterator[None]:
    """Within, SIGINT and SIGTERM ask for a stop after the current transaction (main thread
    only: elsewhere signals keep their handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ask(signum: int, _frame: FrameType | None) -> None:
        if _requested:
            raise StoppedAtOnce(_requested[0])  # asked twice: stop now, rolling back
        _requested.append(signum)
        _event.set()

    previous = {number: signal.signal(number, ask) for number in _SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _requested.clear()
        _event.clear()


def requested() -> bool:
    """True once a stop was asked for (a group of chunks then commits without waiting to fill)."""
    return bool(_requested)


def check() -> None:
    """Raise :class:`Interrupted` if a stop was asked for."""
    if _requested:
        raise Interrupted(_requested[0])


def pause(seconds: float) -> None:
    """Sleep, cut short by a stop request (then raise :class:`Interrupted`)."""
    _event.wait(seconds)
    check()


def ignore_in_worker() -> None:
    """In a ``--jobs`` worker: ignore SIGINT (the writer stops the workers) and die on
    SIGTERM as a process does by default (``terminate()``), whatever the parent installed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
