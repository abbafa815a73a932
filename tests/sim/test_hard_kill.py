"""The pool's hard kill: it fires on a call stuck in C code, and never on a healthy task.

The kill once fired on healthy tasks ("ran over 10 s", later "over 65 s", on runs that took
seconds). The cause: the parent read the worker's start-time cell twice, once to see a call
was running and once to subtract; a worker that ended its call in between left 0.0 for the
second read, and the machine's uptime was taken for the call's duration. Fast detectors
flip the cell hundreds of thousands of times a second, so sooner or later the two reads
straddled a flip. The tests below give the parent a cell that flips on every read, which
reproduces that every time instead of sometimes.
"""
import os
import subprocess
import sys
import time
from pathlib import Path

from sim.execute import pool
from tests.sim.run_files import errors_by_detector

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "fixtures" / "faults"
QUICK = ["--suite", "quick", "--families", "stale,healthy,polling", "--episodes", "2", "--no-progress"]


class FlippingCell:
    """The parent's view of a worker running very short calls: every read finds the other
    state — a call that started a moment ago, then none."""

    def __init__(self, real):
        self.real, self.reads = real, 0

    @property
    def value(self):
        self.reads += 1
        return time.monotonic() - 0.001 if self.reads % 2 else 0.0


def _cli(args, out: Path, env=None) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from sim.cli import main; main()", "run", *args, "--out", str(out)]
    return subprocess.Popen(cmd, cwd=FAULTS, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_cell_that_flips_between_reads_kills_no_healthy_worker(monkeypatch):
    from sim.config.spec import DetectorSpec
    from sim.execute.runner import build_scenarios, generate_episodes

    looks = []
    start = pool._Worker.__init__

    def watched(self, ctx, limit):
        start(self, ctx, limit)
        self.cell = FlippingCell(self.cell)  # the parent's reads only; the worker writes the real one
        looks.append(self.cell)

    monkeypatch.setattr(pool._Worker, "__init__", watched)
    monkeypatch.setenv("LOOPBENCH_KILL_GRACE", "2")
    monkeypatch.syspath_prepend(str(FAULTS))
    scenarios = build_scenarios(["stale", "healthy"], 2, 0, {})
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec("slow_first", "fault_guards:SlowFirstCheck")), ("open", DetectorSpec("exact", "exact"))]
    out = pool.run_tasks(tasks, episodes, scenarios, workers=2, check_timeout=5.0)
    assert sum(c.reads for c in looks) >= 2  # the parent did look while a call was running
    for key, (res, _) in out.items():
        assert res.errors == {}, key


def test_a_call_blocked_in_c_is_killed_beside_another_run_and_the_rest_is_intact(tmp_path):
    # Two runs at once on the test machine's cores: one with a detector that blocks in C
    # with the alarm signal held off (nothing but the hard kill can end it), one healthy.
    hung = tmp_path / "hung"
    beside = tmp_path / "beside"
    grace = {"LOOPBENCH_KILL_GRACE": "2"}  # the default (60 s) is for loaded machines; the test needs no minute
    runs = [
        (_cli([*QUICK, "--detectors", "exact,stuck=fault_guards:SleepsInC,normalized", "--mode", "open",
               "--check-timeout", "0.5", "--workers", "2"], hung, grace), hung),
        (_cli([*QUICK, "--detectors", "exact,normalized,no_progress,step_budget", "--workers", "2"], beside, grace), beside),
    ]
    for p, _ in runs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    killed = ("a detector call ran over 4.5 s and could not be interrupted (--check-timeout 0.5); "
              "its worker was killed")
    errors = errors_by_detector(hung, "episodes.csv")
    assert errors["stuck"] == {killed}  # reported as that detector's failure, on each of its episodes
    assert errors["exact"] == errors["normalized"] == {""}
    assert killed in (hung / "scoreboard.md").read_text()
    for name in ("episodes.csv", "closed.csv"):
        assert set().union(*errors_by_detector(beside, name).values()) == {""}, name  # no task of the other run failed
    # The rest of the hung run's results are what a run without the stuck detector gives.
    alone = tmp_path / "alone"
    p = _cli([*QUICK, "--detectors", "exact,normalized", "--mode", "open", "--check-timeout", "0.5",
              "--workers", "1"], alone)
    assert p.communicate(timeout=300)[0] is None and p.returncode == 0
    rows = [r for r in (hung / "metrics.csv").read_text().splitlines() if not r.startswith("stuck,")]
    assert rows == (alone / "metrics.csv").read_text().splitlines()


def test_pool_workers_run_torch_on_one_thread_unless_told(monkeypatch):
    # Intra-op threads in every worker oversubscribe the cores under load (see the pool).
    from sim.config.spec import DetectorSpec
    from sim.execute.runner import build_scenarios, generate_episodes

    monkeypatch.syspath_prepend(str(FAULTS))
    monkeypatch.delenv("LOOPBENCH_TORCH_THREADS", raising=False)
    scenarios = build_scenarios(["stale"], 1, 0, {})
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec("t", "fault_guards:ReportsTorchThreads")), ("open", DetectorSpec("exact", "exact"))]

    def threads():
        res, _ = pool.run_tasks(tasks, episodes, scenarios, workers=2)[("open", "t")]
        return set(res.errors.values())

    assert threads() == {"RuntimeError: threads=1"}
    monkeypatch.setenv("LOOPBENCH_TORCH_THREADS", "2")
    assert threads() == {"RuntimeError: threads=2"}


def test_pool_workers_keep_the_inherited_suite_out_of_the_collector(monkeypatch):
    # A full collection over the forked suite cost 0.4 s of CPU inside a detector call.
    import gc

    from sim.config.spec import DetectorSpec
    from sim.execute.runner import build_scenarios, generate_episodes

    monkeypatch.syspath_prepend(str(FAULTS))
    scenarios = build_scenarios(["stale"], 1, 0, {})
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec("f", "fault_guards:ReportsFrozenObjects")), ("open", DetectorSpec("exact", "exact"))]
    res, _ = pool.run_tasks(tasks, episodes, scenarios, workers=2)[("open", "f")]
    assert set(res.errors.values()) == {"RuntimeError: frozen=True"}
    assert gc.get_freeze_count() == 0  # the parent's collector is untouched
