"""`loopbench run`: generate a suite, run the detectors, write the run folder, then its report."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sim.cli.app import (EXIT_SIGINT, EXIT_SIGTERM, LoopbenchError, Terminated, check_timeout_value, default_detectors,
                         detector_specs, engine_options, interruptible, load_config, main, make_engine, named_suite,
                         out_dir, resume_command, set_embed_cache, split_list, with_suite_params)


@main.command("run")
@click.option("--suite", default=None, help="Suite name (quick, default, full, ci; real-dev: labelled real traces; real-heldout-self: the held-out half labelled here) or a .toml path. [default: default]")
@click.option("--detectors", "detectors_opt", default=None, help="Comma-separated: name, module:Class or label=spec. [default: all registered]")
@click.option("--families", default=None, help="Comma-separated scenario families. [default: the suite's]")
@click.option("--seed", type=int, default=None, help="Suite seed. [default: the suite's]")
@click.option("--episodes", type=click.IntRange(1), default=None, help="Episodes per family. [default: the suite's]")
@click.option("--mode", type=click.Choice(["open", "closed", "both"]), default=None, help="Open loop, closed loop or both. [default: the suite's: both for quick and default, open for full and ci]")
@click.option("--harness", type=click.Choice(["builtin", "pydantic-ai", "openai-agents", "langchain"]), default=None,
              help="Where closed loop is played: the built-in harness, or a framework's real agent loop with the guard "
              "installed through its adapter (linear scenarios only; needs loopbench[frameworks]). [default: builtin]")
@click.option("--out", default=None, help="Run folder. [default: runs/SUITE-TIMESTAMP]")
@click.option("--config", "config_path", default=None, help="TOML configuration (detector parameters, tool registry).")
@click.option("--param", "params", multiple=True, help="DETECTOR.PARAM=VALUE, e.g. exact.max_repeats_per_signature=2 (repeatable).")
@click.option("--delta", type=click.IntRange(0), default=None, help="Detection window Δ in calls. [default: 5]")
@engine_options
@click.option("--embed-cache", default=None, help="Directory for the embedding cache, or 'off'. [default: ~/.cache/loopbench/embeddings]")
@click.option("--check-timeout", type=click.FloatRange(0), default=None, help="CPU seconds a detector call may use before its episode fails (one blocked without computing: after the limit plus 60 s); 0 = no limit. [default: 5]")
@click.option("--resume", is_flag=True, help="Finish an interrupted run in --out: same options, only the missing detector tasks (or only the report) run.")
@click.option("--force", is_flag=True, help="Empty --out first when it holds an earlier run (without it, a non-empty --out is refused).")
@click.option("--corpus", default=None, help="With a real suite: a local copy of the corpora, for the traces that "
              "are not shipped with loopbench (Who&When: Magentic-One, CaptainAgent).")
@click.option("--labels", "labels_path", default=None, help="With a hand-labelled real suite (real-dev, real-heldout-self) "
              "and --corpus: score against this labels file (the schema of the corpora's dev.json: a held-out half, or "
              "your own labels) instead of the suite's shipped labels; every labelled trace is converted from --corpus.")
@click.option("--no-report", is_flag=True, help="Write the run folder and its scoreboard only: no plots, intervals, "
              "threshold sweeps or HTML (about a quarter of a warm default run); `loopbench report RUN` writes them later.")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
def run_cmd(suite, detectors_opt, families, seed, episodes, mode, harness, out, config_path, params, delta, workers, engine,
            ray_address, embed_cache, check_timeout, resume, force, no_report, no_progress, as_json, corpus,
            labels_path) -> None:
    """Generate a suite's labelled scenarios, run every detector over them, write a scoreboard."""
    from scenarios.base import registered

    from sim.config.spec import RunConfig
    from sim.scoring.outcomes import DELTA

    config = load_config(config_path)
    rc = config.get("run", {})
    if resume and not (out or rc.get("out")):
        raise LoopbenchError("--resume needs --out RUN, the folder of the interrupted run")
    if resume and force:
        raise LoopbenchError("--resume keeps the folder's finished work and --force empties it: give one")
    s = named_suite(suite or rc.get("suite", "default"))
    fams = split_list(families) or list(rc.get("families", [])) or s.families
    known = s.families if s.real else registered()
    unknown = [f for f in fams if f not in known]
    if unknown:
        what = f"families of suite {s.name!r} (its corpora: {', '.join(s.families)})" if s.real else "scenario families"
        raise LoopbenchError(f"unknown {what}: {', '.join(unknown)} (see `loopbench list`)")
    run_mode = mode or rc.get("mode", s.mode)
    if s.real and run_mode != "open":
        raise LoopbenchError(f"suite {s.name!r} is recorded real traces: it runs in open loop only (--mode open)")
    harness = harness or rc.get("harness", "builtin")
    check_harness(harness, run_mode)
    corpus = corpus or rc.get("corpus")
    if corpus is not None and not s.real:
        raise LoopbenchError("--corpus is for real suites (e.g. --suite real-dev)")
    if corpus is not None and not Path(corpus).is_dir():
        raise LoopbenchError(f"{corpus}: no such corpus directory")
    labels_path = labels_path or rc.get("labels")
    if labels_path is not None:
        check_labels_option(s, labels_path, corpus)
    names = split_list(detectors_opt) or list(rc.get("detectors", [])) or s.detectors or default_detectors()
    specs = detector_specs(names, with_suite_params(config, s, names), params)
    eng = make_engine(engine, workers, ray_address)
    cfg = RunConfig(
        suite=s, detectors=specs, families=fams,
        episodes=episodes or int(rc.get("episodes", s.episodes)),
        seed=seed if seed is not None else int(rc.get("seed", s.seed)),
        mode=run_mode, corpus_dir=str(corpus) if corpus else None, labels_path=labels_path, delta=delta if delta is not None else int(rc.get("delta", DELTA)),
        out=out_dir(out or rc.get("out"), s.name), progress=not no_progress and not as_json, engine=eng,
        check_timeout=check_timeout_value(check_timeout if check_timeout is not None else rc.get("check_timeout")), resume=resume,
        harness=harness,
    )
    set_embed_cache(embed_cache)
    log = (lambda m: None) if as_json else (lambda m: click.echo(m, err=True))
    from sim.config.runfolder import RunFolderError, prepare_folder
    from sim.execute.checkpoint import ResumeError
    from sim.execute.engines import EngineError
    from sim.execute.runner import finished_run, run, summary_of
    from sim.play.frameworks import Unsupported

    phase = "run"
    try:
        if resume:
            done = finished_run(cfg.out, cfg.config_hash())  # ResumeError for another configuration
        else:
            done = False
            prepare_folder(cfg.out, force=force)
        with interruptible():
            if done:
                log(f"{cfg.out}: the run's result files are complete; writing its scoreboard and report")
                summary = summary_of(cfg.out)
            else:
                summary = run(cfg, log=log)
            phase = "report"
            reported = write_report_steps(Path(summary["out"]), log, report=not no_report)
    except (ResumeError, EngineError, RunFolderError, Unsupported) as exc:
        raise LoopbenchError(str(exc)) from None
    except KeyboardInterrupt as exc:
        kept = (f"finished detector tasks are kept in {cfg.out}/.parts" if phase == "run" else
                f"the result files in {cfg.out} are complete, the scoreboard and report are not")
        click.echo(f"loopbench: interrupted; {kept}; resume with: {resume_command(cfg.out)}", err=True)
        sys.exit(EXIT_SIGTERM if isinstance(exc, Terminated) else EXIT_SIGINT)
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        click.echo((Path(summary["out"]) / "scoreboard.md").read_text())
        if reported and reported.get("cv") is not None:  # a run over corpora: dev beside held out
            from sim.report.crossval import cv_text
            from sim.report.cv_deploy import cv_deploy_text, shown_detectors

            click.echo(cv_text(reported["cv"]))
            if reported.get("cv_deploy"):
                click.echo(cv_deploy_text(reported["cv_deploy"], shown_detectors(reported["cv"])))
        click.echo(f"Run folder: {summary['out']} ({summary['wall_seconds']} s)")


def check_labels_option(suite, labels_path: str, corpus: str | None) -> None:
    """``--labels``: for a hand-labelled real suite with its corpora (it replaces the suite's
    labels), and a labels file loading can use (checked before any work, the first unusable
    field named)."""
    from scenarios.injected_suite import is_injected
    from scenarios.realsuite import SUITES, RealSuiteError, load_labels

    if not suite.real or is_injected(suite.name):
        raise LoopbenchError(f"--labels is for --suite {' or '.join(SUITES)}, whose labels it replaces "
                             f"(suite {suite.name!r} has labels of its own making)")
    if corpus is None:
        raise LoopbenchError("--labels needs --corpus DIR: every labelled trace is converted from the corpora")
    try:
        load_labels(suite.name, labels_path)
    except RealSuiteError as exc:
        raise LoopbenchError(str(exc)) from None


def check_harness(harness: str, mode: str) -> None:
    """A framework harness is for closed loop, and needs its framework installed."""
    from sim.play.frameworks import HARNESSES, missing_framework

    if harness not in HARNESSES:
        raise LoopbenchError(f"unknown harness {harness!r} (known: {', '.join(HARNESSES)})")
    if harness != "builtin" and mode == "open":
        raise LoopbenchError(f"--harness {harness} plays closed loop: use --mode closed or both")
    missing = missing_framework(harness)
    if missing:
        raise LoopbenchError(f"--harness {harness} needs {missing}: pip install 'loopbench[frameworks]'")


def write_report_steps(out: Path, log, report: bool = True) -> dict | None:
    """The scoreboard, then (with ``report``) the full report (plots, intervals, HTML; on real
    traces with two or more corpora, leave-one-corpus-out beside dev) of a finished run folder;
    the report's summary. Report trouble is logged, never fatal: the result files are already written."""
    import time

    from sim.report.scoreboard import write_scoreboard

    write_scoreboard(out)
    if not report:
        return None
    from sim.report.full import write_report
    from sim.tuning.loco import rule_grids

    t0 = time.perf_counter()
    try:
        result = write_report([out], out, log=log, cv="auto", rule_grids=rule_grids)
    except Exception as exc:  # noqa: BLE001 — plotting or analysis trouble must not fail the run
        log(f"report not written: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return None
    log(f"report: {time.perf_counter() - t0:.1f} s")
    return result
