"""`loopbench adopt`: should a guard change be adopted? Base and candidate over the real and
synthetic suites, judged on the corpora the change was not derived from (sim.report.adoption).

Exit codes: 0 adopt, 1 not adopted (no gain where it was not derived from, or worse somewhere),
2 a usage or input error.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import click

from sim.cli.app import (EXIT_REGRESSION, EXIT_SIGINT, EXIT_SKIPPED, EXIT_SIGTERM, LoopbenchError, Terminated, detector_specs,
                         interruptible, load_config, main, named_suite, out_dir, split_list)

DEFAULT_SUITES = "real-dev,real-heldout-self,real-injected,default"
_SHOWN_WARNINGS = 10
#: What ``loopbench run`` prints on stderr about its progress, not to pass on.
_PROGRESS = re.compile(r"^(generated \d+ episodes|loaded \d+|ran \d+ detector tasks|wrote the run folder|"
                       r"resuming: |embedding cache .*: encoding this suite's texts)")


@main.command("adopt")
@click.option("--candidate", required=True, help="The changed detector: name, module:Class (its parameters: "
              "--param candidate.P=V or [detectors.candidate] in --config).")
@click.option("--base", default="progress_guard", show_default=True, help="The detector as it is (--param base.P=V).")
@click.option("--derived-from", "derived", required=True,
              help="Comma-separated real corpora whose traces the change was written from (captain_agent, "
                   "magentic_one, react_hotpotqa, tau_bench_airline), or 'none'. A gain there does not count.")
@click.option("--suites", default=DEFAULT_SUITES, show_default=True,
              help="Comma-separated suites (names or .toml paths) to run both on, in open loop.")
@click.option("--corpus", default=None, help="A local copy of the corpora, for the real suites' Who&When traces.")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters, tool registry).")
@click.option("--param", "params", multiple=True, help="base.PARAM=VALUE or candidate.PARAM=VALUE (repeatable).")
@click.option("--out", default=None, help="Folder for one run per suite and the comparison. [default: runs/adopt-TIMESTAMP]")
@click.option("--force", is_flag=True, help="Replace the run folders already in --out.")
@click.option("--resume", is_flag=True, help="Keep the runs already in --out (an interrupted comparison): each suite "
              "folder there is finished with loopbench run --resume, the same options required; the others run.")
@click.option("--tolerance", type=click.FloatRange(0), default=0.0, show_default=True,
              help="Points of score a family, corpus or suite may lose before it counts as worse.")
@click.option("--rounds", type=click.IntRange(1), default=1000, show_default=True, help="Bootstrap rounds.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--workers", type=click.IntRange(0), default=None, help="Worker processes per run. [default: the run's]")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON on stdout instead of the tables.")
def adopt_cmd(candidate, base, derived, suites, corpus, config_path, params, out, force, resume, tolerance, rounds,
              seed, workers, as_json) -> None:
    """Should a guard change be adopted? Run BASE and CANDIDATE over the suites and judge the change
    where it was not derived from: a gain on those corpora, nothing worse anywhere (scores, and
    successful runs stopped as configured). Prints every figure dev and held out side by side."""
    import json

    from sim.report.adoption import AdoptionError, check_derived, decide, verdict_json, write_adoption

    try:
        derived_from = check_derived(split_list(derived))
    except AdoptionError as exc:
        raise LoopbenchError(str(exc)) from None
    names = split_list(suites)
    if not names:
        raise LoopbenchError("--suites: give at least one suite")
    config = load_config(config_path)
    bad = [p for p in params if p.split(".", 1)[0] not in ("base", "candidate")]
    if bad:
        raise LoopbenchError(f"--param {bad[0]}: name base or candidate (e.g. candidate.patience=4)")
    # Refuse a bad spec or parameter now, not after the first suite has run.
    detector_specs([f"base={base}", f"candidate={candidate}"], config, params)
    if corpus is not None and not Path(corpus).is_dir():
        raise LoopbenchError(f"{corpus}: no such corpus directory")
    if resume and force:
        raise LoopbenchError("--resume keeps the runs in --out and --force replaces them: give one")
    if resume and not out:
        raise LoopbenchError("--resume needs --out, the folder of the interrupted comparison")
    real = {n: named_suite(n, "--suites: ").real for n in names}  # every suite checked before the first one runs
    root = out_dir(out, "adopt")
    if root.exists() and not root.is_dir():
        raise LoopbenchError(f"--out {root}: not a folder")
    folders = {n: root / (Path(n).stem if n.endswith(".toml") else n) for n in names}
    taken = [str(f) for f in folders.values() if f.is_dir() and any(f.iterdir())]
    if (root / "adoption.json").is_file():
        taken.insert(0, str(root))
    if taken and not (force or resume):
        raise LoopbenchError(f"{taken[0]} holds an earlier {'comparison' if taken[0] == str(root) else 'run'}: give "
                             "another --out, --resume to keep it, or --force to replace it")
    compared = {"base": base, "candidate": candidate, "parameters": list(params), "config": config_path or "none",
                "suites": names, "corpus": corpus or "none", "tolerance": tolerance}
    comparisons = []
    try:
        with interruptible():
            for name, folder in folders.items():
                keep = resume and str(folder) in taken
                comparisons.append(_compare(name, real[name], folder, base, candidate, config_path, params, corpus,
                                            workers, derived_from, rounds, seed, quiet=as_json, keep=keep))
    except KeyboardInterrupt as exc:
        done = ", ".join(c.suite for c in comparisons) or "none"
        click.echo(f"loopbench: interrupted; suites finished: {done} (their runs are in {root}); finish with the "
                   "same command and --resume", err=True)
        sys.exit(EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT)
    verdict = decide(comparisons, tolerance)
    text = write_adoption(root, comparisons, verdict, derived_from, compared)
    if as_json:
        click.echo(json.dumps(verdict_json(verdict, derived_from, compared), indent=2))
    else:
        click.echo(text, nl=False)
        click.echo(f"\nWritten: {root / 'adoption.md'}, adoption.csv, adoption_deploy.csv, adoption.json")
    if not verdict.adopted:
        sys.exit(EXIT_REGRESSION)


def _compare(name, real: bool, folder: Path, base, candidate, config_path, params, corpus, workers, derived_from,
             rounds, seed, quiet: bool, keep: bool = False):
    """Run one suite with both detectors (``loopbench run``, open loop; ``keep``: finish the run
    already in ``folder`` instead), then compare them. The run's warnings (labels it could not
    use, records it skipped) are passed on to stderr."""
    from sim.report.adoption import AdoptionError, compare_run

    cmd = [sys.executable, "-m", "sim.cli", "run", "--suite", name, "--mode", "open", "--out", str(folder),
           "--detectors", f"base={base},candidate={candidate}", "--no-report", "--no-progress",
           "--resume" if keep else "--force"]
    cmd += ["--corpus", corpus] if corpus is not None and real else []
    cmd += ["--config", config_path] if config_path else []
    cmd += [a for p in params for a in ("--param", p)]
    cmd += ["--workers", str(workers)] if workers is not None else []
    if not quiet:
        click.echo(f"{'finishing' if keep else 'running'} suite {name} -> {folder}", err=True)
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode in (EXIT_SIGINT, EXIT_SIGTERM):
        raise Terminated() if proc.returncode == EXIT_SIGTERM else KeyboardInterrupt()
    if proc.returncode and proc.returncode != EXIT_SKIPPED:
        last = next((ln for ln in reversed(proc.stderr.strip().splitlines()) if ln.strip()), f"exit {proc.returncode}")
        raise LoopbenchError(f"suite {name}: loopbench run failed: {last.removeprefix('loopbench: error: ')}")
    warnings = [ln for ln in proc.stderr.splitlines() if ln.strip() and not _PROGRESS.match(ln)]
    if warnings:
        more = f"\n  ... and {len(warnings) - _SHOWN_WARNINGS} more like these" if len(warnings) > _SHOWN_WARNINGS else ""
        click.echo(f"suite {name}: loopbench run said:\n" + "\n".join(f"  {ln}" for ln in warnings[:_SHOWN_WARNINGS])
                   + more, err=True)
    from sim.tuning.loco import rule_grids

    notes: list[str] = []
    try:
        return compare_run(folder, derived_from, rounds=rounds, seed=seed,
                           rule_grids=lambda data: rule_grids(data, set(), notes))
    except AdoptionError as exc:
        raise LoopbenchError(str(exc)) from None
