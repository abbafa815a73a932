"""Forked worker processes, set up one way for the whole of ``sim``.

Workers are forked so they see the parent's suite, episodes or analysis without copying
them. A forked child inherits the parent's Python signal handlers (the CLI turns SIGTERM
into an exception for a clean stop); in a worker SIGTERM must simply end the process, and
Ctrl-C (which reaches the whole process group) is the parent's to handle.

A worker never outlives its parent, however the parent dies (a CI runner's ``kill -9``
included): on Linux the kernel sends it SIGKILL when the parent goes (``PR_SET_PDEATHSIG``),
elsewhere a thread in the worker watches for the parent's exit. Without that, workers
busy in a task lived on, re-parented to init, for as long as their task took.
"""
from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, Iterable, Sequence

#: ``prctl`` option: the signal this process gets when the thread that forked it exits.
PR_SET_PDEATHSIG = 1


def default_workers() -> int:
    """Worker processes when the user asks for "one per core"."""
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def fork_context():
    """The ``fork`` start method where the platform has it, else its default."""
    return mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()


def worker_signals(parent: int) -> None:
    """Call first thing in a worker forked by process ``parent`` (its pid, taken before the
    fork): default SIGTERM, ignored SIGINT, and death with the parent."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent)


def die_with_parent(parent: int) -> None:
    """End this process when process ``parent`` dies, even by SIGKILL.

    The parent may already have died between the fork and this call; the worker was then
    re-parented and the death signal would never come, so the parent's pid is checked
    after the signal is armed.
    """
    if not _death_signal(signal.SIGKILL):
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="watch-parent").start()
    if os.getppid() != parent:
        os._exit(1)


def _death_signal(sig: int) -> bool:
    """Ask the kernel for ``sig`` when our parent exits; False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


def map_forked(fn: Callable[..., Any], jobs: Sequence[tuple], workers: int, chunksize: int = 1) -> list[Any]:
    """``[fn(*job) for job in jobs]`` over ``workers`` forked processes (in this process when
    ``workers <= 1`` or this process is a daemon, which may not have children). Results keep
    the order of ``jobs``; an error or interrupt terminates the workers."""
    if workers <= 1 or mp.current_process().daemon:
        return [fn(*job) for job in jobs]
    pool = fork_context().Pool(workers, initializer=worker_signals, initargs=(os.getpid(),))
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
