"""How often each guard fires on real coding-agent runs (OpenHands CodeActAgent: an editor
tool ``str_replace_editor`` and a shell ``execute_bash``; SWE-agent; Claude Code; any format
``loopbench import`` reads), and the context of every alarm.

The runs are read at run time from a folder in ``--format`` (OpenHands evaluation
``output.jsonl`` files by default; the data is third-party and is not shipped). Where the
format records no outcome, ``--reports`` reads SWE-bench's evaluation ``report.json`` files
and grades each run by its instance's ``resolved``.
Runs that made no tool call (ended at start-up) are counted and left out. Per detector:
how many runs it fires on (first alarm: what halting at once would stop) and how many it
stops as configured (its own stop / escalate verdicts: a guard that nudges first lets the run
go on), split by how the run ended where the file records it (resolved / not resolved /
unknown) — the resolved column is the good runs a deployment would lose. On graded runs a second
table gives each detector in a deployer's terms: resolved runs stopped (halting at the first
alarm, and as configured), the failed runs' calls saved both ways, and alarms per 100 calls of
the resolved runs (what its nudges cost). Then, for each detector in --explain,
every first alarm with what a reviewer needs to judge it by the labelling rubric
(shared/corpora/real-labels/README.md): the call, the last earlier call with the same tool
and arguments, whether a write (declared tool effects, ``detectors.effects``) came between
them, and whether their results are identical — a re-run after an edit, or a re-view of a
file written since, is not a loop.

Run: python bench/bench_coding_runs.py FOLDER [--format swe-agent] [--reports EVAL_FOLDER]
     [--detectors progress_guard,exact,...] [--explain progress_guard] [--width 100]
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from detectors import Verdict, make_detector
from detectors.effects import Effects, effect_of
from scenarios.importers import import_file
from scenarios.importers.graded import grade, read_reports
from scenarios.outcome import run_outcome
from scenarios.tree import Episode, ToolNode
from sim.play.openloop import score_episode
from sim.scoring.thresholds import HALTING_VERDICTS

_EFFECTS = Effects()
FIELD_GUARDS = ("openhands", "openhands_sdk", "cline", "roo_code", "gemini_cli", "goose", "crewai", "openclaw")
DEFAULT = ("progress_guard", "exact", *FIELD_GUARDS)


def verdicts(detector_name: str, ep: Episode) -> tuple[tuple[int, str] | None, dict[int, Verdict]]:
    """One scoring of the run by the detector: its first alarm, as the index (among the run's
    tool calls) of its first non-allow verdict and the message it gave (its reason), and
    every call's verdict by that index."""
    scored: dict = {}
    scores = score_episode(make_detector(detector_name), ep, scored=scored)
    first = next((s for s in scores if s.verdict is not Verdict.ALLOW), None)
    alarm = None
    if first is not None:
        decision = scored[first.node_id].decision
        alarm = first.call_index, (decision.message or "") if decision is not None else ""
    return alarm, {s.call_index: s.verdict for s in scores}


def reruns_after_edit(calls: list[ToolNode]) -> list[int]:
    """Calls that repeat an earlier shell call exactly with a successful editor write (a
    write of a declared tool that is no shell, ``detectors.effects``) between the two: the
    re-run of a test or reproduction after an edit, which the rubric counts as progress."""
    out = []
    for k, node in enumerate(calls):
        if not _EFFECTS.is_shell(node.call.tool):
            continue
        ctx = alarm_context(calls, k)
        if ctx["prev_same"] is None:
            continue
        if any(not _EFFECTS.is_shell(calls[j].call.tool) and calls[j].observation is not None
               and not calls[j].observation.error for j in ctx["writes_between"]):
            out.append(k)
    return out


def signature(node: ToolNode) -> str:
    return json.dumps([node.call.tool, node.call.args], sort_keys=True, ensure_ascii=False)


def alarm_context(calls: list[ToolNode], k: int) -> dict[str, Any]:
    """What a reviewer needs about the alarm at call ``k``: the last identical call before it,
    the writes between the two, and whether the results match."""
    sig = signature(calls[k])
    prev = next((j for j in range(k - 1, -1, -1) if signature(calls[j]) == sig), None)
    ctx: dict[str, Any] = {"prev_same": prev}
    if prev is not None:
        between = calls[prev + 1:k]
        writes = [j for j, n in enumerate(between, prev + 1) if (e := effect_of(n.call)) is not None and e.writes]
        ctx["writes_between"] = writes
        a, b = calls[prev].observation, calls[k].observation
        ctx["same_result"] = a is not None and b is not None and a.content == b.content
    return ctx


def short(node: ToolNode, width: int) -> str:
    args = json.dumps(node.call.args, ensure_ascii=False)
    text = f"{node.call.tool} {args}"
    return text if len(text) <= width else text[: width - 1] + "…"


def deploy_line_legend() -> str:
    return ("a run is stopped where the detector's first alarm is (halting) or its first stop or escalate "
            "verdict (as configured); the failed runs' calls from there on are the calls saved; alarms per 100 "
            "calls count every non-allow verdict on the resolved runs, the run going on (a nudge's cost).")


def deploy_figures(graded: list[Episode], scored: dict[str, tuple]) -> dict[str, Any]:
    """Successful runs stopped, failed-run calls saved (halting at the first alarm and as
    configured) and alarms per 100 calls of successful runs, from each run's verdicts (``scored``:
    episode id -> :func:`verdicts`), as ``deploy.csv`` counts them for a run folder: a run stops at
    its stopping call, which is not made, nor any after it."""
    out = {"succ": 0, "stopped_halt": 0, "stopped_conf": 0, "fail_calls": 0, "saved_halt": 0, "saved_conf": 0}
    succ_calls = succ_alarms = 0
    for ep in graded:
        n = len(ep.tool_nodes())
        alarm, by_call = scored[ep.id]
        halt = alarm[0] if alarm is not None else None
        conf = min((k for k, v in by_call.items() if v.value in HALTING_VERDICTS), default=None)
        if run_outcome(ep.meta) == "success":
            out["succ"] += 1
            out["stopped_halt"] += halt is not None
            out["stopped_conf"] += conf is not None
            succ_calls += n
            succ_alarms += sum(v is not Verdict.ALLOW for v in by_call.values())
        else:
            out["fail_calls"] += n
            out["saved_halt"] += n - halt if halt is not None else 0
            out["saved_conf"] += n - conf if conf is not None else 0
    out["alarms_per_100"] = 100.0 * succ_alarms / succ_calls if succ_calls else float("nan")
    return out


def pct(num: int, den: int) -> str:
    return f"{100.0 * num / den:.1f} % ({num}/{den})" if den else "–"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", help="a folder of runs (or one file) in --format")
    ap.add_argument("--format", default="openhands", dest="fmt",
                    help="the runs' format, as `loopbench import` names it (openhands, swe-agent, claude-code, openai, ...)")
    ap.add_argument("--reports", default=None,
                    help="a folder of SWE-bench evaluation report.json files: each run's outcome is its instance's "
                         "`resolved` (runs whose format records no outcome)")
    ap.add_argument("--detectors", default=",".join(DEFAULT))
    ap.add_argument("--explain", default="progress_guard", help="detectors whose alarms are listed ('' for none)")
    ap.add_argument("--width", type=int, default=110)
    args = ap.parse_args(argv)

    episodes, problems = import_file(args.fmt, args.folder)
    for p in problems:
        print(f"problem: {p}")
    runs = [ep for ep in episodes if ep.tool_nodes()]
    if args.reports:
        resolved = read_reports(args.reports)
        print(f"{len(resolved)} SWE-bench reports read; {grade(runs, resolved)} runs graded by them")
    outcomes = Counter(run_outcome(ep.meta) for ep in runs)
    models = Counter(ep.meta.get("model", "?") for ep in runs)
    print(f"{len(episodes)} runs read, {len(episodes) - len(runs)} without a tool call left out; "
          f"{len(runs)} runs, {sum(len(ep.tool_nodes()) for ep in runs)} tool calls")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items())))
    print("models: " + ", ".join(f"{k} {v}" for k, v in sorted(models.items())))

    names = [d for d in args.detectors.split(",") if d]
    # Each run scored once per detector: the table reads the first alarms, --explain every verdict.
    scoring = {d: {ep.id: verdicts(d, ep) for ep in runs} for d in names}
    print()
    print("Each cell: runs fired (a first alarm: halting there stops the run) / runs stopped as configured "
          "(a stop or escalate verdict of the detector's own; its nudges let the run go on) / runs.")
    print()
    print("| detector | all runs | resolved | not resolved | outcome unknown |")
    print("|---|---|---|---|---|")
    for d in names:
        cells = []
        for group in (None, "success", "failure", "unknown"):
            eps = [ep for ep in runs if group is None or run_outcome(ep.meta) == group]
            fired = sum(scoring[d][ep.id][0] is not None for ep in eps)
            stopped = sum(any(v.value in HALTING_VERDICTS for v in scoring[d][ep.id][1].values()) for ep in eps)
            cells.append(f"{fired} / {stopped} / {len(eps)}")
        print(f"| `{d}` | " + " | ".join(cells) + " |")

    graded = [ep for ep in runs if run_outcome(ep.meta) in ("success", "failure")]
    if graded:
        print()
        print("In a deployer's terms, on the graded runs: " + deploy_line_legend())
        print()
        print("| detector | resolved runs stopped, halting | as configured | failed-run calls saved, halting "
              "| as configured | alarms per 100 calls of resolved runs |")
        print("|---|---|---|---|---|---|")
        for d in names:
            f = deploy_figures(graded, scoring[d])
            print(f"| `{d}` | {f['stopped_halt']} / {f['succ']} | {f['stopped_conf']} / {f['succ']} "
                  f"| {pct(f['saved_halt'], f['fail_calls'])} | {pct(f['saved_conf'], f['fail_calls'])} "
                  f"| {f['alarms_per_100']:.1f} |")

    for d in [x for x in args.explain.split(",") if x]:
        if d not in scoring:
            scoring[d] = {ep.id: verdicts(d, ep) for ep in runs}
        print(f"\n## first alarms of {d}")
        for ep in runs:
            alarm = scoring[d][ep.id][0]
            if alarm is None:
                continue
            k, reason = alarm
            calls = ep.tool_nodes()
            ctx = alarm_context(calls, k)
            print(f"\n{ep.id} ({run_outcome(ep.meta)}): call {k} of {len(calls)}")
            for j in range(max(0, k - 4), k + 1):
                obs = calls[j].observation
                tag = "" if obs is None else (" [error]" if obs.error else "")
                print(f"  {'>' if j == k else ' '} {j:3d} {short(calls[j], args.width)}{tag}")
            if ctx["prev_same"] is None:
                print("    no identical earlier call")
            else:
                print(f"    identical to call {ctx['prev_same']}; writes between: {ctx['writes_between'] or 'none'}; "
                      f"same result: {ctx['same_result']}")
            print(f"    {d} says: {' '.join(reason.split())[:args.width * 2]}")

        # Every verdict, not only the first alarm: how the detector treats the re-runs after an edit.
        allowed, total, stopped = 0, 0, []
        for ep in runs:
            calls = ep.tool_nodes()
            by_call = scoring[d][ep.id][1]
            for k in reruns_after_edit(calls):
                total += 1
                if by_call[k] is Verdict.ALLOW:
                    allowed += 1
                else:
                    stopped.append(f"{ep.id} call {k} ({by_call[k].value})")
        print(f"\n{d} allows {allowed} of {total} re-runs right after a successful editor write"
              + (f"; not: {', '.join(stopped)}" if stopped else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
