"""Forked worker processes, set up one way for the whole of ``sim``.

Workers are forked so they see the parent's suite, episodes or analysis without copying
them. A forked child inherits the parent's Python signal handlers (the CLI turns SIGTERM
into an exception for a clean stop); in a worker SIGTERM must simply end the process, and
Ctrl-C (which reaches the whole process group) is the parent's to handle.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import signal
from typing import Any, Callable, Iterable, Sequence


def default_workers() -> int:
    """Worker processes when the user asks for "one per core"."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def fork_context():
    """The ``fork`` start method where the platform has it, else its default."""
    return mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()


def worker_signals() -> None:
    """Call first thing in a forked worker: default SIGTERM, ignored SIGINT."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def map_forked(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, chunksize: int = 1) -> list[Any]:
    """``[fn(*job) for job in jobs]`` over ``workers`` forked processes (in this process when
    ``workers <= 1`` or this process is a daemon, which may not have children). Results keep
    the order of ``jobs``; an error or interrupt terminates the workers."""
    if workers <= 1 or mp.current_process().daemon:
        return [fn(*job) for job in jobs]
    pool = fork_context().Pool(workers, initializer=worker_signals)
    try:
        out = pool.starmap(fn, jobs, chunksize=chunksize)
        pool.close()  # workers leave on their own; terminate() only on the way out of an error
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return out


def each(items: Iterable[Any]) -> list[tuple[Any]]:
    """``items`` as one-argument jobs for :func:`map_forked`."""
    return [(x,) for x in items]
