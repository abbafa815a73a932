"""Files around labelling: the labels file people's decisions are exported to, and
``label_traces`` (what ``loopbench label TRACE -o OUT`` does).

The **labels file** (written by the review page's export, read back here and by replay):

    {"format": "loopbench-labels", "rubric_version": 1,
     "traces": [{"episode": "e1", "calls_sha1": "...", "n_calls": 12, "loops": true,
                 "onset": 7, "kind": "stale", "ambiguous": false,
                 "decision": "accepted", "source": "human"}, ...]}

Each entry has the fields of a trace of ``real-labels/dev.json`` (``loops``, ``onset``,
``kind``, ``ambiguous``, ``calls_sha1``, ``n_calls``), so one reader serves both; it
matches a trace by the hash of its call list, never by position or id alone.
``decision`` is accepted / corrected / clean / ambiguous.

A trace whose decision is imported gets ``meta["label_source"] = "human"`` and keeps its
labels: a later ``label`` run never overwrites them.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.files import atomic_file
from scenarios.severity import SEVERITY_KEY, Severity, severity_meta
from scenarios.trace import TraceError, read_trace, write_trace
from scenarios.tree import Episode, Label

from .labeling import DECISION_KEY, HUMAN, RUBRIC_VERSION, SOURCE_KEY, calls_sha1, label_episodes, propose

LABELS_FORMAT = "loopbench-labels"
DECISIONS = ("accepted", "corrected", "clean", "ambiguous")
AMBIGUOUS_KEY = "label_ambiguous"


class LabelsError(Exception):
    """A labels file that cannot be used at all: one line naming the file and the fault."""


@dataclass
class LabelRun:
    """What ``label_traces`` did."""

    traces: int = 0
    loops: int = 0
    human: int = 0  # traces whose labels a person decided (kept or newly imported)
    imported: int = 0  # decisions taken from the labels file this run
    problems: list[str] = field(default_factory=list)
    severities: Counter = field(default_factory=Counter)  # runaway / blip -> looping traces
    outcomes: Counter = field(default_factory=Counter)  # success / failure / unknown -> traces


def read_labels(path: str | os.PathLike) -> tuple[list[dict[str, Any]], list[str]]:
    """The entries of a labels file and a line per entry that was skipped."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise LabelsError(f"{path}: not valid JSON ({str(exc).split(':')[0]})") from None
    except RecursionError:
        raise LabelsError(f"{path}: not valid JSON (nested too deeply)") from None
    if not isinstance(data, dict) or not isinstance(data.get("traces"), list):
        raise LabelsError(f"{path}: expected an object with a 'traces' list (a loopbench labels file)")
    good, problems = [], []
    for i, t in enumerate(data["traces"]):
        where = f"{path}: traces[{i}]"
        if not isinstance(t, dict) or not isinstance(t.get("calls_sha1"), str):
            problems.append(f"{where}: missing string field 'calls_sha1', skipped")
        elif not isinstance(t.get("loops"), bool):
            problems.append(f"{where}: field 'loops' must be a boolean, skipped")
        elif t["loops"] and (not isinstance(t.get("onset"), int) or isinstance(t.get("onset"), bool) or t["onset"] < 0):
            problems.append(f"{where}: a looping trace needs a non-negative integer 'onset', skipped")
        else:
            good.append(t)
    return good, problems


def write_labels(path: str | os.PathLike, entries: list[dict[str, Any]]) -> None:
    doc = {"format": LABELS_FORMAT, "rubric_version": RUBRIC_VERSION, "traces": entries}
    with atomic_file(path) as fh:
        fh.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


def apply_decision(ep: Episode, entry: dict[str, Any]) -> str | None:
    """Set ``ep``'s labels from a person's decision; a problem line if it does not fit."""
    tools = ep.tool_nodes()
    onset = entry.get("onset") if entry["loops"] else None
    if onset is not None and onset >= len(tools):
        return f"episode {ep.id}: onset {onset} is past its {len(tools)} calls, decision not applied"
    # Calls after the onset keep the labeller's own verdict: a person locates only the first loop.
    proposed, _ = propose(ep)
    kind = entry.get("kind") if isinstance(entry.get("kind"), str) else None
    for i, n in enumerate(tools):
        if onset is None or i < onset:
            n.label = Label(False, None)
        elif i == onset:
            n.label = Label(True, kind)
        else:
            n.label = proposed[n.id]
    ep.meta[SOURCE_KEY] = HUMAN
    decision = entry.get("decision")
    ep.meta[DECISION_KEY] = decision if decision in DECISIONS else ("corrected" if entry["loops"] else "clean")
    ep.meta.pop(SEVERITY_KEY, None)
    persistence, to_end = entry.get("persistence"), entry.get("to_end")
    if onset is not None and isinstance(persistence, int) and not isinstance(persistence, bool) and persistence >= 1 \
            and isinstance(to_end, bool):
        # The person accepted the onset with the severity shown beside it.
        ep.meta[SEVERITY_KEY] = severity_meta(Severity(persistence, to_end), HUMAN)
    if entry.get("ambiguous"):
        ep.meta[AMBIGUOUS_KEY] = True
    else:
        ep.meta.pop(AMBIGUOUS_KEY, None)
    return None


def label_traces(
    in_path: str | os.PathLike,
    out_path: str | os.PathLike,
    review_path: str | os.PathLike | None = None,
    review_html: str | os.PathLike | None = None,
    labels_path: str | os.PathLike | None = None,
) -> LabelRun:
    """Label every call of the trace file ``in_path`` and write it to ``out_path``.

    ``labels_path``: a labels file of people's decisions to import first (matched by
    ``calls_sha1``). ``review_path``: the review file (JSON: per trace the proposed onset,
    evidence, confidence; least confident first). ``review_html``: the review page.
    Raises ``TraceError`` / ``LabelsError`` when an input is unusable as a whole.
    """
    read = read_trace(in_path)
    run = LabelRun(problems=list(read.problems))
    episodes = read.episodes
    if labels_path is not None:
        entries, problems = read_labels(labels_path)
        run.problems += problems
        by_sha = {e["calls_sha1"]: e for e in entries}
        for ep in episodes:
            entry = by_sha.get(calls_sha1(ep))
            if entry is not None:
                problem = apply_decision(ep, entry)
                if problem:
                    run.problems.append(f"{labels_path}: {problem}")
                else:
                    run.imported += 1
    episodes, proposals = label_episodes(episodes)
    write_trace(out_path, episodes)
    run.traces = len(episodes)
    run.loops = sum(p.loops for p in proposals)
    run.human = sum(p.source == HUMAN for p in proposals)
    run.severities = Counter(p.severity for p in proposals if p.loops and p.severity)
    run.outcomes = Counter(p.outcome for p in proposals)
    ordered = sorted(proposals, key=lambda p: (p.source == HUMAN, p.confidence, p.episode))
    if review_path is not None:
        doc = {"rubric_version": RUBRIC_VERSION, "source_trace": Path(in_path).name,
               "traces": [{k: v for k, v in p.to_dict().items() if k != "calls"} for p in ordered]}
        with atomic_file(review_path) as fh:
            fh.write(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    if review_html is not None:
        from .review_page import write_review_page

        write_review_page(review_html, [p.to_dict() for p in ordered], title=Path(in_path).name)
    return run


__all__ = ["LabelRun", "LabelsError", "TraceError", "apply_decision", "label_traces", "read_labels", "write_labels"]
