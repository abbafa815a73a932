"""``loopbench report``: the Markdown/HTML report, intervals and threshold views of run folders."""
from __future__ import annotations

import json

import click

from sim.cli.app import LoopbenchError, main


@main.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(file_okay=False))
@click.option("--out", default=None, help="Where to write the report. [default: the (first) run folder]")
@click.option("--rounds", type=click.IntRange(10), default=1000, show_default=True, help="Bootstrap rounds.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed (the report is deterministic given it).")
@click.option("--transfer", "transfer_run", default=None, type=click.Path(file_okay=False),
              help="A run on real traces (e.g. --suite real-dev): compare its ranking with the first run's.")
@click.option("--cv", "cv", type=click.Choice(["auto", "corpus", "none"]), default="auto", show_default=True,
              help="Leave-one-corpus-out (cv.csv, cv_deploy.csv and a report section): 'corpus' requires a run over "
                   "real traces with two or more corpora, 'auto' adds it whenever the run has them, 'none' leaves it out.")
@click.option("--cv-param", "cv_params", multiple=True,
              help="With --cv corpus: DETECTOR.PARAM=V1,V2,... also chosen per fold, each value re-simulated over the "
                   "run's episodes (repeatable; several for one detector make a grid).")
@click.option("--cv-rules/--no-cv-rules", default=True, show_default=True,
              help="Leave-one-corpus-out (--cv corpus, and the real side of --transfer) also holds out the rules a "
                   "detector declares were written from each corpus: each held-out corpus is scored without them.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary on stdout.")
def report_cmd(run_dirs, out, rounds, seed, transfer_run, cv, cv_params, cv_rules, as_json) -> None:
    """Write report.md, report.html, plots/ and the interval, paired, threshold and Δ tables.

    Several RUN_DIRs (for example the same suite at several seeds) are pooled: their
    episodes count as more episodes of each family. With --transfer REAL_RUN the report shows
    how far the synthetic ranking holds on real traces (Kendall τ, top picks, per-detector deltas).
    With --cv corpus (a run on real traces, one family per corpus) every detector's threshold is
    chosen on the other corpora and scored on each held-out one (cv.csv, a section, a table);
    a detector that declares which corpora its rules were written from (progress_guard) is
    scored on each held-out corpus without those rules (--no-cv-rules keeps them in).
    """
    from sim.config.runfolder import RunFolderError
    from sim.report.crossval import CrossValError, cv_text
    from sim.tuning.params import TuningError

    if cv_params and (cv == "none" or len(run_dirs) > 1):
        raise LoopbenchError("--cv-param needs leave-one-corpus-out (not --cv none) and one run folder")
    if cv_params:
        cv = "corpus"  # a grid to choose per fold needs the folds: a run that has none is an error
    cv = None if cv == "none" else cv

    def grids(data):
        from sim.tuning.loco import cv_grids, parse_cv_params

        from sim.report.crossval import check_run

        return cv_grids(data.dirs[0], data.specs, parse_cv_params(cv_params, data.specs), data.delta,
                        corpora=check_run(data) if cv_rules else None)
    from sim.report.full import write_report
    from sim.tuning.loco import rule_grids

    if len(run_dirs) > 1 and out is None:
        raise LoopbenchError("pooling several run folders needs --out DIR for the report")
    try:
        summary = write_report(run_dirs, out, rounds=rounds, seed=seed, transfer_run=transfer_run,
                               log=lambda m: click.echo(f"loopbench: {m}", err=True), cv=cv,
                               cv_grids=grids if cv_params else None, rule_grids=rule_grids if cv_rules else None)
    except (FileNotFoundError, RunFolderError, CrossValError, TuningError) as exc:
        raise LoopbenchError(str(exc)) from None
    crossval = summary.pop("cv", None)
    if crossval is not None:
        summary["cv"] = crossval.rows
    if as_json:
        click.echo(json.dumps(summary, indent=2, default=str))
    else:
        for n in summary["notes"]:
            click.echo(f"loopbench: note: {n}", err=True)
        if "transfer" in summary:
            from sim.report.transfer import heldout_text, summary_text

            click.echo(summary_text(summary["transfer"]))
            if summary["transfer"].get("heldout"):
                click.echo(heldout_text(summary["transfer"]["heldout"]))
        if crossval is not None:
            click.echo(cv_text(crossval))
            if summary.get("cv_deploy"):
                from sim.report.cv_deploy import cv_deploy_text, shown_detectors

                click.echo(cv_deploy_text(summary["cv_deploy"], shown_detectors(crossval)))
        click.echo(f"Report: {summary['out']}/report.html ({len(summary['plots'])} plots, "
                   f"{summary['seconds'].get('total', 0):.1f} s)")
