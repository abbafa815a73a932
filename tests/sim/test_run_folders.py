"""What a newcomer hits (issue 19): each mistake is one line and exit 2 before any work; a run
folder holds one run; an interrupt in any phase leaves a folder the printed hint resumes."""
import json
import shutil

import pytest
from click.testing import CliRunner

import sim.execute.pool as pool
import sim.execute.runner as runner
import sim.report.full as full
import sim.report.plots as plots
import sim.report.scoreboard as scoreboard
from sim.cli import main
from sim.report.analysis import analyse, load_runs

SMALL = ["run", "--suite", "quick", "--families", "stale,healthy", "--episodes", "2", "--detectors", "exact,normalized",
         "--workers", "1", "--no-progress"]


@pytest.fixture(autouse=True)
def no_plots(monkeypatch):
    """Drawing is tested elsewhere; here the report's other steps are what counts (and fast)."""
    monkeypatch.setattr(plots, "write_plots", lambda an, plot_dir, log=None, **k: [])


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def one_error_line(r) -> str:
    lines = r.output.strip().splitlines()
    assert r.exit_code == 2, r.output
    assert len(lines) == 1 and lines[0].startswith("loopbench: error: "), r.output
    return lines[0]


@pytest.fixture
def no_work(monkeypatch):
    """Any scenario generation fails the test: the mistake must be caught before it."""
    def forbidden(*a, **k):
        raise AssertionError("work started")

    monkeypatch.setattr(runner, "generate_episodes", forbidden)


# -- mistakes: one line, exit 2, before any work -------------------------------------------------------
@pytest.mark.parametrize("param, says", [
    ("exact.max_repeats_per_signature=abc", "detector 'exact': max_repeats_per_signature='abc' is not allowed (expected an integer >= 1)"),
    ("exact.max_repeats_per_signature=-1", "detector 'exact': max_repeats_per_signature=-1 is not allowed (expected an integer >= 1)"),
    ("normalized.threshold=2.5", "detector 'normalized': threshold=2.5 is not allowed (expected an integer >= 1)"),
    ("planner.stop_when_complete=3", "detector 'planner' is not selected"),
])
def test_a_bad_param_is_one_line_before_any_work(no_work, tmp_path, param, says):
    r = invoke(*SMALL, "--param", param, "--out", tmp_path / "r")
    assert says in one_error_line(r)
    assert not (tmp_path / "r").exists()


def test_a_param_for_an_unselected_detector_is_an_error(no_work, tmp_path):
    r = invoke("run", "--suite", "quick", "--detectors", "exact", "--param", "normalized.threshold=2", "--out", tmp_path / "r")
    assert "--param normalized.threshold=2: detector 'normalized' is not selected (selected: exact)" in one_error_line(r)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[detectors.normalized]\nthreshold = 2\n")
    r = invoke("run", "--suite", "quick", "--detectors", "exact", "--config", cfg, "--out", tmp_path / "r")
    assert "[detectors.normalized] of the configuration: detector 'normalized' is not selected" in one_error_line(r)


def test_a_bad_sweep_value_is_one_line_before_any_work(no_work, tmp_path):
    r = invoke("sweep", "--detector", "exact", "--param", "max_repeats_per_signature=a,b", "--suite", "quick",
               "--out", tmp_path / "s", "--no-progress")
    assert "detector 'exact': max_repeats_per_signature='a' is not allowed" in one_error_line(r)
    assert not (tmp_path / "s").exists()


def test_a_mode_typo_is_one_line(no_work):
    line = one_error_line(invoke("run", "--mode", "opn"))
    assert "'opn' is not one of 'open', 'closed', 'both'" in line and "run --help" in line
    assert "No such command 'frob'" in one_error_line(invoke("frob"))


def test_an_unreachable_ray_address_is_one_line_before_any_work_on_the_full_suite(no_work, tmp_path):
    pytest.importorskip("ray")
    r = invoke("run", "--suite", "full", "--detectors", "exact", "--engine", "ray", "--ray-address", "127.0.0.1:1",
               "--out", tmp_path / "r")
    assert "cannot reach Ray at 127.0.0.1:1" in one_error_line(r)


def test_run_help_shows_the_mode_default():
    text = " ".join(invoke("run", "--help").output.split("--mode", 1)[1].split("--out")[0].split())
    assert "[default: the suite's: both for quick and default, open for full and ci]" in text


# -- run folders hold one run ---------------------------------------------------------------------------
def test_a_second_run_into_a_folder_is_refused_and_force_leaves_no_old_rows(tmp_path):
    out = tmp_path / "tuned"
    assert invoke(*SMALL, "--mode", "closed", "--out", out).exit_code == 0  # the guard.toml run of the README
    assert (out / "closed.csv").exists()
    line = one_error_line(invoke(*SMALL, "--mode", "open", "--out", out))
    assert "is not empty" in line and "--force" in line
    r = invoke(*SMALL, "--mode", "open", "--out", out, "--force")
    assert r.exit_code == 0, r.output
    assert not (out / "closed.csv").exists() and "Closed loop" not in (out / "scoreboard.md").read_text()
    assert "Closed loop" not in (out / "report.md").read_text()


def test_a_report_refuses_files_of_another_run(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    assert invoke(*SMALL, "--mode", "closed", "--out", a).exit_code == 0
    assert invoke(*SMALL, "--mode", "open", "--out", b).exit_code == 0
    shutil.copy(a / "closed.csv", b / "closed.csv")  # what a reused folder used to hold
    line = one_error_line(invoke("report", b))
    assert "closed.csv: left by another run" in line
    with pytest.raises(ValueError, match="left by another run"):
        scoreboard.scoreboard_text(b)
    shutil.copy(a / "calls.csv", b / "calls.csv")
    (b / "closed.csv").unlink()
    assert "calls.csv: changed since run" in one_error_line(invoke("report", b))
    manifest = json.loads((a / "manifest.json").read_text())
    assert set(manifest["files"]) >= {"trace.jsonl", "metrics.csv", "closed.csv"} and manifest["run_id"]


def test_force_never_empties_a_folder_that_is_not_a_run_folder(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert "holds no run files" in one_error_line(invoke(*SMALL, "--out", tmp_path, "--force"))
    assert (tmp_path / "notes.txt").read_text() == "mine"


# -- an interrupt in each phase is resumed by the printed hint ----------------------------------------
@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("clean") / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plots, "write_plots", lambda an, plot_dir, log=None, **k: [])
        r = invoke(*SMALL, "--out", out)
    assert r.exit_code == 0, r.output
    return out


def interrupt_once(monkeypatch, module, name, when=lambda *a, **k: True):
    original = getattr(module, name)
    state = {"fired": False}

    def flaky(*args, **kwargs):
        if not state["fired"] and when(*args, **kwargs):
            state["fired"] = True
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return state


def first_task_then_interrupt(monkeypatch):
    original = pool.run_tasks

    def flaky(tasks, *args, **kwargs):
        original(tasks[:1], *args, **kwargs)  # one task finishes and is checkpointed
        raise KeyboardInterrupt

    monkeypatch.setattr(pool, "run_tasks", flaky)


PHASES = {
    "generate": lambda mp: interrupt_once(mp, runner, "generate_episodes"),
    "detectors": first_task_then_interrupt,
    "assemble": lambda mp: interrupt_once(mp, runner, "write_csv", lambda path, *a: str(path).endswith("timings.csv")),
    "scoreboard": lambda mp: interrupt_once(mp, scoreboard, "write_scoreboard"),
    "report": lambda mp: interrupt_once(mp, full, "write_report"),
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_an_interrupt_in_each_phase_is_resumed(clean, tmp_path, monkeypatch, phase):
    out = tmp_path / "run"
    with monkeypatch.context() as mp:
        PHASES[phase](mp)
        r = invoke(*SMALL, "--out", out)
    assert r.exit_code == 130, r.output
    hint = r.output.strip().splitlines()[-1]
    assert hint.startswith("loopbench: interrupted;") and "--resume" in hint and str(out) in hint
    r = invoke(*SMALL, "--out", out, "--resume")
    assert r.exit_code == 0, r.output
    if phase in ("scoreboard", "report"):
        assert "result files are complete" in r.output and "ran " not in r.output  # no detector ran again
    for name in ("metrics.csv", "episodes.csv", "calls.csv", "closed.csv", "closed_metrics.csv"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
    for name in ("scoreboard.md", "report.md", "report.html"):
        assert (out / name).stat().st_size > 0, name
    assert not (out / ".parts").exists()
    assert "is not empty" in one_error_line(invoke(*SMALL, "--out", out))  # finished: no second run on top


def test_no_report_writes_the_run_folder_and_scoreboard_and_the_report_comes_later(clean, tmp_path, monkeypatch):
    out = tmp_path / "run"
    drawn = []
    monkeypatch.setattr(full, "write_report", lambda *a, **k: drawn.append(a))
    r = invoke(*SMALL, "--out", out, "--no-report")
    assert r.exit_code == 0, r.output
    assert drawn == [] and "report:" not in r.output
    for name in ("metrics.csv", "episodes.csv", "calls.csv", "closed.csv", "closed_metrics.csv"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name
    assert (out / "scoreboard.md").stat().st_size > 0 and "| detector" in r.output  # printed as ever
    assert not any((out / name).exists() for name in ("report.md", "report.html", "intervals.csv", "thresholds.csv"))
    monkeypatch.undo()
    monkeypatch.setattr(plots, "write_plots", lambda an, plot_dir, log=None, **k: [])
    r = invoke("report", out)
    assert r.exit_code == 0, r.output
    assert (out / "report.html").stat().st_size > 0 and (out / "intervals.csv").stat().st_size > 0


# -- closed-only plots, replay family tables ---------------------------------------------------------
def test_closed_only_runs_draw_no_open_loop_heatmaps_and_fail_none(tmp_path):
    out = tmp_path / "closed"
    r = invoke(*SMALL, "--mode", "closed", "--detectors", "layered", "--out", out)
    assert r.exit_code == 0 and "failed" not in r.output, r.output
    an = analyse(load_runs([out]), rounds=10)
    assert plots.plot_misses(an, tmp_path / "m.png") is None  # was KeyError: 'outcome'
    assert plots.plot_false_alarms(an, tmp_path / "f.png") is None
    assert plots.plot_closed(an, tmp_path / "c.png").exists()


def test_replay_of_a_generated_trace_lists_only_loop_families_as_loop_families(clean, tmp_path):
    r = invoke("replay", clean / "trace.jsonl", "--detectors", "exact", "--out", tmp_path / "rp", "--no-progress")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "rp" / "scoreboard.md").read_text()
    loops = text.split("## Loop families", 1)[1].split("\n\n")[1].splitlines()[0]
    healthy = text.split("## Healthy families", 1)[1].split("\n\n")[1].splitlines()[0]
    assert loops == "| detector | stale |" and healthy == "| detector | healthy |"
    line = one_error_line(invoke("replay", clean / "trace.jsonl", "--detectors", "exact", "--out", tmp_path / "rp"))
    assert "is not empty" in line


def test_the_scoreboards_family_tables_show_each_detectors_first_row_and_a_dash_where_it_has_none():
    import pandas as pd

    m = pd.DataFrame([{"detector": "a", "family": "f1", "miss_rate": 0.5}, {"detector": "b", "family": "f2", "miss_rate": 0.25},
                      {"detector": "a", "family": "f2", "miss_rate": 0.1}, {"detector": "a", "family": "f1", "miss_rate": 0.9}])
    text = scoreboard._family_table(m, ["a", "b"], ["f1", "f2"], lambda r: f"{r['miss_rate']:.2f}")
    assert text.splitlines()[2:] == ["| `a` | 0.50 | 0.10 |", "| `b` | – | 0.25 |"]


# -- --param takes lists and tables as JSON or TOML (issue 40 item 5) -------------------------------
@pytest.mark.parametrize("value", ['[{"tool": "poll", "args": {"job": 1}}]', '[{tool = "poll", args = {job = 1}}]'])
def test_a_list_param_is_taken_as_json_or_toml(value):
    from sim.cli.app import detector_specs

    [spec] = detector_specs(["roo_code"], {}, (f"roo_code.exempt_calls={value}",))
    assert spec.params["exempt_calls"] == [{"tool": "poll", "args": {"job": 1}}]


@pytest.mark.parametrize("param, says", [
    ("roo_code.exempt_calls=[a, b", "is neither TOML nor JSON; quote it for the shell"),
    ("roo_code.exempt_calls=a,b", "(expected a list) (--param takes lists and tables as JSON or TOML"),
])
def test_a_bad_list_param_points_to_json_or_config(no_work, tmp_path, param, says):
    r = invoke("run", "--suite", "quick", "--detectors", "roo_code", "--param", param, "--out", tmp_path / "r")
    line = one_error_line(r)
    assert says in line and "--config" in line
