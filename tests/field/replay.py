"""Replay the field's own unit-test cases (``tests/field/cases/*.json``) through our baselines.

Each case file restates one project's loop-detection tests as data: the events the
test feeds its detector, the parameters it sets, and what the project decides — the
verdict at the first detection and the call at which it happens. Replaying a case
walks the events through our detector exactly as a harness would (``on_message`` for
messages, ``check`` then ``record`` for calls) and compares.

Event forms (JSON lists, so the files stay short):

* ``["call", tool, args, result?, error?]`` — a proposed call, checked, then recorded
  with its result (default ``"ok"``) and error flag (default false);
* ``["check", tool?, args?]`` — a call that is only checked, never recorded: the
  project's test asking its detector about the history so far (default tool
  ``next_step``); it gets a call index like any other call;
* ``["msg", role, content]`` — a message on the path (a user turn, agent text);
* ``["repeat", n, [event, ...]]`` — the events ``n`` times; ``{i}`` in any string is
  replaced by the repetition index (0-based);
* ``["turn", [event, ...]]`` — the calls of one model turn: they share a fresh
  ``ToolCall.turn`` id (calls outside a ``turn`` have none, each its own turn).

A case agrees when the first call whose verdict is not ``allow`` is at ``first`` (or
there is none and ``first`` is null) with verdict ``verdict``, and every entry of
``also`` (call index → verdict) holds too. ``python -m tests.field.replay`` prints the
per-project agreement table.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from detectors.protocol import Message, Observation, ToolCall
from detectors.registry import DetectorNotFound, make_detector

CASES_DIR = Path(__file__).parent / "cases"
PROBE_TOOL = "next_step"


class CaseError(ValueError):
    """A case file that cannot be read; the message names the file and the case."""


@dataclass(frozen=True)
class Case:
    project: str
    detector: str
    test: str
    source: str  # repo@commit:file, where the test was read
    params: dict[str, Any]
    events: list[Any]
    verdict: str
    first: int | None
    also: dict[int, str] = field(default_factory=dict)
    note: str = ""
    known: str = ""  # why our baseline knowingly disagrees ("" when it should agree)

    @property
    def id(self) -> str:
        return f"{self.project}:{self.test}"


@dataclass(frozen=True)
class Unreproducible:
    project: str
    test: str
    source: str
    reason: str


def _substitute(value: Any, i: int) -> Any:
    if isinstance(value, str):
        return value.replace("{i}", str(i))
    if isinstance(value, list):
        if value and value[0] == "repeat":
            return value  # a nested repeat numbers its own events
        return [_substitute(v, i) for v in value]
    if isinstance(value, dict):
        return {k: _substitute(v, i) for k, v in value.items()}
    return value


def expand(events: list[Any], turns: Iterator[int] | None = None) -> Iterator[tuple[list[Any], int | None]]:
    """The events with every ``repeat`` and ``turn`` unrolled, each with its turn id (or None)."""
    turns = turns if turns is not None else iter(range(10**9))
    for event in events:
        if event and event[0] == "repeat":
            _, n, body = event
            for i in range(n):
                yield from expand(_substitute(body, i), turns)
        elif event and event[0] == "turn":
            turn = next(turns)
            for inner, _ in expand(event[1], turns):
                yield inner, turn
        else:
            yield event, None


def replay(case: Case) -> list[str]:
    """Our verdict for every call of the case, in order."""
    det = make_detector(case.detector, **case.params)
    state = det.start()
    out: list[str] = []
    for event, turn in expand(case.events):
        kind = event[0]
        if kind == "msg":
            state = det.on_message(state, Message(event[1], event[2]))
        elif kind == "check":
            tool = event[1] if len(event) > 1 else PROBE_TOOL
            args = event[2] if len(event) > 2 else {}
            out.append(det.check(state, ToolCall(tool, args, turn=turn)).verdict.value)
        elif kind == "call":
            tool, args = event[1], event[2]
            result = event[3] if len(event) > 3 else "ok"
            error = bool(event[4]) if len(event) > 4 else False
            call = ToolCall(tool, args, call_id=f"c{len(out)}", turn=turn)
            decision = det.check(state, call)
            out.append(decision.verdict.value)
            state = det.record(state, call, decision, Observation(result, error))
        else:
            raise CaseError(f"{case.id}: unknown event kind {kind!r}")
    return out


def first_detection(verdicts: list[str]) -> tuple[int | None, str]:
    for i, v in enumerate(verdicts):
        if v != "allow":
            return i, v
    return None, "allow"


def disagreement(case: Case) -> str | None:
    """``None`` when our detector agrees with the project on this case, else what differs."""
    try:
        verdicts = replay(case)
    except DetectorNotFound as exc:  # a parameter the project's test sets that we cannot take
        return str(exc)
    first, verdict = first_detection(verdicts)
    problems = []
    if (first, verdict) != (case.first, case.verdict):
        problems.append(f"first detection {verdict}@{first}, project {case.verdict}@{case.first}")
    for index, expected in case.also.items():
        got = verdicts[index] if index < len(verdicts) else "missing"
        if got != expected:
            problems.append(f"call {index}: {got}, project {expected}")
    return "; ".join(problems) or None


def _source(doc: dict, entry: dict) -> str:
    return f"{doc['repo']}@{entry.get('commit', doc['commit'])}:{entry.get('file', doc['file'])}"


def load(path: Path) -> tuple[list[Case], list[Unreproducible]]:
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise CaseError(f"{path.name}: line {exc.lineno}: {exc.msg}") from None
    cases, skipped = [], []
    for n, entry in enumerate(doc.get("cases", [])):
        try:
            cases.append(Case(
                project=doc["project"], detector=doc["detector"], test=entry["test"],
                source=_source(doc, entry), params=entry.get("params", {}), events=entry["events"],
                verdict=entry["verdict"], first=entry["first"],
                also={int(k): v for k, v in entry.get("also", {}).items()}, note=entry.get("note", ""),
                known=entry.get("known", ""),
            ))
        except KeyError as exc:
            raise CaseError(f"{path.name}: case {n}: missing field {exc}") from None
    for entry in doc.get("unreproducible", []):
        skipped.append(Unreproducible(doc["project"], entry["test"], _source(doc, entry), entry["reason"]))
    ids = [c.test for c in cases]
    dupes = sorted({t for t in ids if ids.count(t) > 1})
    if dupes:
        raise CaseError(f"{path.name}: duplicate test names {dupes}")
    return cases, skipped


def all_cases() -> tuple[list[Case], list[Unreproducible]]:
    cases, skipped = [], []
    for path in sorted(CASES_DIR.glob("*.json")):
        c, s = load(path)
        cases += c
        skipped += s
    return cases, skipped


def agreement_table(cases: list[Case]) -> list[tuple[str, int, int]]:
    """(project, agreeing, reproducible) per project, sorted by name."""
    rows: dict[str, list[int]] = {}
    for case in cases:
        row = rows.setdefault(case.project, [0, 0])
        row[1] += 1
        row[0] += disagreement(case) is None
    return [(p, a, n) for p, (a, n) in sorted(rows.items())]


def main(argv: list[str]) -> int:
    cases, skipped = all_cases()
    verbose = "-v" in argv
    total_a = total_n = 0
    print(f"{'project':<16}{'agree':>6}{'cases':>7}{'pct':>8}{'unrepro':>9}")
    for project, agree, n in agreement_table(cases):
        unrepro = sum(1 for s in skipped if s.project == project)
        print(f"{project:<16}{agree:>6}{n:>7}{100 * agree / n:>7.1f}%{unrepro:>9}")
        total_a, total_n = total_a + agree, total_n + n
    print(f"{'all':<16}{total_a:>6}{total_n:>7}{100 * total_a / max(total_n, 1):>7.1f}%{len(skipped):>9}")
    if verbose:
        for case in cases:
            why = disagreement(case)
            if why:
                print(f"  DISAGREE {case.id}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
