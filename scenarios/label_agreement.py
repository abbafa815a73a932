"""How far two labellings of the same traces agree (``loopbench agree A B``).

Every figure a benchmark gives on real traces is only as good as the labels it is scored
against; the rubric is a judgement, so a second reading of the same traces says how far the
labels can be trusted: two people, a person and ``loopbench label``'s proposals, or the
shipped dev labels and a user's own reading of them.

Each side is a **labels file** (``scenarios.label_files``: the review page's export, or the
shipped ``real-labels/dev.json``) or a **labelled trace** (JSON Lines with a label on every
call: ``loopbench label``'s output, an import with labels). A trace is matched across the two
by the hash of its call list (``calls_sha1``), never by position or name. For each trace both
sides label, a labelling says whether it loops, and if so the first redundant call (onset)
and its kind; only the first loop is compared, as the rubric locates only the first.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scenarios.label_files import LABELS_FORMAT, LabelsError, read_labels
from scenarios.labeling import calls_sha1
from scenarios.realsuite import calls_sha1 as sha1_of_calls
from scenarios.trace import TraceError, read_trace


#: The hash of an empty call list: a trace without a tool call, whatever ``n_calls`` says.
NO_CALLS = sha1_of_calls([])


@dataclass(frozen=True)
class Reading:
    """One side's label of one trace."""

    name: str  # the episode id when the side gives one, else where the labels file says the trace is
    loops: bool
    onset: int | None
    kind: str | None
    ambiguous: bool
    n_calls: int | None = None  # None: the labels file does not say
    by_id: bool = False  # ``name`` is an episode id


@dataclass
class Agreement:
    """What ``compare`` found; ``window``: how many calls apart two onsets still count as close."""

    window: int
    only_a: int = 0
    only_b: int = 0
    ambiguous: int = 0  # matched traces either side marked ambiguous (left out of the figures)
    empty: int = 0  # matched traces without a tool call: nothing to disagree on (left out)
    pairs: list[tuple[bool, bool]] = field(default_factory=list)  # (a loops, b loops) per compared trace
    onset_gaps: list[int] = field(default_factory=list)  # |a - b| where both call it a loop
    same_kind: int = 0  # of the traces with the same onset, both naming a kind
    kinds_named: int = 0
    disagreements: list[tuple[Reading, Reading]] = field(default_factory=list)

    @property
    def table(self) -> Counter:
        """(a loops, b loops) -> traces."""
        return Counter(self.pairs)

    @property
    def compared(self) -> int:
        return len(self.pairs)

    @property
    def same_onset(self) -> int:
        return self.onset_gaps.count(0)

    @property
    def close_onset(self) -> int:
        return sum(gap <= self.window for gap in self.onset_gaps)

    @property
    def both_loop(self) -> int:
        return self.table[(True, True)]

    @property
    def percent_agree(self) -> float | None:
        n = self.compared
        return None if n == 0 else (self.table[(True, True)] + self.table[(False, False)]) / n

    @property
    def kappa(self) -> float | None:
        """Cohen's κ on loop or clean: agreement beyond what the two sides' loop shares give by
        chance; None when there is nothing to compare or chance agreement is already total."""
        t = self.table
        if self.compared == 0 or _chance(t[(True, True)], t[(True, False)], t[(False, True)], t[(False, False)]) >= 1:
            return None
        return cohen_kappa(t[(True, True)], t[(True, False)], t[(False, True)], t[(False, False)])

    def to_dict(self) -> dict[str, Any]:
        def side(r: Reading) -> dict[str, Any]:
            return {"loops": r.loops, "onset": r.onset, "kind": r.kind}

        return {
            "compared": self.compared, "only_a": self.only_a, "only_b": self.only_b, "ambiguous": self.ambiguous,
            "no_calls": self.empty,
            "both_loop": self.both_loop, "both_clean": self.table[(False, False)],
            "a_loop_b_clean": self.table[(True, False)], "a_clean_b_loop": self.table[(False, True)],
            "percent_agree": self.percent_agree, "kappa": self.kappa,
            "same_onset": self.same_onset, "window": self.window, "onset_within_window": self.close_onset,
            "mean_onset_gap": (sum(self.onset_gaps) / len(self.onset_gaps)) if self.onset_gaps else None,
            "same_kind": self.same_kind, "kinds_compared": self.kinds_named,
            "disagreements": [{"trace": _name(a, b), "a": side(a), "b": side(b)} for a, b in self.disagreements],
        }


def _chance(tt, tf, ft, ff):
    n = tt + tf + ft + ff
    pa, pb = (tt + tf) / n, (tt + ft) / n
    return pa * pb + (1 - pa) * (1 - pb)


def cohen_kappa(tt, tf, ft, ff):
    """Cohen's κ from the four counts (A loops and B loops, A loops and B clean, ...): numbers
    or arrays of them (the bootstrap's rounds); undefined (division by zero) where the chance
    agreement is total."""
    n = tt + tf + ft + ff
    chance = _chance(tt, tf, ft, ff)
    return ((tt + ff) / n - chance) / (1 - chance)


def read_side(path: str | os.PathLike) -> tuple[dict[str, list[Reading]], list[str]]:
    """One side's readings by ``calls_sha1`` (in file order: traces may share a call list), and a
    line per record skipped. A file whose first line is a whole JSON object other than a labels
    file is a trace (JSON Lines); one JSON document over several lines is a labels file. Raises
    ``LabelsError`` / ``TraceError`` in one line naming the file when it is unusable as a whole,
    or holds no usable reading."""
    path = Path(path)
    if not path.is_file():
        raise LabelsError(f"{path}: no such file" if not path.exists() else f"{path}: is not a file")
    if _is_labels_file(path):
        out, problems = _labels_readings(path)
    else:
        out, problems = _trace_readings(path)
    if not any(r.n_calls != 0 for readings in out.values() for r in readings):
        first = f"; the first: {problems[0]}" if problems else ""
        raise LabelsError(f"{path}: no labelled trace with a tool call in it ({len(problems)} records skipped{first})")
    return out, problems


def _labels_readings(path: Path) -> tuple[dict[str, list[Reading]], list[str]]:
    entries, problems = read_labels(path)
    out: dict[str, list[Reading]] = {}
    for i, e in enumerate(entries):
        if isinstance(e.get("episode"), str):
            name, by_id = e["episode"], True
        elif isinstance(e.get("file"), str):  # the shipped dev labels: a file and the trace's key in it
            name, by_id = e["file"] + (f"#{e['trace_key']}" if "trace_key" in e else ""), False
        else:
            name, by_id = e["calls_sha1"][:12], False
        n = e.get("n_calls") if isinstance(e.get("n_calls"), int) and not isinstance(e.get("n_calls"), bool) else None
        if e["calls_sha1"] == NO_CALLS:
            n = 0
        if e["loops"] and n is not None and e["onset"] >= n:
            problems.append(f"{path}: traces[{i}]: onset {e['onset']} is past its {n} calls, skipped")
            continue
        kind = e.get("kind") if isinstance(e.get("kind"), str) else None
        out.setdefault(e["calls_sha1"], []).append(Reading(
            name, e["loops"], e["onset"] if e["loops"] else None, kind if e["loops"] else None,
            e.get("ambiguous") is True, n, by_id))
    return out, problems


def _trace_readings(path: Path) -> tuple[dict[str, list[Reading]], list[str]]:
    read = read_trace(path)
    out: dict[str, list[Reading]] = {}
    problems = list(read.problems)
    for ep in read.episodes:
        if not ep.is_linear():
            problems.append(f"{path}: episode {_cell(ep.id)}: a branching episode has no single onset, skipped")
            continue
        nodes = ep.tool_nodes()
        if any(n.label is None for n in nodes):
            problems.append(f"{path}: episode {_cell(ep.id)}: not every call is labelled, skipped")
            continue
        onset = next((i for i, n in enumerate(nodes) if n.label.loop), None)
        kind = nodes[onset].label.kind if onset is not None else None
        out.setdefault(calls_sha1(ep), []).append(Reading(
            ep.id, onset is not None, onset, kind, ep.meta.get("label_ambiguous") is True, len(nodes), True))
    return out, problems


def _is_labels_file(path: Path) -> bool:
    """A labels file rather than a trace. A trace is JSON Lines, every line an object: its first
    line parses alone (and is no labels file of one line). A labels file written over several
    lines (indented) does not; then the whole file must be one JSON document (labels files are
    small: only they are read whole)."""
    try:
        with path.open("rb") as fh:
            first = fh.readline(1 << 20)
    except OSError as exc:
        raise LabelsError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        doc = json.loads(first.decode("utf-8-sig"))
        if isinstance(doc, dict):
            return "traces" in doc or doc.get("format") == LABELS_FORMAT
    except (ValueError, UnicodeDecodeError, RecursionError):
        pass
    try:
        doc = json.loads(path.read_bytes().decode("utf-8-sig"))
    except RecursionError:
        raise LabelsError(f"{path}: JSON nested too deeply") from None
    except UnicodeDecodeError:
        raise LabelsError(f"{path}: neither a labels file nor a trace (not UTF-8 text)") from None
    except ValueError as exc:
        raise LabelsError(f"{path}: neither a labels file nor a trace (not valid JSON: "
                          f"{str(exc).split(':')[0]})") from None
    if not isinstance(doc, dict):
        what = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(doc), "a number")
        raise LabelsError(f"{path}: neither a labels file nor a trace (the JSON is {what}, not an object with a "
                          "'traces' list)")
    return True


def compare(a: dict[str, list[Reading]], b: dict[str, list[Reading]], window: int = 5) -> Agreement:
    """The agreement of two sides' readings, matched by hash; traces that share a call list are
    paired in the order each side gives them."""
    ag = Agreement(window)
    pairs = []
    for key in set(a) | set(b):
        matched, left_a, left_b = _pair(a.get(key, []), b.get(key, []))
        pairs += matched
        ag.only_a += left_a
        ag.only_b += left_b
    for ra, rb in sorted(pairs, key=lambda p: (_name(*p), -1 if p[0].onset is None else p[0].onset)):
        if ra.n_calls == 0 or rb.n_calls == 0:
            ag.empty += 1
            continue
        if ra.ambiguous or rb.ambiguous:
            ag.ambiguous += 1
            continue
        ag.pairs.append((ra.loops, rb.loops))
        if ra.loops and rb.loops:
            gap = abs(ra.onset - rb.onset)
            ag.onset_gaps.append(gap)
            if gap == 0 and ra.kind and rb.kind:
                ag.kinds_named += 1
                ag.same_kind += ra.kind == rb.kind
        if ra.loops != rb.loops or ra.onset != rb.onset or (ra.kind and rb.kind and ra.kind != rb.kind):
            ag.disagreements.append((ra, rb))
    return ag


def _pair(a: list[Reading], b: list[Reading]) -> tuple[list[tuple[Reading, Reading]], int, int]:
    """The readings of one call list on both sides paired: by episode id where both sides name
    the same one, the rest in the order each side lists them; and how many are left on each."""
    if len(a) == 1 and len(b) == 1:
        return [(a[0], b[0])], 0, 0
    b_ids: dict[str, list[int]] = {}
    for j, r in enumerate(b):
        if r.by_id:
            b_ids.setdefault(r.name, []).append(j)
    pairs, used_a, used_b = [], set(), set()
    for i, ra in enumerate(a):
        free = b_ids.get(ra.name) if ra.by_id else None
        if free:  # the same id twice on a side: paired in order
            j = free.pop(0)
            pairs.append((ra, b[j]))
            used_a.add(i)
            used_b.add(j)
    rest_a = [r for i, r in enumerate(a) if i not in used_a]
    rest_b = [r for j, r in enumerate(b) if j not in used_b]
    pairs += list(zip(rest_a, rest_b))
    n = min(len(rest_a), len(rest_b))
    return pairs, len(rest_a) - n, len(rest_b) - n


def agreement_text(ag: Agreement, name_a: str, name_b: str, kappa_ci: tuple[float, float] | None = None) -> str:
    """The agreement as a short markdown report; ``kappa_ci``: κ's interval, when one was computed."""
    def share(k: int, n: int) -> str:
        return f"{k} of {n}" + (f" ({100 * k / n:.0f} %)" if n else "")

    kappa = "n/a" if ag.kappa is None else f"{ag.kappa:.2f}"
    if ag.kappa is not None and kappa_ci is not None:
        kappa += f" [{kappa_ci[0]:.2f}, {kappa_ci[1]:.2f}] (95 % bootstrap interval over the traces)"
    lines = [
        f"A = {_cell(name_a)}, B = {_cell(name_b)}",
        f"traces labelled by both: {ag.compared + ag.ambiguous + ag.empty} ({ag.ambiguous} marked ambiguous by either "
        f"and {ag.empty} without a tool call, left out); "
        f"only in A: {ag.only_a}; only in B: {ag.only_b}",
        "",
        "| | B loops | B clean |",
        "|---|---|---|",
        f"| **A loops** | {ag.table[(True, True)]} | {ag.table[(True, False)]} |",
        f"| **A clean** | {ag.table[(False, True)]} | {ag.table[(False, False)]} |",
        "",
        f"loop or clean: agree on {share(ag.table[(True, True)] + ag.table[(False, False)], ag.compared)}; "
        f"Cohen's κ {kappa}",
    ]
    if ag.both_loop:
        gaps = ag.onset_gaps
        lines.append(f"where both say it loops: the same onset call in {share(ag.same_onset, ag.both_loop)}, "
                     f"within {ag.window} calls in {share(ag.close_onset, ag.both_loop)} "
                     f"(mean gap {sum(gaps) / len(gaps):.1f} calls); the same kind in "
                     f"{share(ag.same_kind, ag.kinds_named)} of those with the same onset")
    if ag.disagreements:
        lines += ["", "| trace | A | B |", "|---|---|---|"]
        for ra, rb in ag.disagreements:
            lines.append(f"| {_cell(_name(ra, rb))} | {_cell(_said(ra))} | {_cell(_said(rb))} |")
    return "\n".join(lines)


def _name(a: Reading, b: Reading) -> str:
    """A trace's name: its episode id where a side gives one, else A's."""
    return a.name if a.by_id or not b.by_id else b.name


def one_line(text: str) -> str:
    """Text from a file or a path on one line: line breaks and other control characters shown
    as escapes."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def _cell(text: str) -> str:
    """Text from a file as one markdown table cell: one line, a ``|`` escaped."""
    return one_line(text.replace("\\", "\\\\").replace("|", "\\|"))


def _said(r: Reading) -> str:
    return f"loop at call {r.onset}" + (f" ({r.kind})" if r.kind else "") if r.loops else "clean"


__all__ = ["Agreement", "LabelsError", "Reading", "TraceError", "agreement_text", "cohen_kappa", "compare", "one_line", "read_side"]
