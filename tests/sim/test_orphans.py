"""No orphans: a run's worker processes die with it, however it dies.

A CI runner that times out sends ``kill -9`` to the run; its pool workers once lived on,
re-parented to init, for as long as their task took (minutes, hundreds of MB each).
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.forking import die_with_parent, fork_context

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "fixtures" / "faults"
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) of ``pid``, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces
    return fields[0], int(fields[1]), int(fields[2])


def _alive_in_group(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None and st[2] == pgid and st[0] != "Z":
                pids.append(int(entry.name))
    return pids


def _children(pid: int) -> list[int]:
    return [int(e.name) for e in Path("/proc").iterdir()
            if e.name.isdigit() and (st := _stat(int(e.name))) is not None and st[1] == pid and st[0] != "Z"]


def _poll(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_kill_9_of_a_run_leaves_no_process_of_it(tmp_path):
    # The run in its own process group, as a CI job is; ``slow`` keeps the workers busy.
    cmd = [sys.executable, "-c", "from sim.cli import main; main()", "run", "--suite", "quick", "--detectors",
           "exact,normalized,slow=fault_guards:Slow", "--workers", "2", "--no-progress", "--out", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(cmd, cwd=FAULTS, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        assert _poll(lambda: len(_children(p.pid)) >= 2 or p.poll() is not None, 120), "no workers started"
        assert p.poll() is None, p.communicate()[1].decode()
        workers = _children(p.pid)
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        # Within 5 s nothing of the run is left: not its workers, not anything in its group.
        assert _poll(lambda: not _alive_in_group(p.pid) and all(_stat(w) in (None,) or _stat(w)[0] == "Z"
                                                                for w in workers), 5), \
            f"left behind: {_alive_in_group(p.pid)}"
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _sleep_then_report(parent: int, ready) -> None:
    die_with_parent(parent)
    ready.send(os.getpid())
    time.sleep(60)


def test_a_worker_whose_parent_is_gone_already_exits():
    # The race the death signal alone leaves open: the parent died between the fork and the
    # moment the worker armed it. The worker sees it was re-parented and leaves at once.
    ctx = fork_context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_sleep_then_report, args=(os.getpid() + 10**7, send))  # not our pid
    proc.start()
    proc.join(10)
    assert proc.exitcode == 1
    assert not recv.poll()  # it never got as far as working


def test_a_worker_dies_with_its_parent_killed_by_sigkill():
    # Parent (a forked process) forks a worker that sleeps, then the parent is SIGKILLed.
    ctx = fork_context()
    recv, send = ctx.Pipe(duplex=False)

    def parent() -> None:
        child = ctx.Process(target=_sleep_then_report, args=(os.getpid(), send))
        child.start()
        time.sleep(60)

    middle = ctx.Process(target=parent)
    middle.start()
    assert recv.poll(30)
    worker = recv.recv()
    os.kill(middle.pid, signal.SIGKILL)
    middle.join(10)
    assert _poll(lambda: _stat(worker) is None or _stat(worker)[0] == "Z", 5)
