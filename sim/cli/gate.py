"""The gate's commands: ``loopbench check`` (compare with a baseline) and ``loopbench baseline update``.

Exit codes of ``check``: 0 no regression, 1 a regression, 2 a usage or input error.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from sim.cli.app import (EXIT_REGRESSION, LoopbenchError, split_list, detector_specs, load_config, main, named_suite,
                         with_suite_params)


def _evaluate(suite, specs, progress: bool):
    from sim.gate.regression import evaluate
    from sim.play.openloop import DetectorFailure

    try:
        return evaluate(suite, specs, progress=progress)
    except DetectorFailure as exc:  # pragma: no cover - evaluate_open scores failures, this is a safety net
        raise LoopbenchError(str(exc)) from None


@main.command("check")
@click.option("--baseline", "baseline_path", required=True, help="Baseline folder (or its manifest.json).")
@click.option("--detectors", "detectors_opt", default=None,
              help="Comma-separated: name, module:Class or label=spec; each label must be in the baseline. [default: the baseline's]")
@click.option("--suite", default=None, help="Suite name or .toml path. [default: the baseline's]")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters, tool registry).")
@click.option("--param", "params", multiple=True, help="DETECTOR.PARAM=VALUE (repeatable).")
@click.option("--junit", "junit_path", default=None, help="Write JUnit XML here (one testcase per detector and metric).")
@click.option("--timing-tolerance", type=click.FloatRange(1.0), default=None,
              help="Fail when p50 time per check grows beyond this factor. [default: 3, loose: CI machines vary]")
@click.option("--no-timing", is_flag=True, help="Do not compare time per check.")
@click.option("--out", default=None, help="Also write the current numbers as a baseline folder here (to inspect or adopt).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def check_cmd(baseline_path, detectors_opt, suite, config_path, params, junit_path, timing_tolerance, no_timing, out,
              no_progress) -> None:
    """Fail (exit 1) when a detector got worse than the committed baseline beyond its tolerance."""
    from sim.gate.regression import (TIMING_FACTOR, GateError, baseline_specs, check_compatible, compare, diff_table,
                                     HELD_OUT, heldout_label, read_baseline, write_baseline, write_junit)

    t0 = time.perf_counter()
    try:
        base = read_baseline(baseline_path)
    except GateError as exc:
        raise LoopbenchError(str(exc)) from None
    s = named_suite(suite or base.manifest["suite"]["name"])
    try:
        check_compatible(base, s)
    except GateError as exc:
        raise LoopbenchError(str(exc)) from None
    config = load_config(config_path)
    recorded = {d.label: d for d in baseline_specs(base)}
    names = split_list(detectors_opt)
    if names:
        labels = [n.partition("=")[0] for n in names]
        missing = [lab for lab in labels if lab not in recorded]
        if missing:
            raise LoopbenchError(f"no baseline for detector(s) {', '.join(missing)} (the baseline has: "
                                 f"{', '.join(recorded)}); use label=spec to compare a new detector with a baseline one")
    else:
        names = [f"{d.label}={d.spec}" for d in recorded.values()]
        labels = list(recorded)
    # The baseline's parameters apply to a detector built from the same spec, under --config and --param.
    per = {lab: dict(recorded[lab].params) for lab, n in zip(labels, names)
           if (n.partition("=")[2] or n) == recorded[lab].spec}
    for lab, p in (config.get("detectors") or {}).items():
        per.setdefault(lab, {}).update(p)
    specs = detector_specs(names, {**config, "detectors": per}, params)
    # On a real suite a detector that declares where its rules came from has held-out rows too.
    labels += [heldout_label(lab) for lab in labels if base.units(heldout_label(lab))]
    current = _evaluate(s, specs, progress=not no_progress)
    lost = [lab for lab in labels if lab.endswith(HELD_OUT) and not current.units(lab)]
    if lost:
        raise LoopbenchError(f"the baseline gates {', '.join(lost)}, but the detector checked now declares no corpora its "
                             "rules were written from (derived_from), so it cannot be held out; update the baseline")
    try:
        check_compatible(base, s, current.manifest["episodes_fingerprint"])
        comparison = compare(base, current, labels,
                             timing_factor=None if no_timing else (timing_tolerance or TIMING_FACTOR))
    except GateError as exc:
        raise LoopbenchError(str(exc)) from None
    if out:
        write_baseline(current, Path(out))
    seconds = time.perf_counter() - t0
    if junit_path:
        write_junit(junit_path, comparison, seconds)
    click.echo(diff_table(comparison))
    bad = comparison.regressions
    if bad:
        detectors = sorted({r.detector for r in bad})
        click.echo(f"\nREGRESSION: {len(bad)} metric(s) of {', '.join(detectors)} got worse beyond tolerance "
                   f"(suite {s.name}, {seconds:.1f} s)")
        sys.exit(EXIT_REGRESSION)
    click.echo(f"\nno regression: {len(labels)} detector(s) on suite {s.name} ({seconds:.1f} s)")


@main.group("baseline")
def baseline_group() -> None:
    """Write the regression gate's baseline deliberately."""


@baseline_group.command("update")
@click.option("--out", default="results/baseline", show_default=True, help="Baseline folder to write.")
@click.option("--detectors", "detectors_opt", default=None,
              help="Comma-separated: name, module:Class or label=spec. [default: the suite's list, else all registered]")
@click.option("--suite", default="ci", show_default=True, help="Suite name or .toml path.")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters, tool registry).")
@click.option("--param", "params", multiple=True, help="DETECTOR.PARAM=VALUE (repeatable).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
def baseline_update_cmd(out, detectors_opt, suite, config_path, params, no_progress) -> None:
    """Score the detectors on the gate's suite and write the baseline folder (commit it)."""
    from detectors.registry import available

    from sim.gate.regression import write_baseline

    t0 = time.perf_counter()
    s = named_suite(suite)
    config = load_config(config_path)
    names = split_list(detectors_opt) or s.detectors or available()
    specs = detector_specs(names, with_suite_params(config, s, names), params)
    data = _evaluate(s, specs, progress=not no_progress)
    write_baseline(data, Path(out))
    click.echo(f"baseline of {len(specs)} detector(s) on suite {s.name} written to {out} ({time.perf_counter() - t0:.1f} s)")
