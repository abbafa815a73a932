"""``sim.heap``: a run's parent forgoes full collections; detector code keeps them."""
import gc
from pathlib import Path

import pytest

from sim import heap
from sim.config.spec import DetectorSpec
from sim.execute import pool
from sim.execute.runner import build_scenarios, generate_episodes

FAULTS = Path(__file__).resolve().parents[1] / "fixtures" / "faults"


def _full_collections_while_keeping(n: int) -> int:
    """Full collections while ``n`` new containers are allocated and kept alive."""
    count = 0

    def seen(phase, info):
        nonlocal count
        if phase == "stop" and info["generation"] == 2:
            count += 1

    gc.callbacks.append(seen)
    try:
        kept = [[i] for i in range(n)]
    finally:
        gc.callbacks.remove(seen)
    assert len(kept) == n
    return count


def test_a_growing_heap_gets_no_full_collection_inside_the_block_and_does_outside():
    before = gc.get_threshold()
    gc.collect()
    # Enough new survivors for CPython to walk the whole heap (more than a quarter of it).
    n = len(gc.get_objects()) + 200_000
    gc.set_threshold(700, 10, 10)
    try:
        assert _full_collections_while_keeping(n) > 0
        with heap.no_full_collections():
            assert _full_collections_while_keeping(n) == 0
    finally:
        gc.set_threshold(*before)


def test_thresholds_come_back_after_an_error_and_ordinary_collections_restore_them_inside():
    before = gc.get_threshold()
    with pytest.raises(KeyError):
        with heap.no_full_collections():
            assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] > 10**9
            with heap.ordinary_collections():
                assert gc.get_threshold() == before
            assert gc.get_threshold()[2] > 10**9
            raise KeyError("x")
    assert gc.get_threshold() == before
    with heap.ordinary_collections():  # outside any block it changes nothing
        assert gc.get_threshold() == before


@pytest.mark.parametrize("workers", [1, 2])
def test_detectors_run_with_full_collections_inside_a_run_that_forgoes_them(monkeypatch, workers):
    """A plug-in's states may hold cycles that only a full collection frees: pool workers
    forked inside the run's block, and tasks run in the parent, get the collector back."""
    monkeypatch.syspath_prepend(str(FAULTS))
    scenarios = build_scenarios(["stale"], 1, 0, {})
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec("g", "fault_guards:ReportsFullCollections")), ("open", DetectorSpec("exact", "exact"))]
    ordinary = gc.get_threshold()[2]
    with heap.no_full_collections():
        res, _ = pool.run_tasks(tasks, episodes, scenarios, workers=workers)[("open", "g")]
        assert gc.get_threshold()[2] > 10**9  # the parent is still in its block
    assert set(res.errors.values()) == {f"RuntimeError: gen2={ordinary}"}


def test_a_run_generates_and_assembles_without_full_collections(monkeypatch, tmp_path):
    from sim.config.spec import RunConfig
    from sim.execute import runner
    from scenarios.suites import load_suite

    seen = []
    real = runner.write_trace

    def spy(path, episodes):
        seen.append(gc.get_threshold()[2])
        return real(path, episodes)

    monkeypatch.setattr(runner, "write_trace", spy)
    cfg = RunConfig(suite=load_suite("quick"), detectors=[DetectorSpec("exact", "exact")], families=["stale"],
                    episodes=1, seed=0, mode="open", out=str(tmp_path / "run"), progress=False)
    ordinary = gc.get_threshold()
    runner.run(cfg)
    assert seen and seen[0] > 10**9
    assert gc.get_threshold() == ordinary


def test_frozen_keeps_what_exists_out_of_the_collector_for_the_block_only():
    gc.collect()
    assert gc.get_freeze_count() == 0
    suite = [[i] for i in range(1000)]
    with heap.frozen():
        assert gc.get_freeze_count() >= len(suite)
        assert not any(o is suite for o in gc.get_objects())  # a full collection does not walk it
        made_inside = [[1]]
    assert gc.get_freeze_count() == 0
    assert any(o is suite for o in gc.get_objects()) and any(o is made_inside for o in gc.get_objects())


def test_frozen_leaves_an_earlier_freeze_in_place():
    gc.freeze()
    try:
        with heap.frozen():
            pass
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_detectors_scored_in_this_process_run_beside_a_frozen_suite(monkeypatch):
    """The regression gate and ``--workers 1`` score detectors in the process that holds the
    suite: their full collections should not walk it."""
    from sim.execute.runner import evaluate_open
    from sim.scoring.outcomes import load_profiles

    monkeypatch.syspath_prepend(str(FAULTS))
    from fault_guards import ReportsFrozenObjects

    scenarios = build_scenarios(["stale"], 1, 0, {})
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec("f", "fault_guards:ReportsFrozenObjects"))]
    res, _ = pool.run_tasks(tasks, episodes, scenarios, workers=1)[("open", "f")]
    assert set(res.errors.values()) == {"RuntimeError: frozen=True"}
    assert gc.get_freeze_count() == 0
    _, outcomes, _, _, errors = evaluate_open([("f", ReportsFrozenObjects())], episodes, 5, load_profiles()[1])
    assert errors == {"f": len(episodes)} and {o["error"] for o in outcomes} == {"RuntimeError: frozen=True"}
    assert gc.get_freeze_count() == 0
