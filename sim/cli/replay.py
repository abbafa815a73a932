"""`loopbench replay`: detectors over recorded traces."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sim.cli.app import (EXIT_SKIPPED, LoopbenchError, check_timeout_value, default_detectors, detector_specs, load_config,
                         main, out_dir, report_problems, split_list)


@main.command("replay")
@click.argument("files", nargs=-1, required=True)
@click.option("--detectors", "detectors_opt", default=None, help="Comma-separated detectors. [default: all registered]")
@click.option("--format", "fmt", default="trace", help="Input format: trace (loopbench JSON Lines, docs/traces.md) or an importer's name.")
@click.option("--out", default=None, help="Run folder. [default: runs/replay-TIMESTAMP]")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters).")
@click.option("--param", "params", multiple=True, help="DETECTOR.PARAM=VALUE (repeatable).")
@click.option("--delta", type=click.IntRange(0), default=None, help="Detection window Δ in calls. [default: 5]")
@click.option("--check-timeout", type=click.FloatRange(0), default=None, help="CPU seconds a detector call may use before its episode fails (one blocked without computing: after the limit plus 60 s); 0 = no limit. [default: 5]")
@click.option("--labels", "labels_path", default=None,
              help="A labels file (from `loopbench label --review`'s export): its labels are applied to the traces "
                   "they match by call-list hash, which makes them scoreable.")
@click.option("--outcomes", "outcomes_path", default=None,
              help="SWE-bench evaluation report.json files (one, or a folder searched for them) or a run's summary "
                   "(resolved_ids / unresolved_ids, as the harness and sb-cli write it): each run whose "
                   "format records no outcome takes its instance's `resolved` (docs/traces.md).")
@click.option("--force", is_flag=True, help="Empty --out first when it holds an earlier run (without it, a non-empty --out is refused).")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
def replay_cmd(files, detectors_opt, fmt, out, config_path, params, delta, check_timeout, labels_path, outcomes_path,
               force, no_progress, as_json) -> None:
    """Run detectors over recorded traces and report where each would have fired."""
    from sim.config.runfolder import RunFolderError, prepare_folder
    from sim.execute.replay import load_traces, replay
    from sim.report.scoreboard import write_scoreboard
    from sim.scoring.outcomes import DELTA
    from scenarios.trace import TraceError

    config = load_config(config_path)
    specs = detector_specs(split_list(detectors_opt) or default_detectors(), config, params)
    if fmt != "trace":
        try:
            from scenarios.importers import FORMATS
        except ImportError:
            FORMATS = {}
        if fmt not in FORMATS:
            raise LoopbenchError(f"unknown --format {fmt!r} (known: trace{''.join(', ' + f for f in sorted(FORMATS))})")
    paths = [Path(f) for f in files]
    try:
        episodes, problems, warnings = load_traces(paths, fmt)
    except (TraceError, OSError) as exc:
        raise LoopbenchError(str(exc)) from None
    if not episodes and len(problems) == 1:
        raise LoopbenchError(problems[0])  # e.g. the one file given is empty: one line says it
    report_problems(problems)
    for w in warnings[:20]:
        click.echo(f"loopbench: warning: {w}", err=True)
    if not episodes:
        raise LoopbenchError(f"no usable episodes in {', '.join(files)} ({len(problems)} records skipped)")
    if labels_path is not None:
        problems += apply_labels(episodes, labels_path)
    if outcomes_path is not None:
        apply_outcomes(episodes, outcomes_path)
    folder = out_dir(out, "replay")
    if folder.exists() and any(folder.resolve() in p.resolve().parents for p in paths):
        raise LoopbenchError(f"--out {folder} holds the traces to replay; write the replay to another folder")
    try:
        prepare_folder(folder, force=force)
    except RunFolderError as exc:
        raise LoopbenchError(str(exc)) from None
    summary = replay(episodes, specs, folder, [str(p) for p in paths],
                     delta if delta is not None else DELTA, progress=not no_progress and not as_json,
                     check_timeout=check_timeout_value(check_timeout),
                     keep_trace=fmt != "trace" or labels_path is not None or outcomes_path is not None)
    summary["skipped_records"] = len(problems)
    write_scoreboard(Path(summary["out"]))
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        click.echo((Path(summary["out"]) / "scoreboard.md").read_text())
        for r in summary["fires"]:
            if r["family"] == "all":
                click.echo(f"{r['detector']:16s} fires on {r['fired']}/{r['traces']} traces")
        click.echo(f"Run folder: {summary['out']}")
    if problems:
        sys.exit(EXIT_SKIPPED)


def apply_outcomes(episodes, outcomes_path: str) -> None:
    """Grade the runs by an evaluation's reports (``scenarios.importers.graded``); says how many."""
    from scenarios.importers.graded import ReportError, grade, read_reports
    from scenarios.trace import TraceError

    try:
        resolved = read_reports(outcomes_path)
    except (ReportError, TraceError, OSError) as exc:
        raise LoopbenchError(str(exc).splitlines()[0]) from None
    graded = grade(episodes, resolved)
    click.echo(f"loopbench: {graded} of {len(episodes)} runs graded by {len(resolved)} reports in {outcomes_path}",
               err=True)


def apply_labels(episodes, labels_path: str) -> list[str]:
    """Put a labels file's decisions on the episodes they match (by call-list hash); the lines
    of entries that could not be used."""
    from scenarios.label_files import LabelsError, apply_decision, read_labels
    from scenarios.labeling import calls_sha1

    try:
        entries, problems = read_labels(labels_path)
    except LabelsError as exc:
        raise LoopbenchError(str(exc)) from None
    # Two traces with the same calls (one run in two collections) have an entry each: the
    # entry named after an episode goes to it, the others in file order.
    by_sha: dict[str, list[dict]] = {}
    for e in entries:
        by_sha.setdefault(e["calls_sha1"], []).append(e)
    used = 0
    for ep in episodes:
        waiting = by_sha.get(calls_sha1(ep))
        entry = None
        if waiting:
            entry = next((e for e in waiting if e.get("episode") == ep.id), waiting[0])
            waiting.remove(entry)
        if entry is not None:
            problem = apply_decision(ep, entry)
            if problem:
                problems.append(f"{labels_path}: {problem}")
            else:
                used += 1
    problems += [f"{labels_path}: entry for episode {e.get('episode')!r} matches no trace given; not used"
                 for waiting in by_sha.values() for e in waiting]
    click.echo(f"loopbench: applied {used} of {len(entries)} labels from {labels_path}", err=True)
    return problems
