"""Per-check time limits: a detector call that runs too long fails its episode, not the run.

Two layers, because no single one catches every hang:

1. In the process that runs the detector, a repeating ``SIGALRM`` tick looks at how long
   the current detector call (``start``, ``check``, ``record`` or ``on_message``) has been
   running and, past the limit, raises :class:`CheckTimeout` into it. It derives from
   ``BaseException`` so a detector's ``except Exception`` cannot swallow it; a detector
   that swallows even that is interrupted again after each further limit. The caller
   turns it into a ``DetectorFailure`` for that episode.
2. A call stuck in C code never lets a signal handler run. The start time of the current
   call lives in a shared ``double`` (:attr:`Watchdog.cell`), so the pool's parent
   process (``sim.execute.pool``) sees a call that overran by more than :func:`hard_limit` and
   kills that worker; its task is reported as failed and the run goes on. In-process runs
   (``--workers 1``) have only the first layer.

One-time set-up inside a call (a detector loading its model on the first text it must
encode, marked with ``detectors.protocol.setup_work``) pauses both layers; the call then
gets a fresh limit.

Signals are only available in a process's main thread; elsewhere the watchdog only keeps
the start times (the pool's layer still works).
"""
from __future__ import annotations

import ctypes
import os
import signal
import threading
import time
from typing import Any

from detectors.protocol import unwatch_setup, watch_setup



class CheckTimeout(BaseException):
    """A detector call ran past the per-check limit."""


#: Seconds past the limit before the pool kills a worker whose call never returned.
DEFAULT_KILL_GRACE = 60.0


def hard_limit(limit: float) -> float:
    """How long the pool waits before killing a worker whose call did not return.

    Generous on purpose: on a loaded machine a worker can be descheduled for seconds, and
    killing it there would turn a slow machine into a failed detector; the ``SIGALRM``
    limit still interrupts an ordinary overrun at ``limit``. ``LOOPBENCH_KILL_GRACE=SECONDS``
    changes the grace.
    """
    grace = float(os.environ.get("LOOPBENCH_KILL_GRACE") or DEFAULT_KILL_GRACE)
    return limit + max(2.0, limit, grace)


class Watchdog:
    """Marks detector calls (``begin``/``end``) and interrupts one that overruns ``limit``.

    ``limit`` of ``None`` or ``0`` disables the alarm; the marks are still kept. Use as a
    context manager around the work: the alarm is armed on entry and always cleared (and
    the previous ``SIGALRM`` handler restored) on exit.
    """

    def __init__(self, limit: float | None = None, cell: Any = None) -> None:
        self.limit = float(limit) if limit and limit > 0 else None
        self.cell = cell if cell is not None else ctypes.c_double(0.0)
        self._next = 0.0
        self._prev: Any = None
        self._armed = False
        self._paused = 0.0
        self._hooks: tuple[Any, Any] | None = None

    def begin(self) -> None:
        now = time.monotonic()
        self.cell.value = now
        if self.limit is not None:
            self._next = now + self.limit

    def end(self) -> None:
        self.cell.value = 0.0

    def _pause(self) -> None:
        # Set-up work (``detectors.protocol.setup_work``): no call is timed while it runs,
        # for the alarm and for the pool's hard limit alike.
        self._paused = self.cell.value
        self.cell.value = 0.0

    def _resume(self) -> None:
        if self._paused:
            self.begin()  # the call goes on with a fresh limit

    def __enter__(self) -> "Watchdog":
        self._hooks = watch_setup(self._pause, self._resume)
        if self.limit is not None and threading.current_thread() is threading.main_thread():
            self._prev = signal.signal(signal.SIGALRM, self._on_alarm)
            tick = min(0.25, self.limit / 4)
            signal.setitimer(signal.ITIMER_REAL, tick, tick)
            self._armed = True
        return self

    def __exit__(self, *exc: Any) -> None:
        self.end()
        if self._hooks is not None:
            unwatch_setup(self._hooks)
            self._hooks = None
        if self._armed:
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
            signal.signal(signal.SIGALRM, self._prev if self._prev is not None else signal.SIG_DFL)
            self._armed = False

    def _on_alarm(self, signum: int, frame: Any) -> None:
        if self.cell.value and time.monotonic() > self._next:
            # The next interruption, if this one is swallowed, comes one full limit later.
            self._next = time.monotonic() + self.limit
            raise CheckTimeout(f"a detector call took longer than {self.limit:g} s (--check-timeout)")

