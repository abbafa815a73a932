"""``loopbench sweep`` (a parameter grid's trade-off) and ``loopbench tune`` (per-tool overrides within a budget)."""
from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import click

from sim.cli.app import (LoopbenchError, out_dir, split_list, detector_specs, engine_options, load_config, main, make_engine,
                         named_suite)
from sim.execute.engines import EngineError
from sim.numbers import number_text


def as_rate(v) -> str:
    return number_text(v, pct=True)


def warn_measure_only(suite: str) -> None:
    """One line on stderr when ``suite`` is kept for measuring (the held-out half labelled here)."""
    from scenarios.realsuite import MEASURE_ONLY

    if suite in MEASURE_ONLY:
        click.echo(f"loopbench: note: suite {suite} is for measuring; a setting tuned on it is fitted to the "
                   "traces that are meant to judge it (docs/traces.md)", err=True)


def _workload(suite, families, episodes, seed):
    """The suite, its families, episodes per family and seed, as ``run`` resolves them."""
    from scenarios.base import registered

    s = named_suite(suite)
    fams = split_list(families) or s.families
    unknown = [f for f in fams if f not in registered()]
    if unknown:
        raise LoopbenchError(f"unknown scenario families: {', '.join(unknown)} (see `loopbench list`)")
    return s, fams, episodes or s.episodes, s.seed if seed is None else seed


def _episodes(s, fams, n, seed, progress):
    from sim.execute.runner import build_scenarios, generate_episodes

    return generate_episodes(build_scenarios(fams, n, seed, s.family_params, s.family_weights), progress)


def one_spec(detector, config_path):
    if "," in detector:
        raise LoopbenchError(f"--detector {detector!r}: name one detector")
    return detector_specs([detector], load_config(config_path), ())[0]


def _cell(v) -> str:
    if v is None:
        return "unset"
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


@main.command("sweep")
@click.option("--detector", required=True, help="One detector: name, module:Class or label=spec.")
@click.option("--param", "params", multiple=True, required=True,
              help="P=START:STOP:STEP (STOP included) or P=V1,V2,...; repeat for a grid. Dotted names reach into "
                   "tables: tool_overrides.http_get.max_repeats=1:5:1.")
@click.option("--suite", default="default", show_default=True, help="Suite name or .toml path.")
@click.option("--families", default=None, help="Comma-separated scenario families. [default: the suite's]")
@click.option("--episodes", type=click.IntRange(1), default=None, help="Episodes per family. [default: the suite's]")
@click.option("--seed", type=int, default=None, help="Suite seed. [default: the suite's]")
@click.option("--config", "config_path", default=None, help="TOML configuration: the detector's other parameters.")
@click.option("--out", default=None, help="Folder for sweep.csv and sweep.png. [default: runs/sweep-TIMESTAMP]")
@click.option("--delta", type=click.IntRange(0), default=None, help="Detection window Δ in calls. [default: 5]")
@engine_options
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def sweep_cmd(detector, params, suite, families, episodes, seed, config_path, out, delta, workers, engine, ray_address,
              no_progress) -> None:
    """Score one detector over a grid of parameter values: the false-alarm / miss trade-off, table and plot.

    The detector's threshold_param is swept in one pass over stored scores; any other
    parameter is re-simulated per grid cell (open loop).
    """
    from sim.files import write_csv
    from sim.scoring.outcomes import DELTA, load_profiles
    from sim.tuning.params import TuningError, parse_param
    from sim.tuning.sweep import plot_sweep, run_sweep, sweep_cells

    t0 = time.perf_counter()
    try:
        grids = [parse_param(p) for p in params]
    except TuningError as exc:
        raise LoopbenchError(str(exc)) from None
    spec = one_spec(detector, config_path)
    try:
        sweep_cells(spec, grids)  # every cell's values checked before any work
    except TuningError as exc:
        raise LoopbenchError(str(exc)) from None
    warn_measure_only(suite)
    eng = make_engine(engine, workers, ray_address)
    s, fams, n, sd = _workload(suite, families, episodes, seed)
    delta = DELTA if delta is None else delta
    progress = not no_progress
    eps = _episodes(s, fams, n, sd, progress)
    _, profiles = load_profiles()
    try:
        result = run_sweep(spec, grids, eps, profiles, delta=delta, engine=eng, progress=progress)
    except (TuningError, EngineError) as exc:
        raise LoopbenchError(str(exc)) from None
    folder = out_dir(out, "sweep")
    folder.mkdir(parents=True, exist_ok=True)
    metric_cols = ["episodes", "tn", "fp", "early", "tp", "miss", "false_alarm_rate", "miss_rate", "early_rate",
                   "recall", "precision", "median_delay", "mean_delay"] + [k for k in result.rows[0] if k.startswith("score_")]
    for r in result.rows:
        r["mode"] = result.mode
    write_csv(folder / "sweep.csv", result.rows, result.params + ["default", "mode"] + metric_cols)
    plot_sweep(result, folder / "sweep.png", delta)
    click.echo(f"sweep of {spec.label} on suite {s.name} (seed {sd}, {len(eps)} episodes, Δ = {delta})")
    click.echo(f"mode: {result.mode} — {result.explanation}\n")
    head = result.params + ["false_alarm_rate", "miss_rate", "early_rate", "median_delay", "score_standard"]
    click.echo("| " + " | ".join(head) + " |")
    click.echo("|" + "---|" * len(head))
    for r in result.rows:
        mark = " (default)" if r["default"] else ""
        cells = [_cell(r[p]) for p in result.params]
        cells[-1] += mark
        cells += [number_text(r["false_alarm_rate"], pct=True), number_text(r["miss_rate"], pct=True), number_text(r["early_rate"], pct=True), number_text(r["median_delay"]),
                  number_text(r["score_standard"])]
        click.echo("| " + " | ".join(cells) + " |")
    click.echo(f"\nwrote {folder / 'sweep.csv'} and {folder / 'sweep.png'} ({time.perf_counter() - t0:.1f} s)")


def _family_table(rows_default, rows_tuned, looping) -> list[str]:
    d = {r["family"]: r for r in rows_default}
    t = {r["family"]: r for r in rows_tuned}
    out = ["| family | kind | false_alarm_rate | miss_rate | median_delay |", "|---|---|---|---|---|"]
    fams = sorted((f for f in d if f != "all"), key=lambda f: (f in looping, f)) + ["all"]
    for f in fams:
        a, b = d[f], t.get(f, {})
        kind = "all" if f == "all" else ("loop" if f in looping else "healthy")

        def pair(key, fmt):
            va, vb = a.get(key), b.get(key)
            if va is None and vb is None:
                return ""
            arrow = "→" if va != vb else "="
            return f"{fmt(va)} {arrow} {fmt(vb)}"

        out.append(f"| {f} | {kind} | {pair('false_alarm_rate', as_rate)} | {pair('miss_rate', as_rate)} | "
                   f"{pair('median_delay', number_text)} |")
    return out


@main.command("tune")
@click.option("--detector", required=True, help="One detector that takes tool_overrides: name, module:Class or label=spec.")
@click.option("--max-false-alarm-rate", "budget", type=click.FloatRange(0, 1), default=None,
              help="The false-alarm budget on clean episodes, e.g. 0.05 (--objective false-alarms).")
@click.option("--objective", type=click.Choice(["false-alarms", "deploy"]), default="false-alarms", show_default=True,
              help="false-alarms: per-tool overrides within --max-false-alarm-rate; deploy: when a guard that nudges "
                   "first halts, within --max-stopped (docs/scoring.md).")
@click.option("--max-stopped", type=click.FloatRange(0, 1), default=None,
              help="--objective deploy: the share of successful runs a halt may stop, e.g. 0.01.")
@click.option("--suite", default="default", show_default=True, help="Suite name or .toml path.")
@click.option("--families", default=None, help="Comma-separated scenario families. [default: the suite's]")
@click.option("--episodes", type=click.IntRange(1), default=None, help="Episodes per family. [default: the suite's]")
@click.option("--seed", type=int, default=None, help="Tuning seed. [default: the suite's]")
@click.option("--heldout-seed", type=int, default=None, help="Seed of the held-out evaluation. [default: tuning seed + 1]")
@click.option("--tools", default=None, help="Comma-separated tools to tune. [default: every tool the suite calls]")
@click.option("--keep-misses", is_flag=True, help="Never take a setting that gives any family more misses (the budget may then be missed).")
@click.option("--config", "config_path", default=None, help="TOML configuration to start from (parameters, tool registry).")
@click.option("--out", default="tuned.toml", show_default=True, help="Where to write the overrides (TOML for run --config).")
@click.option("--delta", type=click.IntRange(0), default=None, help="Detection window Δ in calls. [default: 5]")
@engine_options
@click.option("--max-nudges", type=click.FloatRange(0), default=None,
              help="--objective deploy: nudges per 100 calls not labelled as loops the guard may make; picks when it "
                   "starts to nudge (progress_guard's nudge_after). [default: no budget, every finding nudges]")
@click.option("--global-only", is_flag=True, help="--objective deploy: pick the global halt setting only, no per-tool "
                                                 "overrides (what carries to tools the suite never called).")
@click.option("--corpus", default=None, help="--objective deploy on a real suite: a local copy of the corpora, for the "
                                            "traces not shipped with loopbench (Who&When), as for run --corpus.")
@click.option("--cv-rules/--no-cv-rules", default=True, show_default=True,
              help="--objective deploy on a real suite: leave-one-corpus-out scores each held-out corpus by the guard "
                   "without the rules written from it (as loopbench report does).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout instead of the tables.")
def tune_cmd(detector, budget, objective, max_stopped, suite, families, episodes, seed, heldout_seed, tools, keep_misses,
             config_path, out, delta, workers, engine, ray_address, max_nudges, global_only, corpus, cv_rules, no_progress,
             as_json) -> None:
    """Recommend per-tool overrides that meet a false-alarm budget with the fewest misses; write them as TOML.

    Coordinate search on the tuning seed (open loop), then default vs tuned on held-out seeds.
    With --objective deploy: the halt setting (global and per tool) that saves the most failed-run
    calls while stopping at most --max-stopped of the successful runs.
    """
    warn_measure_only(suite)
    if objective == "deploy":
        if max_stopped is None:
            raise LoopbenchError("--objective deploy needs --max-stopped (the share of successful runs a halt may stop, e.g. 0.01)")
        if budget is not None or keep_misses or heldout_seed is not None or tools:
            raise LoopbenchError("--objective deploy takes --max-stopped, not --max-false-alarm-rate, --keep-misses, "
                                 "--heldout-seed or --tools")
        from sim.cli.tune_deploy import tune_deploy

        tune_deploy(one_spec(detector, config_path), detector, max_stopped, suite, families, episodes, seed, out, delta,
                    make_engine(engine, workers, ray_address), no_progress, as_json, corpus, not global_only, max_nudges,
                    cv_rules)
        return
    if corpus is not None or global_only or max_nudges is not None:
        raise LoopbenchError("--corpus, --global-only and --max-nudges are for --objective deploy")
    if budget is None:
        raise LoopbenchError("--objective false-alarms needs --max-false-alarm-rate (e.g. 0.05)")
    if max_stopped is not None:
        raise LoopbenchError("--max-stopped is for --objective deploy")
    from detectors.registry import detector_class
    from scenarios.base import loop_families

    from scenarios.files import atomic_write
    from sim.config.spec import DetectorSpec
    from sim.execute.rows import metric_rows
    from sim.scoring.outcomes import DELTA, load_profiles, units_by_id
    from sim.tuning.evaluate import call_scores, run_specs, verdict_outcomes
    from sim.tuning.params import TuningError
    from sim.tuning.toml_out import overrides_toml
    from sim.tuning.tune import setting_text, tool_candidates, tune

    t0 = time.perf_counter()
    say = (lambda m="": None) if as_json else click.echo
    spec = one_spec(detector, config_path)
    eng = make_engine(engine, workers, ray_address)
    try:
        cands, fast = tool_candidates(detector_class(spec.spec))
    except TuningError as exc:
        raise LoopbenchError(str(exc)) from None
    s, fams, n, sd = _workload(suite, families, episodes, seed)
    hsd = sd + 1 if heldout_seed is None else heldout_seed
    if hsd == sd:
        raise LoopbenchError("--heldout-seed must differ from the tuning seed")
    delta = DELTA if delta is None else delta
    progress = not no_progress
    _, profiles = load_profiles()
    eps = _episodes(s, fams, n, sd, progress)
    log = lambda m: click.echo(f"  {m}", err=True)  # noqa: E731
    click.echo(f"tune {spec.label}: false-alarm budget {number_text(budget, pct=True)} on clean episodes; suite {s.name}, "
               f"{len(eps)} episodes, tuning seed {sd}, held-out seed {hsd}", err=True)
    click.echo(f"  candidates per tool: {'; '.join(f'{k} ∈ {list(v)}' for k, v in cands.items())}", err=True)
    try:
        res = tune(spec, eps, budget, delta=delta, engine=eng, tools=split_list(tools) or None,
                   keep_misses=keep_misses, progress=progress, log=log)
    except (TuningError, EngineError) as exc:
        raise LoopbenchError(str(exc)) from None
    how = ("from stored scores (" + ", ".join(k for k in fast) + " only move the threshold)") if res.fast else "by re-running the detector per candidate"
    say(f"search: {res.passes} pass(es), {res.open_runs} open-loop run(s); candidates evaluated {how}")
    for note in res.notes:
        say(f"note: {note}")

    tuned = DetectorSpec(spec.label, spec.spec, {**spec.params, "tool_overrides": res.tuned or None})
    default = DetectorSpec(spec.label, spec.spec, dict(spec.params))
    # The search's numbers came from stored scores where it could: re-run the tuned detector to confirm them.
    check = run_specs([DetectorSpec("check", tuned.spec, tuned.params)], eps, eng)["check"]
    units = units_by_id(eps)
    actual = verdict_outcomes(units, call_scores(check, eps), check.errors, delta)
    confirmed = [o.outcome for o in actual] == [o.outcome for o in res.tuned_eval.outcomes]
    if not confirmed:
        say("note: the re-run tuned detector scores differently from the search's estimate; "
                   "the held-out table below is from real runs")
    be, te = res.base_eval, res.tuned_eval
    say(f"tuning seed {sd}: false-alarm rate {number_text(be.far, pct=True)} → {number_text(te.far, pct=True)}, misses {be.counts['miss']} → "
               f"{te.counts['miss']}, early {be.counts['early']} → {te.counts['early']}"
               + ("" if res.met else f"  (budget {number_text(budget, pct=True)} NOT met: this is the lowest the search reached)"))
    say("\nRecommended per-tool overrides:" if res.changed else "\nNo per-tool override improves on the configured setting.")
    for tool, setting in res.changed.items():
        text = setting_text(setting) if setting else "(removed: the global setting)"
        say(f"  {tool}: {text}")

    held = _episodes(s, fams, n, hsd, progress)
    results = run_specs([DetectorSpec("default", default.spec, default.params), DetectorSpec("tuned", tuned.spec, tuned.params)],
                        held, eng)
    rows_d, _ = metric_rows("default", held, results["default"], delta, profiles)
    rows_t, _ = metric_rows("tuned", held, results["tuned"], delta, profiles)
    say(f"\nHeld-out seed {hsd} ({len(held)} episodes), default → tuned:\n")
    table = _family_table(rows_d, rows_t, set(loop_families()))
    say("\n".join(table))
    ad = next(r for r in rows_d if r["family"] == "all")
    at = next(r for r in rows_t if r["family"] == "all")
    header = [
        f"loopbench tune --detector {detector} --max-false-alarm-rate {budget:g} --suite {s.name}"
        + (f" --families {','.join(fams)}" if families else "") + (f" --episodes {n}" if episodes else "")
        + (" --keep-misses" if keep_misses else "")
        + f" --seed {sd} --heldout-seed {hsd}",
        f"held-out seed {hsd}, all families: false_alarm_rate {number_text(ad['false_alarm_rate'], pct=True)} -> "
        f"{number_text(at['false_alarm_rate'], pct=True)}, miss_rate {number_text(ad['miss_rate'], pct=True)} -> {number_text(at['miss_rate'], pct=True)}",
        f"use: loopbench run --detectors {spec.label} --config {Path(out).name}",
    ]
    base_params = {k: v for k, v in spec.build().get_params().items()}
    text = overrides_toml(spec.label, base_params, res.tuned, header)
    tomllib.loads(text)  # never write a file run --config cannot read
    atomic_write(out, text)
    say(f"\nwrote {out} ({time.perf_counter() - t0:.1f} s)")
    if as_json:
        click.echo(json.dumps({
            "detector": spec.label, "budget": budget, "met": res.met, "keep_misses": keep_misses,
            "overrides": res.tuned, "changed": res.changed, "passes": res.passes, "open_runs": res.open_runs,
            "fast": res.fast, "notes": res.notes, "estimate_confirmed": confirmed,
            "tuning": {"seed": sd, "episodes": len(eps),
                       "before": {"false_alarm_rate": be.far, "miss": be.counts["miss"], "early": be.counts["early"]},
                       "after": {"false_alarm_rate": te.far, "miss": te.counts["miss"], "early": te.counts["early"]}},
            "heldout": {"seed": hsd, "episodes": len(held), "default": rows_d, "tuned": rows_t},
            "out": str(out),
        }, indent=2, default=str))
