"""Running detector tasks on a local process pool, with results identical to one process.

A task is one detector in one mode (open or closed loop) over the whole suite. Workers
receive the suite's scenarios and episodes once (fork start), build their own detector
from its spec, and send back rows; the parent assembles them in a fixed order, so the
files do not depend on which worker finished first.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from typing import Any, Sequence

from scenarios.base import Scenario

from .tree import Episode

_EPISODES: Sequence[Episode] = ()
_SCENARIOS: Sequence[Scenario] = ()


def _init(episodes: Sequence[Episode], scenarios: Sequence[Scenario]) -> None:
    global _EPISODES, _SCENARIOS
    _EPISODES, _SCENARIOS = episodes, scenarios


def _task(task: tuple[str, Any]) -> tuple[tuple[str, str], Any]:
    from .runner import _timing_row, run_closed, run_open

    kind, spec = task
    det = spec.build()
    if kind == "open":
        res = run_open(spec.label, det, _EPISODES)
        ns = [s.ns for sc in res.scores.values() for s in sc]
        return (kind, spec.label), (res, _timing_row(spec.label, "open", ns, res.seconds, det))
    t0 = time.perf_counter()
    stats = run_closed(spec.label, det, _SCENARIOS, episodes=_EPISODES)
    ns = [n for st in stats.values() for n in st.check_ns]
    for st in stats.values():
        st.check_ns = []  # measured already; don't ship them back
    return (kind, spec.label), (stats, _timing_row(spec.label, "closed", ns, time.perf_counter() - t0, det))


def default_workers() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def run_tasks(tasks: Sequence[tuple[str, Any]], episodes: Sequence[Episode], scenarios: Sequence[Scenario],
              workers: int = 0, progress: bool = False) -> dict[tuple[str, str], Any]:
    """Run every (kind, DetectorSpec) task; ``workers`` 0 means one per core, 1 in this process."""
    n = workers or default_workers()
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="detectors", unit="task", file=sys.stderr, leave=False, dynamic_ncols=True)
    out: dict[tuple[str, str], Any] = {}
    if n <= 1 or len(tasks) <= 1:
        _init(episodes, scenarios)
        for t in tasks:
            key, value = _task(t)
            out[key] = value
            if bar:
                bar.update()
    else:
        ctx = mp.get_context("fork")
        # Closed-loop tasks are the long ones: start them first so the pool ends together.
        order = sorted(tasks, key=lambda t: (t[0] != "closed",))
        with ctx.Pool(min(n, len(tasks)), initializer=_init, initargs=(episodes, scenarios)) as pool:
            for key, value in pool.imap_unordered(_task, order, chunksize=1):
                out[key] = value
                if bar:
                    bar.update()
    if bar:
        bar.close()
    return out
