"""The runner: a suite's episodes through every detector, open and closed loop, into a run folder.

Data flows one way: suite -> scenarios -> episodes -> per-call scores -> outcomes ->
metrics -> files. Every file is written atomically; ``metrics.csv`` holds only
deterministic figures, measured costs go to ``timings.csv``.
"""
from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from detectors.protocol import Detector, cost_counters
from scenarios.base import Scenario, make_scenarios
from scenarios.injected_suite import load_real_episodes
from scenarios.trace import write_trace
from scenarios.tree import Episode
from sim.config.manifest import build_manifest
from sim.config.runfolder import RunFolderError, clear_results, file_digests, new_run_id, read_run_manifest
from sim.config.spec import RunConfig
from sim.execute.checkpoint import PARTS, Checkpoints, ResumeError
from sim.execute.engines import Engine
from sim.execute.rows import (CALL_COLUMNS, CLOSED_COLUMNS, CLOSED_METRIC_COLUMNS, EPISODE_COLUMNS, METRIC_COLUMNS,
                               NO_GUARD, TIMING_COLUMNS, RowMaker, closed_rows)
from sim.execute.tasks import run_open, timing_row
from sim.files import write_csv, write_json, write_lines
from sim.heap import frozen, no_full_collections
from sim.play.frameworks import BUILTIN, Unsupported, linear, play
from sim.play.harness import Tape, generate, simulate
from sim.play.watchdog import Watchdog
from sim.scoring.deploy import write_deploy
from sim.scoring.outcomes import load_profiles, units_by_id
from sim.scoring.trace_units import keep_trace_units


def _bar(total: int, desc: str, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="ep", file=sys.stderr, leave=False, dynamic_ncols=True)


def build_scenarios(families: Sequence[str], episodes: int, seed: int, family_params: dict[str, dict[str, Any]],
                    weights: Mapping[str, float] | None = None) -> list[Scenario]:
    """``episodes`` per family, times the family's weight in the suite (see ``episode_count``)."""
    from scenarios.suites import episode_count

    return make_scenarios([(f, i, family_params.get(f, {}))
                           for f in families for i in range(episode_count(episodes, (weights or {}).get(f, 1.0)))], seed)


def generate_episodes(scenarios: Sequence[Scenario], progress: bool = False,
                      tapes: dict[str, Tape] | None = None) -> list[Episode]:
    """The open-loop episodes; with ``tapes`` (a dict to fill), each scenario's play is taped
    for the closed-loop tasks (``sim.play.harness.Tape``)."""
    bar = _bar(len(scenarios), "generate", progress)
    out = []
    for sc in scenarios:
        tape = None
        if tapes is not None:
            tape = tapes[sc.id] = Tape()
        out.append(generate(sc, tape=tape))
        if bar:
            bar.update()
    if bar:
        bar.close()
    return out


def evaluate_open(built: Sequence[tuple[str, Detector]], episodes: Sequence[Episode], delta: int,
                  profiles: dict[str, dict[str, float]], progress: bool = False, check_timeout: float | None = None):
    """Score every episode with every detector in this process: (metrics, outcomes, calls, timings, errors),
    ``calls`` as one text of ``calls.csv`` lines per detector."""
    metrics, outcomes, calls, timings = [], [], [], []
    errors: dict[str, int] = {}
    rows = RowMaker(episodes, (), delta, profiles)
    bar = _bar(len(episodes) * len(built), "open loop", progress)
    with frozen():  # the detectors' full collections skip the suite (``sim.heap``)
        for label, det in built:
            with Watchdog(check_timeout) as watch:
                res = run_open(label, det, episodes, bar, watch)
            ns = [x.ns for sc in res.scores.values() for x in sc]
            got, timing = rows(("open", label), (res, timing_row(label, "open", ns, res.seconds, cost_counters(det))))
            metrics += got.metrics
            outcomes += got.outcomes
            calls.append(got.calls)
            errors[label] = got.errors
            timings.append(timing)
    if bar:
        bar.close()
    return metrics, outcomes, calls, timings, errors


def run(config: RunConfig, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Run the benchmark and write the run folder's result files (the report is a separate
    step: ``sim.report``). Returns a summary for ``--json``."""
    # The suite and the results stay alive to the end: walking them in full collections
    # frees nothing (``sim.heap``).
    with no_full_collections():
        return _run(config, log)


def _run(config: RunConfig, log: Callable[[str], None]) -> dict[str, Any]:
    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    engine = config.engine or Engine()
    parts = Checkpoints(out, config.config_hash(), config.resolved())
    parts.start(config.resume)  # raises ResumeError before any work
    if not config.resume:
        clear_results(out)
    profiles_version, profiles = load_profiles()
    t_start = time.perf_counter()
    label_problems: list[str] = []
    framework = config.harness != BUILTIN
    # The built-in harness's tapes replay its own plays, not a framework's: none taped for one.
    tapes: dict[str, Tape] | None = None if framework else {}
    if config.suite.real:
        # Labelled real traces: loaded, not generated; no scenario to play in closed loop.
        scenarios = []
        episodes = [ep for ep in load_real_episodes(config.suite.name, config.corpus_dir, label_problems, config.labels_path)
                    if ep.family in config.families]
        for p in label_problems[:20]:
            log(f"label not used: {p}")
        if len(label_problems) > 20:
            log(f"... and {len(label_problems) - 20} more labels not used")
    else:
        scenarios = build_scenarios(config.families, config.episodes, config.seed, config.suite.family_params,
                                    config.suite.family_weights)
        episodes = generate_episodes(scenarios, config.progress, tapes)
    write_trace(out / "trace.jsonl", episodes)
    # Worked out once here: forked workers inherit them for their rows, and a report that
    # follows in this process takes them instead of reading the trace back (``trace_units``).
    units = units_by_id(episodes)
    keep_trace_units(out / "trace.jsonl", units)
    phases = {"generate": time.perf_counter() - t_start}
    log(f"{'loaded' if config.suite.real else 'generated'} {len(episodes)} episodes, {sum(len(e.tool_nodes()) for e in episodes)} tool calls "
        f"({phases['generate']:.1f} s)")
    built = [(d.label, d.build()) for d in config.detectors]  # fails fast on a bad detector
    kinds = [k for k in ("open", "closed") if config.mode in (k, "both")]
    played = scenarios
    if framework:
        # A framework's run has one path: its closed loop plays the linear scenarios only.
        played = [sc for sc in scenarios if linear(sc)]
        tapes = {}
        if "closed" in kinds and not played:
            raise Unsupported(f"harness {config.harness}: no linear scenario in this suite to play in closed loop "
                              "(branching scenarios run in the built-in harness only)")
        if "closed" in kinds:
            log(f"harness {config.harness}: closed loop plays {len(played)} linear scenarios, "
                f"{len(scenarios) - len(played)} branching ones left out")
    tasks = [(k, replace(d, harness=config.harness)) for k in kinds for d in config.detectors]
    results = parts.load(tasks, log) if config.resume else {}
    if config.resume:
        log(f"resuming: {len(results)} of {len(tasks)} detector tasks already done")
    # The local pool's workers make each task's rows as it ends; other results are made here.
    rows = RowMaker(episodes, played, config.delta, profiles, units)
    results.update(engine.run([t for t in tasks if (t[0], t[1].label) not in results], episodes, played,
                                     progress=config.progress, check_timeout=config.check_timeout,
                                     on_result=parts.save, tapes=tapes, log=log, rows=rows))
    phases["detectors"] = time.perf_counter() - t_start - phases["generate"]
    log(f"ran {len(tasks)} detector tasks on the {engine.name} engine ({phases['detectors']:.1f} s)")
    metrics, outcomes, calls, timings, errors = [], [], [], [], {}
    closed_m, closed_e = [], []
    for d in config.detectors:
        if "open" in kinds:
            got, timing = rows(("open", d.label), results[("open", d.label)])
            metrics += got.metrics
            outcomes += got.outcomes
            calls.append(got.calls)
            errors[d.label] = got.errors
            timings.append(timing)
    for d in config.detectors:
        if "closed" in kinds:
            got, timing = rows(("closed", d.label), results[("closed", d.label)])
            closed_m += got.metrics
            closed_e += got.episodes
            timings.append(timing)
    if "closed" in kinds and played:
        # The reference every guard is measured against: the same scenarios played unguarded.
        ref_m, ref_e = closed_rows(NO_GUARD, played,
                                   {sc.id: play(config.harness, sc, None) if framework else
                                    simulate(sc, None, tape=tapes.get(sc.id)).stats for sc in played})
        closed_m, closed_e = ref_m + closed_m, ref_e + closed_e
    wall = time.perf_counter() - t_start
    phases["assemble"] = wall - phases["generate"] - phases["detectors"]
    write_csv(out / "metrics.csv", metrics, METRIC_COLUMNS)
    write_csv(out / "episodes.csv", outcomes, EPISODE_COLUMNS)
    write_lines(out / "calls.csv", calls, CALL_COLUMNS)
    write_csv(out / "timings.csv", timings, TIMING_COLUMNS)
    if closed_m:
        write_csv(out / "closed_metrics.csv", closed_m, CLOSED_METRIC_COLUMNS)
        write_csv(out / "closed.csv", closed_e, CLOSED_COLUMNS)
    write_deploy(out, delta=config.delta)  # from the files just written, as `loopbench report` recomputes it
    manifest = build_manifest(
        "run", config.resolved(), config.detectors, [det for _, det in built], profiles_version=profiles_version,
        profiles=profiles, seeds={"suite": config.seed}, episodes=len(episodes),
        tool_calls=sum(len(e.tool_nodes()) for e in episodes), detector_errors=errors, engine=engine.name,
        label_problems=label_problems, harness=_harness_record(config, scenarios, played, kinds),
        wall_seconds=round(wall, 3), phase_seconds={k: round(v, 3) for k, v in phases.items()},
        run_id=new_run_id(), files=file_digests(out))
    write_json(out / "manifest.json", manifest)
    parts.finish()
    log(f"wrote the run folder ({time.perf_counter() - t_start - phases['generate'] - phases['detectors']:.1f} s)")
    return {"out": str(out), "config_hash": manifest["config_hash"], "episodes": len(episodes),
            "wall_seconds": manifest["wall_seconds"], "metrics": [r for r in metrics if r["family"] == "all"],
            "closed": [r for r in closed_m if r["family"] == "all"], "detector_errors": errors}


def _harness_record(config: RunConfig, scenarios: Sequence[Scenario], played: Sequence[Scenario],
                    kinds: Sequence[str]) -> dict[str, Any] | None:
    """Where closed loop was played, for the manifest and the report (``None``: no closed loop)."""
    if "closed" not in kinds or config.suite.real:
        return None
    return {"name": config.harness, "scenarios": len(scenarios), "played": len(played),
            "left_out_branching": len(scenarios) - len(played)}


def finished_run(out: Path, config_hash: str) -> bool:
    """For ``--resume``: True when ``out`` holds a finished run of this configuration (only its
    report is left to write); False when it holds checkpoints for the runner to resume. Raises
    ``ResumeError`` when it holds a run of another configuration, or its files are not one run's."""
    out = Path(out)
    if (out / PARTS / "run.json").is_file() or not (out / "manifest.json").is_file():
        return False  # the runner resumes the checkpoints, or says there is nothing to resume
    try:
        manifest = read_run_manifest(out)
    except RunFolderError as exc:
        raise ResumeError(str(exc)) from None
    if manifest.get("config_hash") != config_hash:
        raise ResumeError(f"{out} holds a finished run of another configuration (config hash "
                          f"{manifest.get('config_hash')}, now {config_hash}); use the same options, or a new --out")
    return True


def summary_of(out: Path) -> dict[str, Any]:
    """The summary :func:`run` returns, read back from a finished run folder."""
    import csv

    from sim.numbers import as_float

    def rows(name: str) -> list[dict[str, Any]]:
        path = Path(out) / name
        if not path.is_file():
            return []
        with open(path, encoding="utf-8", newline="") as fh:
            return [{k: (as_float(v) if as_float(v) is not None else v) for k, v in r.items()}
                    for r in csv.DictReader(fh) if r.get("family") == "all"]

    manifest = read_run_manifest(out)
    return {"out": str(out), "config_hash": manifest["config_hash"], "episodes": manifest["episodes"],
            "wall_seconds": manifest.get("wall_seconds"), "metrics": rows("metrics.csv"),
            "closed": rows("closed_metrics.csv"), "detector_errors": manifest.get("detector_errors", {})}
