"""Running detector tasks on local worker processes, with results identical to one process.

A task is one detector in one mode (open or closed loop) over the whole suite. Workers
are forked, so they see the suite's scenarios and episodes without copying them; each
builds its own detector from its spec and sends back rows; the caller assembles them in
a fixed order, so the files do not depend on which worker finished first.

A task never takes the run down with it: a detector that raises, returns garbage or
overruns the per-check limit fails only its episodes (``sim.watchdog``); a worker that
dies (a crash in C code) or whose detector call is stuck past the hard limit is killed,
and its task is reported as failed on every episode. ``on_result`` sees each finished
task at once (the runner checkpoints it). On an interrupt, every worker is terminated.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import time
from multiprocessing.connection import wait
from typing import Any, Callable, Sequence

from scenarios.base import Scenario

from .tree import Episode
from .watchdog import Watchdog, hard_limit

_EPISODES: Sequence[Episode] = ()
_SCENARIOS: Sequence[Scenario] = ()


def _init(episodes: Sequence[Episode], scenarios: Sequence[Scenario]) -> None:
    global _EPISODES, _SCENARIOS
    _EPISODES, _SCENARIOS = episodes, scenarios


def _task(task: tuple[str, Any], watch: Watchdog) -> tuple[tuple[str, str], Any]:
    from .runner import _timing_row, run_closed, run_open

    kind, spec = task
    det = spec.build()
    with watch:
        if kind == "open":
            res = run_open(spec.label, det, _EPISODES, watch=watch)
            ns = [s.ns for sc in res.scores.values() for s in sc]
            return (kind, spec.label), (res, _timing_row(spec.label, "open", ns, res.seconds, det))
        t0 = time.perf_counter()
        stats = run_closed(spec.label, det, _SCENARIOS, episodes=_EPISODES, watch=watch)
    ns = [n for st in stats.values() for n in st.check_ns]
    for st in stats.values():
        st.check_ns = []  # measured already; don't ship them back
    return (kind, spec.label), (stats, _timing_row(spec.label, "closed", ns, time.perf_counter() - t0, det))


def failed_task(task: tuple[str, Any], message: str) -> Any:
    """The result of a task that produced nothing: every episode failed with ``message``."""
    from .harness import ClosedLoopStats
    from .runner import OpenResult, _timing_row

    kind, spec = task
    timing = _timing_row(spec.label, kind, [], 0.0, None)
    if kind == "open":
        return OpenResult(spec.label, {}, {ep.id: message for ep in _EPISODES}, 0.0), timing
    return {sc.id: ClosedLoopStats(ended="detector_error", success=False, detector_error=message)
            for sc in _SCENARIOS}, timing


def _run_guarded(task: tuple[str, Any], watch: Watchdog) -> tuple[tuple[str, str], Any]:
    from .openloop import describe

    try:
        return _task(task, watch)
    except Exception as exc:  # noqa: BLE001 — e.g. the detector cannot be built in the worker
        return (task[0], task[1].label), failed_task(task, f"task failed: {describe(exc)}")


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _worker(conn: Any, cell: Any, limit: float | None) -> None:
    # The parent handles Ctrl-C (it reaches the whole process group) and terminates us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(_run_guarded(task, Watchdog(limit, cell)))


class _Worker:
    def __init__(self, ctx: Any, limit: float | None) -> None:
        self.cell = ctx.RawValue("d", 0.0)
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.cell, limit), daemon=True)
        self.proc.start()
        child.close()
        self.task: tuple[str, Any] | None = None

    def stop(self, kill: bool = False) -> None:
        if self.proc.is_alive():
            self.proc.kill() if kill else self.proc.terminate()
        self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2)
        self.conn.close()


def _death(proc: Any) -> str:
    code = proc.exitcode
    if code is not None and code < 0:
        try:
            return f"worker died of signal {signal.Signals(-code).name}"
        except ValueError:
            return f"worker died of signal {-code}"
    return f"worker exited with code {code}"


def run_tasks(tasks: Sequence[tuple[str, Any]], episodes: Sequence[Episode], scenarios: Sequence[Scenario],
              workers: int = 0, progress: bool = False, check_timeout: float | None = None,
              on_result: Callable[[tuple[str, str], Any], None] | None = None) -> dict[tuple[str, str], Any]:
    """Run every (kind, DetectorSpec) task; ``workers`` 0 means one per core, 1 in this process."""
    n = workers or default_workers()
    bar = None
    if progress and tasks:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="detectors", unit="task", file=sys.stderr, leave=False, dynamic_ncols=True)
    out: dict[tuple[str, str], Any] = {}

    def done(key: tuple[str, str], value: Any) -> None:
        out[key] = value
        if on_result is not None:
            on_result(key, value)
        if bar:
            bar.update()

    _init(episodes, scenarios)
    try:
        if n <= 1 or len(tasks) <= 1:
            for t in tasks:
                done(*_run_guarded(t, Watchdog(check_timeout)))
        else:
            _run_pool(tasks, min(n, len(tasks)), check_timeout, done)
    finally:
        if bar:
            bar.close()
    return out


def _run_pool(tasks: Sequence[tuple[str, Any]], n: int, limit: float | None,
              done: Callable[[tuple[str, str], Any], None]) -> None:
    ctx = mp.get_context("fork")
    # Closed-loop tasks are the long ones: start them first so the workers end together.
    pending = sorted(tasks, key=lambda t: (t[0] != "closed",))[::-1]
    hard = hard_limit(limit) if limit else None
    pool: list[_Worker] = []
    try:
        while pending or any(w.task for w in pool):
            for w in pool:
                if w.task is None and pending:
                    w.task = pending.pop()
                    w.conn.send(w.task)
            while pending and len(pool) < n:
                w = _Worker(ctx, limit)
                pool.append(w)
                w.task = pending.pop()
                w.conn.send(w.task)
            busy = [w for w in pool if w.task is not None]
            wait([w.conn for w in busy] + [w.proc.sentinel for w in busy], timeout=0.5)
            for w in busy:
                failure = None
                if w.conn.poll():
                    try:
                        key, value = w.conn.recv()
                    except (EOFError, OSError):
                        failure = _death(w.proc) if not w.proc.is_alive() else "worker sent no result"
                    else:
                        w.task = None
                        done(key, value)
                        continue
                elif not w.proc.is_alive():
                    failure = _death(w.proc)
                elif hard is not None and w.cell.value and time.monotonic() - w.cell.value > hard:
                    failure = (f"a detector call ran over {hard:g} s and could not be interrupted "
                               f"(--check-timeout {limit:g}); its worker was killed")
                if failure is not None:
                    task, w.task = w.task, None
                    w.stop(kill=True)
                    pool.remove(w)
                    done((task[0], task[1].label), failed_task(task, failure))
    finally:
        for w in pool:
            if w.proc.is_alive() and w.task is None:
                try:
                    w.conn.send(None)
                except OSError:
                    pass
        for w in pool:
            w.stop(kill=w.task is not None)
