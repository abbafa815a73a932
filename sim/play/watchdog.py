"""Per-check time limits: a detector call that runs too long fails its episode, not the run.

Two layers, because no single one catches every hang:

1. In the process that runs the detector, a repeating ``SIGALRM`` tick looks at the current
   detector call (``start``, ``check``, ``record`` or ``on_message``) and raises
   :class:`CheckTimeout` into it when it has used more than the limit in CPU time (the
   thread's ``time.thread_time``, read at the ticks only, so a call is interrupted at most
   one tick after its limit), or has been running for :func:`blocked_limit` in wall time
   (a call blocked without computing: a sleep, a lock, a C call that lets signals through).
   CPU time, because wall time is not the call's own: beside another run (load ~25 on 2
   cores) a healthy µs check was failed as "took longer than 5 s" — a process waits for a
   CPU mid-call, and what a call pays for stretches tenfold (a full garbage collection,
   0.4 s of CPU, took 6 s of wall at load 13). The wall-clock backstop is far beyond any
   such stall. ``CheckTimeout`` derives from ``BaseException`` so a detector's
   ``except Exception`` cannot swallow it; a detector that swallows even that is
   interrupted again after each further limit. The caller turns it into a
   ``DetectorFailure`` for that episode.
2. A call stuck in C code never lets a signal handler run. The start time of the current
   call lives in a shared ``double`` (:attr:`Watchdog.cell`), so the pool's parent
   process (``sim.execute.pool``) sees a call that has run for more than :func:`hard_limit`
   (later than the backstop) and kills that worker; its task is reported as failed and the
   run goes on. In-process runs (``--workers 1``) have only the first layer.

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
from typing import Any, Callable

from detectors.protocol import unwatch_setup, watch_setup



class CheckTimeout(BaseException):
    """A detector call ran past the per-check limit."""


#: Seconds past the limit, in wall time, before a call that is not computing is interrupted.
DEFAULT_KILL_GRACE = 60.0


def blocked_limit(limit: float) -> float:
    """Wall seconds after which the alarm interrupts a call, whatever CPU it used.

    Generous on purpose: on a loaded machine a process can be off the CPU for seconds, and
    that is not the detector's time; the CPU limit interrupts an ordinary overrun at
    ``limit``. ``LOOPBENCH_KILL_GRACE=SECONDS`` changes the grace.
    """
    grace = float(os.environ.get("LOOPBENCH_KILL_GRACE") or DEFAULT_KILL_GRACE)
    return limit + max(limit, grace)


def hard_limit(limit: float) -> float:
    """Wall seconds after which the pool kills a worker whose call did not return: later
    than :func:`blocked_limit`, so it kills only what the alarm could not interrupt."""
    return blocked_limit(limit) + max(2.0, limit)


class Watchdog:
    """Marks detector calls (``begin``/``end``) and interrupts one that overruns ``limit``.

    ``limit`` of ``None`` or ``0`` disables the alarm; the marks are still kept. Use as a
    context manager around the work: the alarm is armed on entry and always cleared (and
    the previous ``SIGALRM`` handler restored) on exit. ``wall`` and ``cpu`` are the clocks
    (the thread's CPU time: the handler runs in the thread that makes the calls); the
    pool compares ``wall`` readings in :attr:`cell` with its own ``time.monotonic``.
    """

    def __init__(self, limit: float | None = None, cell: Any = None, *,
                 wall: Callable[[], float] = time.monotonic, cpu: Callable[[], float] = time.thread_time) -> None:
        self.limit = float(limit) if limit and limit > 0 else None
        self.blocked = blocked_limit(self.limit) if self.limit is not None else None
        self.cell = cell if cell is not None else ctypes.c_double(0.0)
        self._wall, self._cpu = wall, cpu
        self._call = 0  # counts begin(): which call a tick is looking at
        self._seen = 0  # the call the last tick looked at
        self._used = 0.0  # CPU the current call is known to have used, as of the last tick
        self._cpu_limit = self._wall_limit = 0.0  # when the current call is interrupted
        self._clocks = (0.0, 0.0)  # (thread CPU, wall) at the last tick
        self._prev: Any = None
        self._armed = False
        self._paused = 0.0
        self._hooks: tuple[Any, Any] | None = None
        self._mark_clocks()

    def _mark_clocks(self) -> None:
        if self.limit is not None:
            self._clocks = (self._cpu(), self._wall())

    def begin(self) -> None:
        # The hot path (once per detector call): no CPU clock is read here. Reading the
        # thread's CPU time is a system call, 0.5 µs here, about a third of what the harness
        # itself spent per call; the ticks read it instead (see ``tick``).
        self._call += 1
        self.cell.value = self._wall()

    def end(self) -> None:
        self.cell.value = 0.0

    def _pause(self) -> None:
        # Set-up work (``detectors.protocol.setup_work``): no call is timed while it runs,
        # for the alarm and for the pool's hard limit alike.
        self._paused = self.cell.value
        self.cell.value = 0.0

    def _resume(self) -> None:
        if self._paused:
            self.begin()  # the call goes on with a fresh limit,
            self._mark_clocks()  # counted exactly from here (set-up is rare: the system call is cheap enough)

    def __enter__(self) -> "Watchdog":
        self._hooks = watch_setup(self._pause, self._resume)
        self._mark_clocks()
        if self.limit is not None and threading.current_thread() is threading.main_thread():
            self._prev = signal.signal(signal.SIGALRM, self.on_alarm)
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

    def on_alarm(self, signum: int, frame: Any) -> None:
        """The ``SIGALRM`` handler: one :meth:`tick`."""
        self.tick()

    def tick(self) -> None:
        """Raise :class:`CheckTimeout` if the current call is past its CPU limit or the backstop.

        ``begin`` reads no CPU clock, so a call's CPU is counted from the ticks: over the
        ticks that see it running, the thread's CPU time since the previous tick; at the
        first tick that sees it, the CPU since the previous tick less the wall time between
        that tick and the call's start (the thread can have used no more CPU than that before
        the call began). That is a lower bound, short by at most the CPU the thread used
        between the previous tick and the call's start: a call is interrupted once it has used
        between ``limit`` and ``limit`` plus one tick interval of CPU, never before ``limit``.
        """
        if self.limit is None:
            return
        cpu, now = self._cpu(), self._wall()
        start, call = self.cell.value, self._call
        last_cpu, last_wall = self._clocks
        self._clocks = (cpu, now)
        if not start:
            return
        if call != self._seen:
            self._seen = call
            self._used = max(0.0, cpu - last_cpu - max(0.0, start - last_wall))
            self._cpu_limit, self._wall_limit = self.limit, start + self.blocked
        else:
            self._used += cpu - last_cpu
        if self._used > self._cpu_limit:
            message = f"a detector call took longer than {self.limit:g} s of CPU time (--check-timeout)"
        elif now > self._wall_limit:
            message = f"a detector call was blocked for over {self.blocked:g} s (--check-timeout {self.limit:g})"
        else:
            return
        # The next interruption, if this one is swallowed, comes one full limit later.
        self._cpu_limit, self._wall_limit = self._used + self.limit, now + self.limit
        raise CheckTimeout(message)
