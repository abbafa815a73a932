"""Fault injection: bad input, broken plug-ins, misbehaving detectors, interrupted runs.

Each fault must end in a one-line message and a documented exit code, never a
traceback or a hang, and an interrupted run must resume to byte-identical metrics.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from detectors import registry
from scenarios import trace
from sim.cli import main
from tests.sim.run_files import errors_by_detector

ROOT = Path(__file__).resolve().parents[2]
FAULTS = ROOT / "tests" / "fixtures" / "faults"
LOOPBENCH = [str(Path(sys.executable).with_name("loopbench"))]


def invoke(*args, cwd=None):
    runner = CliRunner()
    if cwd is None:
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
    old = os.getcwd()
    os.chdir(cwd)
    try:
        return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)
    finally:
        os.chdir(old)


def one_line_error(result) -> str:
    lines = [ln for ln in result.stderr.splitlines() if ln.startswith("loopbench: error:")]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.output + result.stderr
    return lines[0]


# -- bad trace input -------------------------------------------------------------------------
def rec(**kw) -> bytes:
    return orjson.dumps({"episode": "e", **kw}) + b"\n"


GOOD = (rec(kind="episode", family="replay") + rec(kind="tool_call", tool="search", args={"q": "x"}, call_id="a")
        + rec(kind="tool_result", call_id="a", content="ok") + rec(kind="tool_call", tool="search", args={"q": "x"}, call_id="b")
        + rec(kind="tool_result", call_id="b", content="ok"))

BAD_RECORDS = {
    "invalid JSON": (b'{"episode": "e", "kind": \n', "not valid JSON"),
    "missing field": (rec(kind="tool_call", args={}, call_id="z"), "tool_call is missing field 'tool'"),
    "mistyped field": (rec(kind="tool_call", tool=7, args={}, call_id="z"), "field 'tool' must be a string, got an integer"),
    "args not an object": (rec(kind="tool_call", tool="t", args=[1, 2], call_id="z"), "field 'args' must be an object, got an array"),
    "NaN": (b'{"episode":"e","kind":"tool_call","tool":"t","args":{"x":NaN},"call_id":"z"}\n', "NaN and Infinity are not JSON"),
    "Infinity": (b'{"episode":"e","kind":"tool_call","tool":"t","args":{"x":-Infinity},"call_id":"z"}\n', "NaN and Infinity"),
    "non-UTF-8": (b'{"episode":"e","kind":"tool_call","tool":"\xff\xfe","args":{},"call_id":"z"}\n', "not valid UTF-8"),
    "nested 10,000 deep": (b'{"episode":"e","kind":"tool_call","tool":"t","call_id":"z","args":{"x":' + b"[" * 10_000
                           + b"]" * 10_000 + b"}}\n", "record nested deeper than 200 levels"),
    "nested 1,000,000 deep": (b'{"episode":"e","kind":"tool_call","tool":"t","call_id":"z","args":{"x":' + b"{\"k\":" * 1_000_000
                              + b"1" + b"}" * 1_000_000 + b"}}\n", "record nested deeper than 200 levels"),
    "dangling call id": (rec(kind="tool_result", call_id="nope", content="x"), "has no earlier tool_call"),
    "duplicate node id": (rec(kind="tool_call", tool="t", args={}, call_id="z", node="n1") * 2, "duplicate node id 'n1'"),
    "not an object": (b"[1, 2, 3]\n", "a record must be a JSON object"),
    "unknown kind": (rec(kind="x" * 10_000), "field 'kind' must be one of"),
}


@pytest.mark.parametrize("case", sorted(BAD_RECORDS))
def test_replay_skips_a_bad_record_and_scores_the_rest(case, tmp_path):
    bad, message = BAD_RECORDS[case]
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD + bad + GOOD.replace(b'"e"', b'"f"'))
    r = invoke("replay", path, "--detectors", "exact,normalized", "--out", tmp_path / "out", "--no-progress", "--json")
    assert r.exit_code == 3, r.output
    skipped = [ln for ln in r.stderr.splitlines() if ln.startswith("loopbench: skipped:")]
    assert skipped and all(re.match(rf"loopbench: skipped: {re.escape(str(path))}:\d+: ", ln) for ln in skipped), r.stderr
    assert any(message in ln for ln in skipped), r.stderr
    assert max(len(ln) for ln in r.stderr.splitlines()) < 400  # a 10 KB field is not echoed back
    summary = json.loads(r.stdout)
    assert summary["episodes"] == 2 and summary["skipped_records"] >= 1
    assert "Traceback" not in r.stderr


def test_a_truncated_last_line_is_one_skipped_record(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD + GOOD.replace(b'"e"', b'"f"')[:-9])
    r = invoke("replay", path, "--detectors", "exact", "--out", tmp_path / "out", "--no-progress", "--json")
    assert r.exit_code == 3
    assert f"{path}:10: not valid JSON" in r.stderr
    assert json.loads(r.stdout)["episodes"] == 2


def test_an_empty_file_is_one_error_line_and_exit_2(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    r = invoke("replay", path, "--detectors", "exact", "--out", tmp_path / "out", "--no-progress")
    assert r.exit_code == 2
    assert one_line_error(r) == f"loopbench: error: {path}: empty file (no trace records)"


def test_an_empty_file_among_good_ones_is_skipped_with_exit_3(tmp_path):
    (tmp_path / "empty.jsonl").write_bytes(b"\n \n")
    (tmp_path / "good.jsonl").write_bytes(GOOD)
    r = invoke("replay", tmp_path / "empty.jsonl", tmp_path / "good.jsonl", "--detectors", "exact",
               "--out", tmp_path / "out", "--no-progress")
    assert r.exit_code == 3
    assert f"loopbench: skipped: {tmp_path / 'empty.jsonl'}: empty file (no trace records)" in r.stderr


def test_a_directory_or_a_missing_file_is_one_error_line(tmp_path):
    for target, text in ((tmp_path, "is a directory, not a trace file"), (tmp_path / "nope.jsonl", "no such file")):
        r = invoke("replay", target, "--detectors", "exact", "--out", tmp_path / "out", "--no-progress")
        assert r.exit_code == 2
        assert text in one_line_error(r)


def test_only_bad_records_is_exit_2_after_listing_them(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"nope\n{}\n")
    r = invoke("replay", path, "--detectors", "exact", "--out", tmp_path / "out", "--no-progress")
    assert r.exit_code == 2
    assert r.stderr.count("loopbench: skipped:") == 2
    assert "no usable episodes" in one_line_error(r)


def test_an_over_long_line_is_skipped_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(trace, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "t.jsonl"
    path.write_bytes(GOOD + rec(kind="tool_call", tool="t", args={"q": "x" * 5000}, call_id="z") + GOOD.replace(b'"e"', b'"f"'))
    res = trace.read_trace(path)
    assert [p.split(": ", 1)[1] for p in res.problems] == ["record longer than 1000 bytes, skipped"]
    assert len(res.episodes) == 2


def test_a_50_mb_argument_is_scored_in_bounded_time_and_memory(tmp_path):
    path = tmp_path / "big.jsonl"
    big = "lorem ipsum " * (50 * 1024 * 1024 // 12)
    path.write_bytes(rec(kind="tool_call", tool="search", args={"q": big}, call_id="a")
                     + rec(kind="tool_result", call_id="a", content="ok")
                     + rec(kind="tool_call", tool="search", args={"q": big}, call_id="b"))
    del big
    code = ("import resource, subprocess, sys, time; t = time.time(); "
            "rc = subprocess.call(sys.argv[1:]); "
            "print(rc, time.time() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    cmd = [*LOOPBENCH, "replay", str(path), "--detectors", "exact,normalized,no_progress,layered,openhands,gemini_cli",
           "--out", str(tmp_path / "out"), "--no-progress", "--json"]
    out = subprocess.run([sys.executable, "-c", code, *cmd], cwd=ROOT, capture_output=True, text=True, timeout=120)
    rc, seconds, rss_kb = out.stdout.split()[-3:]
    assert int(rc) == 0, out.stderr
    assert float(seconds) < 60
    assert int(rss_kb) < 1_500_000  # the text is ~50 MB; a few copies are fine, a blow-up is not
    calls = (tmp_path / "out" / "calls.csv").read_text().splitlines()
    assert len(calls) == 1 + 2 * 6


IMPORT_FORMATS = ["openai", "tau-bench", "react-log", "magentic-one", "captain-agent"]


@pytest.mark.parametrize("fmt", IMPORT_FORMATS)
@pytest.mark.parametrize("content", [b"", b"\xff\xfe garbage", b"[" * 1_000_000 + b"]" * 1_000_000, b"{\"x\": NaN}", None])
def test_import_of_bad_input_is_one_error_line(fmt, content, tmp_path):
    src = tmp_path / "src"
    if content is None:
        src.mkdir()  # an empty directory
    else:
        src.write_bytes(content)
    r = invoke("import", src, "--format", fmt, "-o", tmp_path / "out.jsonl")
    assert r.exit_code == 2, r.output
    assert "no " in one_line_error(r) and "episodes found" in r.stderr
    assert all(ln.startswith(("loopbench: skipped:", "loopbench: error:")) for ln in r.stderr.splitlines())


def test_import_keeps_the_good_records_and_exits_3(tmp_path):
    good = orjson.dumps({"messages": [{"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"q\": \"x\"}"}}]}]})
    src = tmp_path / "chats.jsonl"
    src.write_bytes(good + b"\n{nope\n" + b"[" * 5000 + b"]" * 5000 + b"\n" + good + b"\n")
    r = invoke("import", src, "--format", "openai", "-o", tmp_path / "out.jsonl")
    assert r.exit_code == 3, r.output
    assert f"{src}:2: not valid JSON" in r.stderr and f"{src}:3: not valid JSON (nested deeper than 200 levels)" in r.stderr
    assert len(trace.read_trace(tmp_path / "out.jsonl").episodes) == 2


# -- broken plug-ins ---------------------------------------------------------------------------
@pytest.mark.parametrize("spec, message", [
    ("fault_guards:BadInit", "detector 'fault_guards:BadInit': cannot start: missing licence key"),
    ("broken_import:Guard", "cannot import detector module 'broken_import': No module named whatever_dep"),
    ("fault_guards:Nope", "module 'fault_guards' has no detector 'Nope'"),
    ("nosuch", "unknown detector 'nosuch'"),
])
def test_a_detector_that_cannot_load_is_exit_2_before_any_work(spec, message, tmp_path):
    out = tmp_path / "run"
    r = invoke("run", "--suite", "quick", "--detectors", f"exact,{spec}", "--out", out, "--no-progress", cwd=FAULTS)
    assert r.exit_code == 2
    assert message in one_line_error(r)
    assert not out.exists()  # nothing was generated or written


def test_a_module_that_raises_on_import_is_one_line(tmp_path):
    (tmp_path / "explodes.py").write_text("raise RuntimeError('kaboom at import')\n")
    r = invoke("run", "--suite", "quick", "--detectors", "explodes:Guard", "--out", tmp_path / "run", "--no-progress",
               cwd=tmp_path)
    assert r.exit_code == 2
    assert "cannot load 'explodes:Guard': RuntimeError: kaboom at import" in one_line_error(r)


@pytest.fixture
def broken_entry_points(tmp_path, monkeypatch):
    dist = tmp_path / "broken_plugins-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[loopbench.detectors]\nbroken = broken_import:Guard\n"
                                           "missing_class = fault_guards:Nope\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.syspath_prepend(str(FAULTS))
    registry._entry_points.cache_clear()
    yield
    registry._entry_points.cache_clear()
    for mod in ("broken_import", "fault_guards"):
        sys.modules.pop(mod, None)


def test_a_broken_entry_point_does_not_break_list(broken_entry_points):
    r = invoke("list")
    assert r.exit_code == 0
    assert re.search(r"broken\s+\(cannot load: No module named whatever_dep\)", r.stdout)
    assert re.search(r"missing_class\s+\(cannot load: ", r.stdout)
    assert re.search(r"exact\s+\S", r.stdout) and "Scenario families:" in r.stdout


def test_a_broken_entry_point_named_in_a_run_is_exit_2(broken_entry_points, tmp_path):
    r = invoke("run", "--suite", "quick", "--detectors", "exact,broken", "--out", tmp_path / "run", "--no-progress")
    assert r.exit_code == 2
    assert "detector 'broken': cannot load 'broken': ImportError: No module named whatever_dep" in one_line_error(r)


# -- misbehaving detectors --------------------------------------------------------------------
MISBEHAVING = "exact,raises=fault_guards:Raises,garbage=fault_guards:Garbage,hangs=fault_guards:Hangs"
SMALL = ["--suite", "quick", "--families", "stale,healthy", "--episodes", "2", "--no-progress"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_misbehaving_detectors_fail_only_their_episodes(workers, tmp_path):
    out = tmp_path / "run"
    before = signal.getsignal(signal.SIGALRM)
    r = invoke("run", *SMALL, "--detectors", MISBEHAVING, "--check-timeout", "0.2", "--workers", workers, "--out", out,
               cwd=FAULTS)
    assert r.exit_code == 0, r.output  # the hanging detector was interrupted: the run finished
    for name in ("episodes.csv", "closed.csv"):
        errors = errors_by_detector(out, name)
        assert errors["exact"] == {""}
        assert errors["raises"] >= {"RuntimeError: boom on search"}
        assert errors["garbage"] == {"check() returned str, not a Decision"}
        assert errors["hangs"] == {"a detector call took longer than 0.2 s of CPU time (--check-timeout)"}
    metrics = {(row.split(",")[0], row.split(",")[1]): row for row in (out / "metrics.csv").read_text().splitlines()}
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    errs = header.index("errors")
    assert metrics[("garbage", "all")].split(",")[errs] == "4" and metrics[("exact", "all")].split(",")[errs] == "0"
    board = (out / "scoreboard.md").read_text()
    section = board[board.index("## Detector failures"):board.index("## Detectors\n")]
    assert "`garbage` failed on 4 open-loop episode(s), 4 closed-loop episode(s)" in section
    assert "check() returned str, not a Decision" in section and "RuntimeError: boom on search" in section
    assert "`exact`" not in section
    assert signal.getsignal(signal.SIGALRM) == before  # the alarm handler was taken down
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)  # and the timer cleared


def test_a_pool_kills_what_the_alarm_cannot_interrupt(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOPBENCH_KILL_GRACE", "2")  # the default grace (60 s) is for loaded machines
    out = tmp_path / "run"
    r = invoke("run", *SMALL, "--mode", "open", "--detectors",
               "exact,swallows=fault_guards:Swallows,c_hang=fault_guards:HangsInC", "--check-timeout", "0.2",
               "--workers", "2", "--out", out, cwd=FAULTS)
    assert r.exit_code == 0, r.output  # it finished: the C call alone would take minutes
    errors = errors_by_detector(out, "episodes.csv")
    killed = "a detector call ran over 4.2 s and could not be interrupted (--check-timeout 0.2); its worker was killed"
    assert errors["swallows"] == {killed} and errors["c_hang"] == {killed}
    assert errors["exact"] == {""}
    assert killed in (out / "scoreboard.md").read_text()


def test_a_call_that_ends_while_the_pool_looks_is_not_an_overrun():
    # The worker zeroes its cell between calls. Reading it twice (once to see a call is
    # running, once for its start) once took the machine's uptime for a call's duration and
    # killed healthy workers: the read must be single.
    from sim.execute.pool import _overran

    class EndsWhenRead:
        def __init__(self, started):
            self.reads = [started, 0.0]

        @property
        def value(self):
            return self.reads.pop(0) if len(self.reads) > 1 else self.reads[0]

    assert not _overran(EndsWhenRead(time.monotonic()), hard=65.0)
    assert _overran(EndsWhenRead(time.monotonic() - 100), hard=65.0)  # a real overrun still counts
    assert not _overran(EndsWhenRead(0.0), hard=65.0)  # no call running


def test_pool_and_one_process_agree_run_after_run(tmp_path):
    # Fast detectors flip the cell millions of times: a racy overrun check killed a healthy
    # worker in some of these runs (seen as a whole task failing "ran over 65 s").
    base = ["run", "--suite", "quick", "--detectors", "exact,step_budget,planner", "--mode", "closed", "--no-progress"]
    outs = []
    for i, workers in enumerate(["1", "2", "2", "2"]):
        out = tmp_path / f"r{i}"
        assert invoke(*base, "--workers", workers, "--out", out).exit_code == 0
        outs.append((out / "closed.csv").read_bytes())
    assert all(o == outs[0] for o in outs) and b"detector_error" not in outs[0]


def test_a_worker_that_dies_fails_its_task_only(tmp_path, monkeypatch):
    (tmp_path / "dies.py").write_text(
        "import os\nfrom detectors.exact import ExactDetector\n\n"
        "class Dies(ExactDetector):\n    def check(self, state, call):\n        os._exit(7)\n")
    out = tmp_path / "run"
    r = invoke("run", *SMALL, "--mode", "open", "--detectors", "exact,dies:Dies", "--workers", "2", "--out", out,
               cwd=tmp_path)
    assert r.exit_code == 0, r.output
    assert errors_by_detector(out, "episodes.csv")["dies:Dies"] == {"worker exited with code 7"}


@pytest.mark.parametrize("exits", [False, True], ids=["raises", "worker-dies"])
def test_a_lost_encoding_shard_is_reported_and_changes_no_result(exits, tmp_path, monkeypatch):
    """The workers encode the suite in shards before the model-backed tasks start; a shard
    that fails costs time only (its tasks encode those texts themselves), and says so."""
    monkeypatch.setenv("FAULT_PREFETCH_MARK", str(tmp_path / "failed-once"))
    if exits:
        monkeypatch.setenv("FAULT_PREFETCH_EXIT", "1")
    runs = {}
    for name in ("lost", "clean"):
        out = tmp_path / name
        r = invoke("run", *SMALL, "--mode", "both", "--detectors", "exact,pf=fault_guards:PrefetchFailsOnce",
                   "--workers", "2", "--embed-cache", tmp_path / f"cache-{name}", "--out", out, cwd=FAULTS)
        assert r.exit_code == 0, r.output
        runs[name] = r.output
        assert errors_by_detector(out, "episodes.csv")["pf"] == {""}
    problem = "worker exited with code 3" if exits else "RuntimeError: cannot reach the model"
    lost = [line for line in runs["lost"].splitlines() if "encoding shard" in line]
    assert len(lost) == 1 and re.search(rf"warning: encoding shard [12] of 2 failed \({problem}\)", lost[0]), lost
    assert "encoding shard" not in runs["clean"]  # the mark exists now: no shard fails
    for name in ("metrics.csv", "closed_metrics.csv", "episodes.csv", "calls.csv"):
        assert (tmp_path / "lost" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes(), name


def compute_for(seconds: float) -> None:
    """Use ``seconds`` of this thread's CPU time: the per-check limit counts CPU, not waiting."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_check_timeout_zero_disables_the_alarm(tmp_path):
    from detectors.exact import ExactDetector
    from sim.execute.tasks import run_open
    from scenarios.tree import linear_episode
    from sim.play.watchdog import Watchdog

    class Slowish(ExactDetector):
        def check(self, state, call):
            compute_for(0.05)
            return super().check(state, call)

    ep = linear_episode("e", [("t", {"a": 1}, "r"), ("t", {"a": 1}, "r")])
    with Watchdog(0) as w:
        assert run_open("s", Slowish(), [ep], watch=w).errors == {}
    with Watchdog(0.02) as w:
        assert run_open("s", Slowish(), [ep], watch=w).errors == {"e": "a detector call took longer than 0.02 s of CPU time (--check-timeout)"}


def test_set_up_inside_a_call_does_not_count_against_the_limit():
    # A model loaded on the first text a check must encode (a cold cache in the closed
    # loop) is set-up, not a slow check: it once failed a cold run's episode at 5 s.
    from detectors.exact import ExactDetector
    from detectors.protocol import setup_work
    from sim.execute.tasks import run_open
    from scenarios.tree import linear_episode
    from sim.play.watchdog import Watchdog

    cells = []

    class LoadsOnFirstCheck(ExactDetector):
        loaded = False

        def check(self, state, call):
            if not self.loaded:
                with setup_work():
                    cells.append(watch.cell.value)  # no call is being timed meanwhile
                    compute_for(0.6)
                self.loaded = True
            return super().check(state, call)

    ep = linear_episode("e", [("t", {"a": 1}, "r"), ("t", {"a": 2}, "r")])
    with Watchdog(0.2) as watch:
        assert run_open("s", LoadsOnFirstCheck(), [ep], watch=watch).errors == {}
    assert cells == [0.0]

    class SlowOnFirstCheck(ExactDetector):  # as long, computing, not marked as set-up
        def check(self, state, call):
            compute_for(0.6)
            return super().check(state, call)

    with Watchdog(0.2) as watch:
        assert run_open("s", SlowOnFirstCheck(), [ep], watch=watch).errors == {
            "e": "a detector call took longer than 0.2 s of CPU time (--check-timeout)"}


# -- interrupted runs ------------------------------------------------------------------------------
RUN = ["run", "--suite", "quick", "--detectors", "exact,normalized,slow=fault_guards:Slow", "--no-progress"]


def _default_sigint() -> None:
    # A shell starts a background job (``pytest &``, a CI step run that way) with SIGINT
    # ignored, children inherit that, and Python then installs no KeyboardInterrupt handler:
    # the run would never see the test's Ctrl-C. Each run starts as a terminal would start it.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _cli(args, **kw):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([*LOOPBENCH, *args], cwd=FAULTS, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint, **kw)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "run"
    p = _cli([*RUN, "--workers", "1", "--out", str(out)])
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    return out


def _interrupt(out: Path, sig: int, workers: str) -> subprocess.CompletedProcess:
    p = _cli([*RUN, "--workers", workers, "--out", str(out)])
    deadline = time.monotonic() + 60
    while not list((out / ".parts").glob("[oc]*-*.json")):
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.02)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=30)
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)


def _workers_of(out: Path) -> list[int]:
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and str(out).encode() in (proc / "cmdline").read_bytes():
                pids.append(int(proc.name))
        except OSError:
            pass
    return pids


@pytest.mark.parametrize("sig, workers, code", [
    (signal.SIGKILL, "1", -9),
    (signal.SIGINT, "1", 130),
    (signal.SIGTERM, "2", 143),
])
def test_an_interrupted_run_resumes_to_identical_metrics(sig, workers, code, clean_run, tmp_path):
    out = tmp_path / "run"
    r = _interrupt(out, sig, workers)
    assert r.returncode == code, r.stderr
    assert not (out / "metrics.csv").exists()  # it really was cut short
    parts = sorted(p.name for p in (out / ".parts").iterdir())
    assert "run.json" in parts and any(p.startswith(("open-", "closed-")) for p in parts)
    assert not [p for p in parts if p.endswith(".tmp")] or sig == signal.SIGKILL
    if sig != signal.SIGKILL:
        assert "Traceback" not in r.stderr
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith(f"loopbench: interrupted; finished detector tasks are kept in {out}/.parts; "
                               "resume with: loopbench run --suite quick"), last
        assert last.endswith(f"--out {out} --resume")
    time.sleep(0.2)
    assert _workers_of(out) == []  # no orphaned pool worker
    corrupt = sorted((out / ".parts").glob("[oc]*-*.json"))[0] if sig == signal.SIGKILL else None
    if corrupt:  # a part damaged by hand is run again, not trusted
        corrupt.write_text('{"truncated": ')
    p = _cli([*RUN, "--workers", workers, "--out", str(out), "--resume"])
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert re.search(r"resuming: [0-5] of 6 detector tasks already done", err), err
    assert ("unusable part" in err) == bool(corrupt)
    for name in ("metrics.csv", "closed_metrics.csv", "episodes.csv", "calls.csv", "closed.csv"):
        assert (out / name).read_bytes() == (clean_run / name).read_bytes(), name
    assert not (out / ".parts").exists()


def test_resume_refuses_another_configuration(tmp_path):
    out = tmp_path / "run"
    (out / ".parts").mkdir(parents=True)
    (out / ".parts" / "run.json").write_text('{"config_hash": "0123456789abcdef"}')
    res = invoke("run", "--suite", "quick", "--detectors", "exact", "--out", out, "--no-progress", "--resume", cwd=FAULTS)
    assert res.exit_code == 2
    assert "was started with another configuration" in one_line_error(res)


def test_resume_with_nothing_to_resume_is_exit_2(tmp_path):
    r = invoke("run", "--suite", "quick", "--detectors", "exact", "--out", tmp_path / "x", "--no-progress", "--resume")
    assert r.exit_code == 2 and "nothing to resume" in one_line_error(r)
    r = invoke("run", "--suite", "quick", "--detectors", "exact", "--no-progress", "--resume")
    assert r.exit_code == 2 and "--resume needs --out" in one_line_error(r)


# -- files are written atomically --------------------------------------------------------------------
def test_a_write_that_fails_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    from scenarios.files import atomic_write
    from scenarios.tree import linear_episode

    target = tmp_path / "trace.jsonl"
    target.write_text("old\n")

    def broken(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError):
        trace.write_trace(target, [linear_episode("e", [("t", {}, "r")])])
    with pytest.raises(OSError):
        atomic_write(tmp_path / "metrics.csv", "x")
    assert target.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.jsonl"]


#: Lines the scan matches that write no file: a figure into an in-memory buffer (then written
#: atomically), and writes inside the *text* of a simulated agent's command, or a regex over it.
NOT_WRITERS = {
    ("sim/files.py", 'fig.savefig(buf, format='),
    ("scenarios/families/shell_agent.py", "f\"Path('{path}').write_t"),
    ("detectors/commands.py", 'r"\\bopen\\([^)]*[\'\\"][^\'\\'),
}


def test_every_file_writer_goes_through_atomic_file():
    """Files are only opened for writing in scenarios/files.py (atomic_file); everything else calls it."""
    offenders = []
    pattern = re.compile(r"""open\([^)]*["'][wax]b?\+?["']|\.write_(text|bytes)\(|\.to_csv\(|savefig\(""")
    for pkg in ("sim", "scenarios", "detectors"):
        for path in (ROOT / pkg).rglob("*.py"):
            if path.relative_to(ROOT).as_posix() == "scenarios/files.py":
                continue
            rel = path.relative_to(ROOT).as_posix()
            for no, line in enumerate(path.read_text().splitlines(), 1):
                if (rel, line.strip()[:24]) in NOT_WRITERS:
                    continue
                if pattern.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{path.relative_to(ROOT)}:{no}: {line.strip()}")
    assert offenders == [], "\n".join(offenders)


# -- nothing executes from data ------------------------------------------------------------------------
UNSAFE = re.compile(r"\bpickle\b|\bcPickle\b|\bdill\b|\bmarshal\.loads?\b|\bshelve\b|(?<![.\w])eval\(|(?<![.\w])exec\(|"
                    r"\byaml\.(unsafe_)?load\(|\btorch\.load\(|allow_pickle\s*=\s*True|\bjsonpickle\b|(?<![.\w])compile\(|__import__\(")
ALLOWED = {
    # "no pickle" is said in its docstring; the disk cache stores raw float32 bytes in SQLite.
    ("detectors/embedding_model.py", "no pickle"),
    # A regex that recognises writes in an agent's command text: it matches text, runs nothing.
    ("detectors/commands.py", r"(json|pickle|yaml|np|numpy|torch)"),
}


def test_no_code_path_evaluates_data():
    offenders = []
    for pkg in ("sim", "scenarios", "detectors"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for no, line in enumerate(path.read_text().splitlines(), 1):
                m = UNSAFE.search(line)
                if m and not any(rel == f and s in line for f, s in ALLOWED):
                    offenders.append(f"{rel}:{no}: {line.strip()}")
    assert offenders == [], "\n".join(offenders)


def test_the_arithmetic_in_worlds_is_parsed_not_evaluated():
    src = (ROOT / "scenarios" / "world.py").read_text()
    assert "ast.parse" in src or "ast." in src
    assert not re.search(r"(?<![.\w])eval\(", src)


def test_a_detector_is_imported_only_when_named(tmp_path):
    (tmp_path / "never_named.py").write_text("raise SystemExit('imported!')\n")
    (tmp_path / "cfg.toml").write_text('[detectors."never_named:Guard"]\nlimit = 3\n')
    trace_path = tmp_path / "t.jsonl"
    trace_path.write_bytes(GOOD + rec(kind="tool_call", tool="never_named:Guard", args={"module": "never_named"},
                                      call_id="c"))
    r = invoke("replay", trace_path, "--detectors", "exact", "--config", tmp_path / "cfg.toml",
               "--out", tmp_path / "out", "--no-progress", cwd=tmp_path)
    # Parameters for a detector that is not selected are refused, and it is still never imported.
    assert r.exit_code == 2 and "'never_named:Guard' is not selected" in r.output, r.output
    assert "never_named" not in sys.modules
