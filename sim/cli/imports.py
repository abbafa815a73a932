"""`loopbench import`: real agent-trace formats into the loopbench trace format."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from sim.cli.app import (EXIT_SKIPPED, LoopbenchError, main, report_problems)


@main.command("import")
@click.argument("file")
@click.option("--format", "fmt", required=True, help="Source format: otel, openai, tau-bench, react-log, magentic-one, captain-agent, openhands, "
                   "claude-code, codex, swe-agent.")
@click.option("-o", "--out", "out_path", required=True, help="Output trace file (JSON Lines; the trace format of docs/traces.md).")
@click.option("--outcomes", "outcomes_path", default=None,
              help="SWE-bench evaluation report.json files (one, or a folder searched for them) or a run's summary "
                   "(resolved_ids / unresolved_ids, as the harness and sb-cli write it): each run whose "
                   "format records no outcome takes its instance's `resolved`.")
def import_cmd(file, fmt, out_path, outcomes_path) -> None:
    """Convert a real agent-trace file (or folder) into the loopbench trace format."""
    from scenarios.importers import FORMATS, convert

    from scenarios.trace import TraceError

    if fmt not in FORMATS:
        raise LoopbenchError(f"unknown --format {fmt!r} (known: {', '.join(sorted(FORMATS))})")
    if not Path(file).exists():
        raise LoopbenchError(f"{file}: no such file or directory")
    notes: list[str] = []
    resolved = None
    if outcomes_path is not None:
        from scenarios.importers.graded import ReportError, read_reports

        try:
            resolved = read_reports(outcomes_path)
        except (ReportError, TraceError, OSError) as exc:
            raise LoopbenchError(str(exc).splitlines()[0]) from None
    try:
        n, problems = convert(fmt, file, out_path, notes, resolved)
    except (TraceError, OSError, ValueError) as exc:
        raise LoopbenchError(str(exc).splitlines()[0]) from None
    report_problems(problems)
    if n == 0:
        raise LoopbenchError(f"{file}: no {fmt} episodes found (for a folder, only its own files are read; claude-code, codex and swe-agent search its sub-folders too)")
    for line in notes:
        click.echo(line, err=True)
    click.echo(f"wrote {n} episodes to {out_path}", err=True)
    if problems:
        sys.exit(EXIT_SKIPPED)
