"""`loopbench inject`: labelled loops (and hard negatives) inserted into clean real traces."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from sim.cli.app import EXIT_SKIPPED, LoopbenchError, main, report_problems, split_list


@main.command("inject")
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--out", "out_path", required=True, help="The labelled trace file to write (JSON Lines).")
@click.option("--kinds", default=None,
              help="Comma-separated injection kinds: loops stale, cosmetic, paraphrased, drift, cycle, no_progress, "
                   "reread_after_failed_write, silent_redelegation; hard negatives reread_after_write, paging, "
                   "retry_success. [default: all]")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed: the same seed gives the same file.")
@click.option("--per-kind", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Injections of each kind per trace (each at its own point).")
@click.option("--anywhere", is_flag=True,
              help="Repeat any repeatable call, failed or not. By default the repeated call is drawn as in real loops "
                   "(three in four a failed one) and a trace without a failed call gets that kind only now and then.")
def inject_cmd(traces, out_path, kinds, seed, per_kind, anywhere) -> None:
    """Insert labelled loops of every kind into the clean traces of TRACES (trace files, e.g. from
    `loopbench import`), built from each trace's own calls and results, plus hard negatives
    labelled clean; one episode per trace and kind, the injection recorded in its meta."""
    from scenarios.inject import KINDS, InjectError, check_kinds, inject_episodes
    from scenarios.trace import TraceError, read_trace, write_trace

    try:
        wanted = check_kinds(split_list(kinds) if kinds else KINDS)
    except InjectError as exc:
        raise LoopbenchError(str(exc)) from None
    episodes, problems = [], []
    for path in traces:
        if not Path(path).is_file():
            raise LoopbenchError(f"{path}: no such file")
        try:
            read = read_trace(path)
        except TraceError as exc:
            raise LoopbenchError(str(exc).splitlines()[0]) from None
        problems += read.problems
        episodes += read.episodes
    run = inject_episodes(episodes, wanted, seed, per_kind, anywhere=anywhere)
    report_problems(problems)
    if run.sources == 0:
        why = "; ".join(f"{n} {reason}" for reason, n in run.skipped_traces.most_common()) or "no episodes"
        raise LoopbenchError(f"{', '.join(traces)}: no clean traces to inject into ({why})")
    try:
        write_trace(out_path, run.episodes)
    except OSError as exc:
        raise LoopbenchError(f"{out_path}: cannot write ({exc.strerror or exc})") from None
    per_kind_counts = run.per_kind()
    click.echo(f"injected into {run.sources} clean traces: {len(run.episodes)} episodes ("
               + ", ".join(f"{k} {per_kind_counts.get(k, 0)}" for k in wanted) + ")", err=True)
    if run.skipped_traces:
        click.echo("traces not used: " + ", ".join(f"{n} {r}" for r, n in run.skipped_traces.most_common()), err=True)
    if run.not_injectable:
        click.echo("nothing to build from: " + ", ".join(f"{k} in {n} traces" for k, n in run.not_injectable.items()),
                   err=True)
    click.echo(f"wrote {out_path}", err=True)
    if problems:
        sys.exit(EXIT_SKIPPED)
