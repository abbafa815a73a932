"""The cyclic garbage collector, for processes that build a large heap and keep it.

A run's parent process builds the suite (scenarios, episodes and the closed loop's tapes:
millions of objects on the default suite), then takes in every detector task's results
and turns them into rows, and it keeps all of that until the run folder is written.
CPython's automatic *full* collection walks every tracked object each time it fires. In a
warm default run (every detector, 2 cores) it fired 18 times in the parent, took 0.6 s
each on average (10 to 11 s in all, more than the run's result writing), and freed almost
nothing: a few dozen objects in each of the nine during generation, none in the nine after.
The young generations, where short-lived cycles die, are still collected as usual.

Detector code is another matter: a plug-in's per-episode state may hold cycles that live
long enough to reach the old generation, and only a full collection frees those. Code that
runs detectors inside a ``no_full_collections`` block (the in-process task path, the forked
pool workers) therefore gets the ordinary collector back (``ordinary_collections``,
``restore_ordinary``), with the suite it runs beside kept out of reach (``frozen``; the
pool workers freeze what they inherit), so those full collections walk only what the
detectors made.
"""
from __future__ import annotations

import contextlib
import gc
from typing import Iterator

#: A gen-2 threshold the count of young collections never reaches in a run.
_NEVER = 2**31 - 1

#: The thresholds in effect before the outermost ``no_full_collections`` block, while one runs.
_ordinary: tuple[int, int, int] | None = None


@contextlib.contextmanager
def no_full_collections() -> Iterator[None]:
    """Within the block the collector still collects the young generations, but never
    starts a full collection of its own (``gc.collect()`` still does one); the thresholds
    are restored after."""
    global _ordinary
    thresholds = gc.get_threshold()
    outer = _ordinary
    if outer is None:
        _ordinary = thresholds
    gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        _ordinary = outer


@contextlib.contextmanager
def ordinary_collections() -> Iterator[None]:
    """Inside a ``no_full_collections`` block, the collector as it was before that block,
    for the duration of this one (for running detectors); elsewhere, nothing changes."""
    thresholds = gc.get_threshold()
    restore_ordinary()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


@contextlib.contextmanager
def frozen() -> Iterator[None]:
    """Everything alive now out of the collector's reach for the block (``gc.freeze``), for
    code that runs detectors in a process holding a suite: their full collections then walk
    only what the detectors made, not the suite. The regression gate's detector pass
    (``loopbench baseline update`` on the ``ci`` suite, in one process) took 14.9 s instead of
    18.4 s, its full collections 1.4 s instead of 2.6 s. Objects frozen before the block stay
    frozen after it."""
    already = gc.get_freeze_count()
    gc.freeze()
    try:
        yield
    finally:
        if not already:
            gc.unfreeze()


def restore_ordinary() -> None:
    """The collector as it was before the enclosing ``no_full_collections`` block, for good:
    for a process forked inside one (a pool worker), which never leaves it."""
    if _ordinary is not None:
        gc.set_threshold(*_ordinary)
