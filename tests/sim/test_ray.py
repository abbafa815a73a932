"""The Ray engine against a local Ray instance the test starts: sharded by episode, and
byte-identical to the local run."""
import json

import pytest
from click.testing import CliRunner

from scenarios.suites import load_suite
from sim.cli import main
from sim.execute.engines import Engine, EngineError, plan_shards
from sim.execute.pool import run_tasks as local_run_tasks
from sim.config.spec import DetectorSpec
from sim.execute.runner import build_scenarios, generate_episodes

DETECTORS = ["exact", "progress_guard", "cline"]


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")  # CI installs it through the dev extra
    # Started here; the engine finds Ray initialised, uses that connection and leaves it open.
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    yield ray
    ray.shutdown()


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_ray_run_is_byte_identical_to_the_local_run(local_ray, tmp_path):
    base = ["run", "--suite", "quick", "--episodes", "3", "--detectors", ",".join(DETECTORS), "--no-progress"]
    r = invoke(*base, "--out", tmp_path / "local", "--workers", "1")
    assert r.exit_code == 0, r.output
    r = invoke(*base, "--out", tmp_path / "ray", "--engine", "ray")
    assert r.exit_code == 0, r.output
    for name in ("metrics.csv", "episodes.csv", "calls.csv", "closed.csv", "closed_metrics.csv"):
        assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "local" / name).read_bytes(), name
    ray_manifest = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert ray_manifest["engine"] == "ray"
    assert ray_manifest["config_hash"] == json.loads((tmp_path / "local" / "manifest.json").read_text())["config_hash"]
    assert local_ray.is_initialized()  # a connection the engine did not open stays open


def test_shards_merge_back_in_episode_order(local_ray):
    suite = load_suite("quick")
    scenarios = build_scenarios(suite.families[:3], 4, 7, suite.family_params)
    episodes = generate_episodes(scenarios)
    tasks = [(k, DetectorSpec(d, d)) for k in ("open", "closed") for d in ("exact", "no_progress")]
    local = local_run_tasks(tasks, episodes, scenarios, workers=1)
    seen = []
    sharded = Engine("ray", shard_episodes=5).run(tasks, episodes, scenarios,  # 12 episodes -> 3 shards each
                                                  on_result=lambda key, value: seen.append(key))
    assert sharded.keys() == local.keys() and sorted(seen) == sorted(local)
    for key, (value, timing) in local.items():
        got, got_timing = sharded[key]
        if key[0] == "open":
            assert list(got.scores) == list(value.scores) == [e.id for e in episodes]
            strip = lambda scores: {e: [(s.node_id, s.call_index, s.depth, s.score, s.verdict) for s in v]  # noqa: E731
                                    for e, v in scores.items()}  # all but the measured time
            assert strip(got.scores) == strip(value.scores) and got.errors == value.errors
        else:
            assert list(got) == list(value)
            assert {k: v.__dict__ for k, v in got.items()} == {k: v.__dict__ for k, v in value.items()}
        assert got_timing["checks"] == timing["checks"]


class CrashingSpec:
    """A detector spec whose build kills the Ray worker that runs it (a crash in C code)."""

    label = "crashes"

    def build(self):
        import os

        os._exit(3)


def test_a_crashed_ray_worker_fails_only_its_shards(local_ray):
    import sys

    # Pickled by value: the Ray workers cannot import this test module.
    local_ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    suite = load_suite("quick")
    scenarios = build_scenarios(suite.families[:2], 3, 5, suite.family_params)
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec("exact", "exact")), ("open", CrashingSpec()), ("closed", CrashingSpec())]
    out = Engine("ray", shard_episodes=3).run(tasks, episodes, scenarios)
    crashed, _ = out[("open", "crashes")]
    assert list(crashed.errors) == [e.id for e in episodes] and not crashed.scores
    assert all(msg.startswith("ray: ") for msg in crashed.errors.values())
    closed, _ = out[("closed", "crashes")]
    assert all(st.ended == "detector_error" and st.detector_error.startswith("ray: ") for st in closed.values())
    exact, _ = out[("open", "exact")]
    assert not exact.errors and list(exact.scores) == [e.id for e in episodes]


def test_an_interrupt_cancels_the_pending_shards(local_ray, monkeypatch):
    suite = load_suite("quick")
    scenarios = build_scenarios(suite.families[:2], 3, 5, suite.family_params)
    episodes = generate_episodes(scenarios)
    tasks = [("open", DetectorSpec(d, d)) for d in ("exact", "normalized", "cline", "no_progress")]
    cancelled = []
    monkeypatch.setattr(local_ray, "cancel", lambda ref, force=False: cancelled.append(ref))

    def interrupt(key, value):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        Engine("ray", shard_episodes=2).run(tasks, episodes, scenarios, on_result=interrupt)
    assert cancelled  # the shards not yet collected (12 in all, at most 3 done)


def test_sweep_runs_on_ray_with_the_local_results(local_ray, tmp_path):
    base = ["sweep", "--detector", "exact", "--param", "tool_overrides.search.max_repeats=2,3",
            "--suite", "quick", "--episodes", "2", "--no-progress"]
    assert invoke(*base, "--out", tmp_path / "local", "--workers", "1").exit_code == 0
    r = invoke(*base, "--out", tmp_path / "ray", "--engine", "ray")
    assert r.exit_code == 0, r.output
    assert (tmp_path / "ray" / "sweep.csv").read_bytes() == (tmp_path / "local" / "sweep.csv").read_bytes()


def test_shard_plan_covers_every_episode_once():
    for n, tasks, cpus, size in [(760, 36, 2, None), (760, 4, 64, None), (7, 2, 100, None), (100, 1, 1, 9), (1, 5, 5, None)]:
        bounds = plan_shards(n, tasks, cpus, size)
        assert bounds[0][0] == 0 and bounds[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
        assert all(hi > lo for lo, hi in bounds)
    assert len(plan_shards(760, 4, 64)) == 48  # a big cluster gets many shards per task
    assert len(plan_shards(100, 1, 1, 9)) == 12


def test_engine_errors_are_one_line():
    with pytest.raises(EngineError, match="unknown engine 'spark'"):
        Engine("spark")
    from sim.execute.engines import check_reachable

    with pytest.raises(EngineError, match="cannot reach Ray at 127.0.0.1:1: Connection refused"):
        check_reachable("127.0.0.1:1")  # Ray itself would retry for minutes
    with pytest.raises(EngineError, match="expected HOST:PORT"):
        check_reachable("head-node")
    r = invoke("run", "--suite", "quick", "--detectors", "exact", "--ray-address", "127.0.0.1:1", "--no-progress")
    assert r.exit_code == 2 and "--ray-address needs --engine ray" in r.output


def test_engine_ray_without_ray_installed_is_a_usage_error(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if not installed
    r = invoke("run", "--suite", "quick", "--detectors", "exact", "--engine", "ray", "--out", tmp_path / "r",
               "--no-progress")
    assert r.exit_code == 2
    assert r.output.strip() == "loopbench: error: --engine ray needs Ray: pip install 'loopbench[ray]'"
    assert not (tmp_path / "r").exists()  # refused before any work


def test_a_ray_shard_takes_the_drivers_embedding_cache_and_backend(monkeypatch):
    # Ray reuses its workers across runs (and a remote node has its own environment): the
    # backend the manifest records is the driver's, so the task carries it. No Ray needed:
    # this is the function the remote task runs.
    import os

    from detectors.embedding_model import BACKEND_ENV, CACHE_ENV
    from sim.execute import engines

    seen = {}
    monkeypatch.setattr(engines, "run_shard", lambda *a: seen.update({k: os.environ.get(k) for k in (CACHE_ENV, BACKEND_ENV)}))
    monkeypatch.setenv(BACKEND_ENV, "torch")  # what a reused worker was left with
    monkeypatch.setenv(CACHE_ENV, "/somewhere/else")
    engines._ray_shard("open", DetectorSpec("exact", "exact"), ([], []), {CACHE_ENV: "/cache", BACKEND_ENV: None}, None)
    assert seen == {CACHE_ENV: "/cache", BACKEND_ENV: None}
    engines._ray_shard("open", DetectorSpec("exact", "exact"), ([], []), {CACHE_ENV: None, BACKEND_ENV: "openvino-bf16"},
                       None)
    assert seen == {CACHE_ENV: None, BACKEND_ENV: "openvino-bf16"}
