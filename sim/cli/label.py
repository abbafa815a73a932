"""`loopbench label`: propose labels for unlabelled traces with hindsight, and a review page."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sim.cli.app import EXIT_SKIPPED, LoopbenchError, main, report_problems


@main.command("label")
@click.argument("trace")
@click.option("-o", "--out", "out_path", required=True, help="The labelled trace (JSON Lines, a label on every call).")
@click.option("--review-file", default=None,
              help="Review file: per trace the proposed onset, evidence and confidence. [default: OUT's name + .review.json]")
@click.option("--review", "review_html", is_flag=False, flag_value="", default=None,
              help="Also write the review page (self-contained HTML). [default with the bare flag: OUT's name + .review.html]")
@click.option("--labels", "labels_path", default=None,
              help="A labels file exported from the review page: its decisions are applied first and never overwritten.")
def label_cmd(trace, out_path, review_file, review_html, labels_path) -> None:
    """Propose a label for every call of TRACE (the rubric of docs/traces.md: a call is a loop when it
    re-issues an earlier call and adds nothing), with the evidence, for a person to review."""
    from scenarios.label_files import LabelsError, label_traces
    from scenarios.trace import TraceError

    if not Path(trace).is_file():
        raise LoopbenchError(f"{trace}: no such file")
    out = Path(out_path)
    stem = out.name[:-len(".jsonl")] if out.name.endswith(".jsonl") else out.name
    review_file = review_file or str(out.with_name(stem + ".review.json"))
    if review_html == "":
        review_html = str(out.with_name(stem + ".review.html"))
    try:
        run = label_traces(trace, out, review_path=review_file, review_html=review_html, labels_path=labels_path)
    except (TraceError, LabelsError, OSError) as exc:
        raise LoopbenchError(str(exc).splitlines()[0]) from None
    report_problems(run.problems)
    if run.traces == 0:
        raise LoopbenchError(f"{trace}: no usable traces")
    click.echo(f"labelled {run.traces} traces: {run.loops} loop ({run.severities['runaway']} runaway, "
               f"{run.severities['blip']} blip), {run.traces - run.loops} clean; "
               f"{run.human} decided by a person ({run.imported} from {labels_path or 'no labels file'})", err=True)
    click.echo("run outcomes: " + ", ".join(f"{k} {run.outcomes[k]}" for k in ("success", "failure", "unknown")), err=True)
    click.echo(f"wrote {out}, {review_file}" + (f", {review_html}" if review_html else ""), err=True)
    if run.problems:
        sys.exit(EXIT_SKIPPED)


@main.command("agree")
@click.argument("a")
@click.argument("b")
@click.option("--window", default=5, show_default=True, type=click.IntRange(0),
              help="Two onsets this many calls apart or fewer count as close (the scorer's Δ).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON instead of a report.")
def agree_cmd(a, b, window, as_json) -> None:
    """How far two labellings of the same traces agree: loop or clean (Cohen's κ), the onset call
    and its kind, and every trace they disagree on. A and B are each a labels file (the review
    page's export, the shipped real-labels/dev.json) or a labelled trace (loopbench label's
    output); traces are matched by the hash of their calls."""
    from scenarios.label_agreement import LabelsError, TraceError, agreement_text, compare, one_line, read_side
    from sim.scoring.uncertainty import kappa_interval

    sides, problems = [], []
    for path in (a, b):
        try:
            readings, skipped = read_side(path)
        except (LabelsError, TraceError, OSError) as exc:
            raise LoopbenchError(one_line(str(exc))) from None
        problems += skipped
        sides.append(readings)
    report_problems([one_line(p) for p in problems])
    ag = compare(sides[0], sides[1], window)
    if ag.compared == 0:
        raise LoopbenchError(f"{one_line(a)} and {one_line(b)} label no trace in common with a tool call that neither "
                             f"marks ambiguous ({ag.ambiguous + ag.empty} matched traces left out; traces are matched "
                             "by the hash of their calls)")
    ci = kappa_interval(ag.pairs) if ag.kappa is not None else None
    if as_json:
        click.echo(json.dumps({"a": a, "b": b, **ag.to_dict(), "kappa_lo": ci[0] if ci else None,
                               "kappa_hi": ci[1] if ci else None}, indent=1))
    else:
        click.echo(agreement_text(ag, a, b, ci))
    if problems:
        sys.exit(EXIT_SKIPPED)
