"""``loopbench tune --objective deploy``: the halt setting under a cap on successful runs stopped, as TOML."""
from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import click

from sim.cli.app import LoopbenchError, named_suite, split_list
from sim.numbers import number_text


def _episodes(suite, families, episodes, seed, progress, corpus=None):
    """The suite's episodes: loaded for a real suite (``corpus``: the local copy of the corpora
    not shipped), else generated as ``run`` does."""
    from scenarios.base import registered
    from scenarios.injected_suite import load_real_episodes
    from sim.execute.runner import build_scenarios, generate_episodes

    s = named_suite(suite)
    fams = split_list(families) or s.families
    known = s.families if s.real else registered()
    unknown = [f for f in fams if f not in known]
    if unknown:
        raise LoopbenchError(f"unknown families of suite {s.name!r}: {', '.join(unknown)} (see `loopbench list`)")
    sd = s.seed if seed is None else seed
    if corpus is not None and not s.real:
        raise LoopbenchError("--corpus is for real suites (e.g. --suite real-dev)")
    if corpus is not None and not Path(corpus).is_dir():
        raise LoopbenchError(f"{corpus}: no such corpus directory")
    if s.real:
        return s, sd, [ep for ep in load_real_episodes(s.name, corpus) if ep.family in fams]
    n = episodes or s.episodes
    return s, sd, generate_episodes(build_scenarios(fams, n, sd, s.family_params, s.family_weights), progress)


def _pct(v) -> str:
    return number_text(v, 1, True)


def oracle_ceiling(units, calls, outcomes, cap: float, delta: int) -> dict:
    """What the labels allow any guard under the cap: the label oracle's point (halting at each
    episode's k-th labelled redundant call) that saves the most failed-run calls while stopping at
    most ``cap`` of the successful runs, and its point at the onset (k = 1)."""
    from sim.scoring.deploy import oracle_curve

    pts = oracle_curve(units, calls, outcomes, delta)
    under = [p for p in pts if p["successes_stopped"] is not None and p["successes_stopped"] <= cap + 1e-9]
    best = max(under, key=lambda p: (p["failed_calls_saved"] or 0.0, p["runaway_caught"] or 0.0, -p["value"]),
               default=None)
    return {"within_cap": best, "at_onset": pts[0] if pts else None}


def ceiling_text(c: dict, cap: float) -> str:
    on, best = c["at_onset"], c["within_cap"]
    if on is None or on["successes_stopped"] is None:
        return "Label oracle: no run outcome known."
    text = (f"Label oracle (halts at each run's k-th labelled redundant call: what the labels allow any guard): "
            f"at the onset it stops {_pct(on['successes_stopped'])} of successful runs, saves "
            f"{_pct(on['failed_calls_saved'])} of failed-run calls, catches {_pct(on['runaway_caught'])} of runaway loops")
    if best is None:
        return text + f"; no k stops at most {_pct(cap)}."
    return text + (f"; within the cap (k = {best['value']}): saves {_pct(best['failed_calls_saved'])}, catches "
                   f"{_pct(best['runaway_caught'])} of runaway loops within Δ.")


def tune_deploy(spec, detector, cap, suite, families, episodes, seed, out, delta, engine, no_progress,
                as_json, corpus=None, per_tool=True, max_nudges=None, cv_rules=True) -> None:
    from scenarios.files import atomic_write
    from scenarios.injected_suite import is_injected, source_corpus
    from sim.config.provenance import unseen_specs
    from sim.execute.engines import EngineError
    from sim.execute.rows import CALL_COLUMNS, open_rows
    from sim.report.crossval import injected_by_corpus
    from sim.scoring.deploy import run_outcomes
    from sim.scoring.outcomes import DELTA, load_profiles
    from sim.tuning.deploy_tune import check_detector, frames, held_out_verdict, loco, pick, setting_text
    from sim.tuning.evaluate import run_specs
    from sim.tuning.params import TuningError
    from sim.tuning.toml_out import overrides_toml

    t0 = time.perf_counter()
    say = (lambda m="": None) if as_json else click.echo
    det = spec.build()
    try:
        param = check_detector(det)
    except TuningError as exc:
        raise LoopbenchError(str(exc)) from None
    delta = DELTA if delta is None else delta
    s, sd, eps = _episodes(suite, families, episodes, seed, not no_progress, corpus)
    click.echo(f"tune {spec.label} for deployment: halts may stop at most {_pct(cap)} of successful runs; suite {s.name}, "
               f"{len(eps)} episodes", err=True)
    try:
        res = run_specs([spec], eps, engine, not no_progress)[spec.label]
    except EngineError as exc:
        raise LoopbenchError(str(exc)) from None
    _, profiles = load_profiles()
    _, outcome_rows, lines = open_rows(spec.label, res, eps, delta, profiles)
    units, calls = frames(lines, outcome_rows, CALL_COLUMNS)
    outcomes = run_outcomes(units).by_episode
    try:
        p = pick(det, units, calls, outcomes, cap, delta=delta, per_tool=per_tool, max_nudges=max_nudges)
    except TuningError as exc:
        raise LoopbenchError(f"suite {s.name}: {exc}") from None
    ceiling = oracle_ceiling(units, calls, outcomes, cap, delta)
    # Leave one corpus out: real-injected's families are injection kinds, its corpora the id's prefix.
    injected = is_injected(s.name)

    def by_corpus(u, c):
        return (injected_by_corpus(u), injected_by_corpus(c)) if injected else (u, c)

    cu, cc = by_corpus(units, calls)
    corpora = sorted(set(cu["family"].astype(str)))
    cv = []
    if s.real and len(corpora) >= 2:
        # Each held-out corpus scored by the guard without the rules written from it (unless --no-cv-rules).
        unseen = {}
        for c, variant in (unseen_specs(spec, corpora, det) if cv_rules else {}).items():
            if variant is None:
                continue
            mine = [ep for ep in eps if (source_corpus(ep.id) if injected else ep.family) == c]
            vres = run_specs([variant], mine, engine, False)[variant.label]
            _, v_rows, v_lines = open_rows(variant.label, vres, mine, delta, profiles)
            unseen[c] = by_corpus(*frames(v_lines, v_rows, CALL_COLUMNS))
        cv = loco(det, cu, cc, outcomes, cap, delta=delta, per_tool=per_tool, max_nudges=max_nudges, unseen=unseen)

    nparam = p.nudge_param
    text = lambda st: setting_text(param, st, nparam)  # noqa: E731
    say(f"values tried: {param}{' and ' + nparam if nparam and max_nudges is not None else ''} ∈ {p.candidates}; "
        "search: " + "; ".join(p.log))
    say(f"\nRecommended: {text(p.picked)}"
        + ("" if p.met else f"  (cap {_pct(cap)} NOT met: the fewest successful runs any setting stops)")
        + ("" if p.nudges_met else f"  (nudge budget {number_text(max_nudges, 2)} per 100 clean calls NOT met)"))
    if max_nudges is None:
        say("Nudge: every finding below the halt nudges (no --max-nudges: a nudge costs a sentence, not the run).\n")
    else:
        say(f"Nudge: the earliest {nparam} within {number_text(max_nudges, 2)} nudges per 100 clean calls that nudges "
            "the most loops; findings before it pass silently.\n")
    head = ["setting", "successes stopped", "failed-run calls saved", "runaway caught", "failures stopped",
            "loops caught", "blips nudged", "runaway nudged", "nudges / 100 clean calls"]
    say("| " + " | ".join(head) + " |")
    say("|" + "---|" * len(head))
    for name, st in (("configured: " + text(p.configured), p.configured), ("recommended: " + text(p.picked), p.picked)):
        f = st.figures
        ss, sn = st.counts("succ_stopped", "succ")
        say(f"| {name} | {_pct(f['successes_stopped'])} ({ss}/{sn}) | {_pct(f['failed_calls_saved'])} | "
            f"{_pct(f['runaway_caught'])} | {_pct(f['failures_stopped'])} | {_pct(f['loops_caught'])} | "
            f"{_pct(f['blips_nudged'])} | {_pct(f['runaway_nudged'])} | {number_text(f['nudges_per_100_clean'], 2)} |")
    say("\n" + ceiling_text(ceiling, cap))
    if cv:
        say("\nLeave one corpus out (picked on the other corpora, scored on the held-out one"
            + (", by the guard without the rules written from it" if any(r.get("held_out_as", "").startswith("without")
                                                                       for r in cv) else "") + "):\n")
        say("| held-out corpus | setting picked on the others | its per-tool overrides that apply | successes stopped | "
            "failed-run calls saved | runaway caught | blips nudged | nudges / 100 clean calls |")
        say("|---|---|---|---|---|---|---|---|")
        for r in cv:
            if r["note"]:
                say(f"| {r['corpus']} | {r['note']} | | | | | | |")
                continue
            name = r["corpus"] + (f" ({r['held_out_as']})" if r.get("held_out_as", "").startswith("without") else "")
            say(f"| {name} | {r['setting']} | {r['overrides_applied']} | {_pct(r['successes_stopped'])} ({r['successes']}) | "
                f"{_pct(r['failed_calls_saved'])} ({r['failed_calls']}) | {_pct(r['runaway_caught'])} ({r['runaway']}) | "
                f"{_pct(r['blips_nudged'])} | {number_text(r['nudges_per_100_clean'], 2)} |")
        verdict = held_out_verdict(cv, cap)
        if verdict:
            say("\n" + verdict)

    overrides = p.overrides(det.get_params().get("tool_overrides"))
    f = p.picked.figures
    header = [
        f"loopbench tune --objective deploy --detector {detector} --max-stopped {cap:g} --suite {s.name}"
        + (f" --families {families}" if families else "") + (f" --episodes {episodes}" if episodes else "")
        + (f" --seed {sd}" if not s.real else "") + ("" if per_tool else " --global-only")
        + (" --corpus CORPUS" if corpus else "")
        + (f" --max-nudges {max_nudges:g}" if max_nudges is not None else ""),
        f"halt ({param}): successes stopped {_pct(f['successes_stopped'])}, failed-run calls saved "
        f"{_pct(f['failed_calls_saved'])}, runaway loops caught {_pct(f['runaway_caught'])} (in sample"
        + ("" if p.met else f"; cap {_pct(cap)} NOT met") + ")",
        (f"nudge ({nparam}): " if nparam else "nudge: ") + f"blips nudged {_pct(f['blips_nudged'])}, runaway loops nudged "
        f"{_pct(f['runaway_nudged'])}, {number_text(f['nudges_per_100_clean'], 2)} nudges per 100 clean calls"
        + ("" if p.nudges_met else "; budget NOT met"),
        f"use: loopbench run --detectors {spec.label} --config {Path(out).name}, or adapters.core.guard_factory"
        f"({spec.spec!r}, config=...)",
    ]
    base = {k: v for k, v in det.get_params().items()}
    base[param] = p.picked.value
    if nparam:
        base[nparam] = p.picked.nudge_value
    text = overrides_toml(spec.label, base, overrides, header)
    tomllib.loads(text)  # never write a file run --config cannot read
    atomic_write(out, text)
    say(f"\nwrote {out} ({time.perf_counter() - t0:.1f} s)")
    if as_json:
        click.echo(json.dumps({
            "detector": spec.label, "objective": "deploy", "max_stopped": cap, "met": p.met, "param": param,
            "value": p.picked.value, "tools": p.picked.tools, "candidates": p.candidates,
            "nudge_param": nparam, "max_nudges": max_nudges, "nudges_met": p.nudges_met,
            "nudge_value": p.picked.nudge_value, "nudge_tools": p.picked.nudge_tools,
            "recommended": p.picked.figures, "configured": {"value": p.configured.value, **p.configured.figures},
            "loco": cv, "held_out_verdict": held_out_verdict(cv, cap) if cv else "", "label_oracle": ceiling, "episodes": len(eps), "suite": s.name, "out": str(out),
        }, indent=2, default=str))
