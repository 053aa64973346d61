"""Ctrl-C and SIGTERM as one exception, so every command stops the same clean way.

SIGINT already raises KeyboardInterrupt; SIGTERM would end the process on the spot, skipping
the ``finally`` blocks that end pool workers and remove a half-written result folder. While
``interruptible()`` is active SIGTERM raises ``Interrupted`` (a KeyboardInterrupt) instead.
Exit statuses follow the shell's 128 + signal number: 130 for SIGINT, 143 for SIGTERM.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Interrupted(KeyboardInterrupt):
    """The command was asked to stop by a signal; ``signum`` says which."""

    def __init__(self, signum: int | str = signal.SIGINT):
        # rebuilt from its args by code that copies exceptions (SimPy re-raises a failed
        # process's error as a new one), so the name is accepted as well as the number
        sig = signal.Signals[signum] if isinstance(signum, str) else signal.Signals(signum)
        super().__init__(sig.name)
        self.signum = int(sig)


def exit_status(exc: KeyboardInterrupt) -> int:
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


def signal_name(exc: KeyboardInterrupt) -> str:
    return signal.Signals(getattr(exc, "signum", signal.SIGINT)).name


def _raise_interrupted(signum, _frame) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """SIGTERM raises ``Interrupted`` in the main thread for the duration (elsewhere a no-op:
    only the main thread may set handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
