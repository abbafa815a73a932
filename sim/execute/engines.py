"""Where detector tasks run: ``local`` (a process pool on this machine, the default) or ``ray``.

Every engine takes the same tasks — one detector in one mode (open or closed loop) over
the suite — and returns the same ``{(kind, label): (result, timing row)}`` as
:func:`sim.execute.pool.run_tasks`, so the run folder does not depend on the engine.

The ``ray`` engine (``pip install 'loopbench[ray]'``) also splits every task by episode:
the suite is cut into contiguous shards, each (detector, mode, shard) is one Ray task,
and a task's shards are merged back in episode order (:func:`sim.execute.pool.merge_shards`).
A cluster therefore has far more than 2 × detectors tasks to spread. Detectors start a
fresh state for every episode, so a shard scores exactly what the whole run would have.
Ray is imported only when this engine is selected.
"""
from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from scenarios.base import Scenario

from sim.execute.pool import ShardResult, failed_shard, merge_shards, run_shard
from scenarios.tree import Episode
from sim.play.watchdog import Watchdog

ENGINES = ("local", "ray")
#: Fewest episodes in a shard: below this, shipping the shard costs more than running it.
MIN_SHARD = 10
#: Shards wanted per cluster CPU, so that uneven shards still end together.
SHARDS_PER_CPU = 3


class EngineError(RuntimeError):
    """The engine cannot run (not installed, cluster unreachable); the message says why."""


@dataclass(frozen=True)
class Engine:
    """Which engine runs the tasks, and its settings.

    ``workers``: the local pool's size (0 = one per core, 1 = in this process).
    ``address``: for Ray, ``None`` follows Ray (``$RAY_ADDRESS``, else a new local
    instance), ``"local"`` always starts one, ``"ray://HEAD:10001"`` or ``"HEAD:6379"``
    joins a cluster. ``shard_episodes`` fixes the shard size (default: sized to the cluster).
    """

    name: str = "local"
    workers: int = 0
    address: str | None = None
    shard_episodes: int | None = None

    def __post_init__(self) -> None:
        if self.name not in ENGINES:
            raise EngineError(f"unknown engine {self.name!r} (known: {', '.join(ENGINES)})")

    def check(self) -> None:
        """Raise :class:`EngineError` now, before any work, when the engine cannot run: Ray not
        installed, or a cluster address that does not accept connections."""
        if self.name == "ray":
            _import_ray()
            check_reachable(self.address or os.environ.get("RAY_ADDRESS"))

    def run(self, tasks: Sequence[tuple[str, Any]], episodes: Sequence[Episode], scenarios: Sequence[Scenario], *,
            progress: bool = False, check_timeout: float | None = None,
            on_result: Callable[[tuple[str, str], Any], None] | None = None,
            tapes: Mapping[str, Any] | None = None,
            log: Callable[[str], None] = lambda s: None,
            rows: Callable[[tuple[str, str], Any], Any] | None = None) -> dict[tuple[str, str], Any]:
        """Run every (kind, DetectorSpec) task; ``on_result`` sees each finished task at once.

        ``tapes`` (``sim.play.harness.Tape`` per scenario id) shorten the closed-loop tasks on
        the local pool, whose forked workers inherit them; Ray tasks simulate in full, since
        shipping the tapes would cost more than they save. The results are the same either way.
        ``log`` hears of work lost on the way that changes no result (on the local pool, an
        encoding shard that failed: its texts are then encoded by the tasks that need them).
        ``rows`` (a ``sim.execute.rows.RowMaker``): the local pool's workers turn each result
        into its rows before sending it; other results come back raw, for the caller to."""
        if self.name == "local":
            from sim.execute.pool import run_tasks

            return run_tasks(tasks, episodes, scenarios, workers=self.workers, progress=progress,
                             check_timeout=check_timeout, on_result=on_result, tapes=tapes, log=log, rows=rows)
        return run_tasks_ray(tasks, episodes, scenarios, address=self.address, progress=progress,
                             shard_episodes=self.shard_episodes, check_timeout=check_timeout, on_result=on_result)


def as_engine(engine: Engine | int) -> Engine:
    """An :class:`Engine`; a bare integer is the local pool with that many workers."""
    return engine if isinstance(engine, Engine) else Engine("local", workers=int(engine))


def plan_shards(n_episodes: int, n_tasks: int, cpus: int, shard_episodes: int | None = None) -> list[tuple[int, int]]:
    """Contiguous ``[lo, hi)`` episode ranges covering the suite.

    With ``shard_episodes`` unset, enough shards that tasks × shards is about
    ``SHARDS_PER_CPU`` per CPU, but no shard under ``MIN_SHARD`` episodes.

    >>> plan_shards(100, 4, 8)
    [(0, 17), (17, 34), (34, 51), (51, 68), (68, 84), (84, 100)]
    >>> plan_shards(100, 40, 2)
    [(0, 100)]
    """
    if n_episodes <= 0:
        return [(0, 0)]
    if shard_episodes:
        k = math.ceil(n_episodes / max(1, shard_episodes))
    else:
        wanted = math.ceil(SHARDS_PER_CPU * max(1, cpus) / max(1, n_tasks))
        k = max(1, min(wanted, n_episodes // MIN_SHARD))
    k = min(k, n_episodes)
    base, extra = divmod(n_episodes, k)
    bounds, lo = [], 0
    for i in range(k):
        hi = lo + base + (1 if i < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def _import_ray():
    try:
        import ray
    except ImportError:
        raise EngineError("the ray engine needs Ray: pip install 'loopbench[ray]'") from None
    return ray


def check_reachable(address: str | None) -> None:
    """Fail fast, with one line, when a cluster address does not accept connections: Ray
    itself retries an unreachable head for minutes."""
    import socket

    if not address or address in ("local", "auto"):
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise EngineError(f"--ray-address {address!r}: expected HOST:PORT, ray://HOST:PORT, 'local' or 'auto'")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise EngineError(f"cannot reach Ray at {address}: {exc.strerror or exc}") from None


def _ray_shard(kind: str, spec: Any, shard: tuple[Sequence[Episode], Sequence[Scenario]],
               env: dict[str, str | None], check_timeout: float | None) -> ShardResult:
    # Ray reuses worker processes across runs: take the driver's settings (the embedding
    # cache directory and backend) from the task, not from whatever the worker was started with.
    for key, value in env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    episodes, scenarios = shard
    try:
        return run_shard(kind, spec, episodes, scenarios, Watchdog(check_timeout))
    except Exception as exc:  # noqa: BLE001 — e.g. the detector cannot be built on this node
        from sim.play.openloop import describe

        return failed_shard(kind, spec.label, episodes, scenarios, f"task failed: {describe(exc)}")


def _last_line(exc: BaseException) -> str:
    """The line that names the error: Ray's messages end with it, after a traceback."""
    text = str(exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


def run_tasks_ray(tasks: Sequence[tuple[str, Any]], episodes: Sequence[Episode], scenarios: Sequence[Scenario], *,
                  address: str | None = None, progress: bool = False, shard_episodes: int | None = None,
                  check_timeout: float | None = None,
                  on_result: Callable[[tuple[str, str], Any], None] | None = None) -> dict[tuple[str, str], Any]:
    """The ``ray`` engine: connect (or start a local instance), run every shard, merge.

    If Ray is already initialised in this process, that connection is used; otherwise the
    engine connects to ``address`` (or starts a local instance) and stays connected for the
    rest of the process, so a tuning search that runs many evaluations pays Ray's start-up
    once (Ray disconnects at exit). A shard whose worker dies fails only its own episodes,
    with the reason; an interrupt cancels the shards still pending. Each detector call is
    under the ``SIGALRM`` limit in the Ray worker; the local pool's kill of an
    uninterruptible call has no Ray counterpart here.
    """
    from detectors.embedding_model import BACKEND_ENV, CACHE_ENV

    ray = _import_ray()
    if not ray.is_initialized():
        target = address or os.environ.get("RAY_ADDRESS")  # what ray.init will use
        check_reachable(target)
        try:
            ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                     configure_logging=True)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise EngineError(f"cannot start or reach Ray at {target or 'a new local instance'}: "
                              f"{_last_line(exc)}") from None
    cpus = int(ray.cluster_resources().get("CPU", 1))
    bounds = plan_shards(len(episodes), len(tasks), cpus, shard_episodes)
    # Open-loop-only callers (sweeps) pass no scenarios.
    shards = [(list(episodes[lo:hi]), list(scenarios[lo:hi]) if scenarios else []) for lo, hi in bounds]
    refs = [ray.put(sh) for sh in shards]
    # The manifest records the driver's backend: the workers must encode with it.
    env = {name: os.environ.get(name) for name in (CACHE_ENV, BACKEND_ENV)}
    remote = ray.remote(num_cpus=1, max_retries=0)(_ray_shard)
    # Closed-loop tasks are the long ones: submit them first so the cluster ends together.
    order = sorted(tasks, key=lambda t: (t[0] != "closed",))
    pending: dict[Any, tuple[tuple[str, Any], int]] = {}
    for task in order:
        kind, spec = task
        for i, ref in enumerate(refs):
            pending[remote.remote(kind, spec, ref, env, check_timeout)] = (task, i)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(pending), desc="shards", unit="shard", file=sys.stderr, leave=False, dynamic_ncols=True)
    parts: dict[tuple[str, str], list[ShardResult | None]] = {(k, s.label): [None] * len(refs) for k, s in tasks}
    out: dict[tuple[str, str], Any] = {}
    waiting = list(pending)
    try:
        _collect(ray, waiting, pending, shards, parts, out, on_result, bar)
    except BaseException:  # Ctrl-C, SIGTERM: leave no shard running on the cluster
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    finally:
        if bar:
            bar.close()
    return out


def _collect(ray, waiting, pending, shards, parts, out, on_result, bar) -> None:
    """Take shards as they finish; merge and report a task when its last shard is in."""
    while waiting:
        done, waiting = ray.wait(waiting, num_returns=1, timeout=None)
        for ref in done:
            (kind, spec), i = pending.pop(ref)
            try:
                part = ray.get(ref)
            except ray.exceptions.RayError as exc:  # the worker died, or the task could not run
                episodes_i, scenarios_i = shards[i]
                part = failed_shard(kind, spec.label, episodes_i, scenarios_i, f"ray: {_last_line(exc)}")
            key = (kind, spec.label)
            parts[key][i] = part
            if all(p is not None for p in parts[key]):
                out[key] = merge_shards(parts[key])
                if on_result is not None:
                    on_result(key, out[key])
            if bar:
                bar.update()
