"""What the seeds predict, checked on a real (quick) run of the benchmark."""
import pytest

from scenarios.suites import load_suite
from sim.config.spec import DetectorSpec, RunConfig
from sim.execute.runner import run


@pytest.fixture(scope="module")
def metrics(tmp_path_factory):
    import csv

    out = tmp_path_factory.mktemp("pred")
    suite = load_suite("quick")
    cfg = RunConfig(suite=suite, detectors=[DetectorSpec(n, n) for n in ("exact", "normalized", "step_budget")],
                    families=suite.families, episodes=8, seed=11, mode="open", out=out, progress=False)
    run(cfg)
    with open(out / "metrics.csv") as fh:
        return {(r["detector"], r["family"]): r for r in csv.DictReader(fh)}


def f(metrics, det, fam, col):
    return float(metrics[(det, fam)][col])


def test_exact_misses_paraphrases(metrics):
    assert f(metrics, "exact", "paraphrased", "miss_rate") == 1.0


def test_normalized_catches_cosmetic_variants_that_exact_misses(metrics):
    assert f(metrics, "normalized", "cosmetic", "miss_rate") < f(metrics, "exact", "cosmetic", "miss_rate")


def test_run_wide_counter_flags_sibling_branches_the_path_local_one_does_not(metrics):
    assert f(metrics, "exact", "branch_siblings", "false_alarm_rate") == 0.0
    assert f(metrics, "normalized", "branch_siblings", "false_alarm_rate") > 0.5


def test_step_budget_catches_everything_late(metrics):
    row = metrics[("step_budget", "all")]
    looping = int(row["tp"]) + int(row["miss"]) + int(row["early"])
    # A loop whose onset happens to fall within Δ of the budget (a long prefix plus
    # paging, say) is caught in time; that stays rare: what the budget catches, it catches
    # late. Paths shorter than the budget (replan's redo loops, the short loops modelled on
    # real traces) are never caught at all.
    tp, late = int(row["tp"]), int(row["late"])
    assert tp <= 0.05 * looping and late >= 0.9 * (late + tp)
    # Where loops run long (the SPEC's loop kinds), most are caught, late; the short loops
    # (headroom and coding-agent families, modelled on real traces) mostly end before the budget.
    long_kinds = ("stale", "cosmetic", "cycle", "paraphrased", "no_progress", "same_error", "evasion", "drift")
    lk = [metrics[("step_budget", fam)] for fam in long_kinds]
    assert sum(int(r["late"]) for r in lk) >= 0.5 * sum(int(r["tp"]) + int(r["miss"]) + int(r["early"]) for r in lk)
    assert f(metrics, "step_budget", "failed_write_reread", "miss_rate") == 1.0
    assert f(metrics, "step_budget", "replan", "miss_rate") == 1.0
