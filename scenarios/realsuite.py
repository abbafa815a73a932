"""Shipped real suites and label matching: hand-labelled published traces as episodes.

The labels (``data/real/real-dev-labels.json``, a copy of the corpora's ``dev.json``)
name each trace by ``(source, file, trace_key)`` and pin its call list with
``calls_sha1`` = sha1 of ``json.dumps([[tool, args], ...], sort_keys=True,
ensure_ascii=False)``. The converters below follow the labels file's per-source rules
(``sources``) to the letter, so a converted trace reproduces that hash; a label whose
trace is missing or converts to another call list is *reported* and left out, never
attached to the wrong calls.

Labels become SPEC §6 call labels: on a looping trace the calls before ``onset`` are
``loop: false`` and the calls from ``onset`` on ``loop: true`` with the label's
``kind``; a clean trace has every call ``loop: false``; ambiguous traces are left out
of the suite (they are counted as such).

τ-bench and ReAct (MIT) ship converted as package data (``data/real/real-dev.jsonl.gz``,
built by :func:`build_package_data`), so the suite runs without the corpora. Who&When
embeds GAIA answers and is never shipped: its traces are converted from a local copy
given as ``corpus_dir``.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import re
import warnings
from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterable

from detectors.protocol import UNRECORDED, Message, Observation, ToolCall
from scenarios.files import atomic_file
from scenarios.severity import SEVERITY_KEY
from scenarios.outcome import FAILURE, SECTION_OUTCOMES, UNKNOWN, call_at_step, from_reward, history_step, outcome_meta
from scenarios.trace import dumps_events, episode_events, loads_trace
from scenarios.tree import Episode, Label, ThinkNode, ToolNode

#: Suite names -> labels file in ``scenarios/data/real``. ``real-heldout-self``: the traces the
#: dev half leaves out, labelled blind for loopbench (most likely the maintainers' held-out
#: traces, with labels of ours); it measures, nothing is tuned against it (docs/traces.md).
SUITES = {"real-dev": "real-dev-labels.json", "real-heldout-self": "real-heldout-self-labels.json"}
#: Suites that measure and are not tuned on: ``tune`` and ``sweep`` say so when pointed at one.
MEASURE_ONLY = frozenset({"real-heldout-self"})
#: The converted traces shipped for each suite (τ-bench and ReAct only).
SHIPPED = {"real-dev": "real-dev.jsonl.gz", "real-heldout-self": "real-heldout-self.jsonl.gz"}

#: The severities proposed for each suite's loops (``scenarios.real_severity`` builds them).
SEVERITIES = {"real-dev": "real-dev-severity.json", "real-heldout-self": "real-heldout-self-severity.json"}

#: Labels-file source -> the family name the suite reports it under.
FAMILIES = {
    "tau-bench-airline-gpt4o": "tau_bench_airline",
    "reflexion-react-hotpotqa": "react_hotpotqa",
    "who-and-when/Hand-Crafted": "magentic_one",
    "who-and-when/Algorithm-Generated": "captain_agent",
}
#: Sources whose licence (MIT, no benchmark answers) lets them ship as package data.
SHIPPABLE = ("tau-bench-airline-gpt4o", "reflexion-react-hotpotqa")

#: What a call that ran but got no recorded result (a Magentic-One delegation nobody
#: answered) carries as its observation: every converter goes through :func:`_observation`.
NO_RESULT: Observation | None = UNRECORDED


class RealSuiteError(Exception):
    """A suite name, labels file or corpus that cannot be used at all: a one-line message."""


# -- the steps of one trace ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Call:
    tool: str
    args: dict[str, Any]
    result: str | None  # None: the call got no result
    # The message of the log's history it was made at (Who&When): where, not what, so not compared.
    turn: int | None = field(default=None, compare=False)


#: A step is a ``Call`` or a ``(role, text)`` message the agent saw or wrote.
Step = Call | tuple[str, str]


def calls_sha1(calls: Iterable[Call]) -> str:
    """The labels' hash of a call list (tool and arguments, not results)."""
    data = json.dumps([[c.tool, c.args] for c in calls], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(data.encode("utf-8")).hexdigest()


def result_sha1(result: str | None) -> str | None:
    return None if result is None else hashlib.sha1(result.encode("utf-8")).hexdigest()


def _calls(steps: Iterable[Step]) -> list[Call]:
    return [s for s in steps if isinstance(s, Call)]


# -- converters, one per source (rules: labels file ``sources``) ------------------------
def _tau_bench(path: Path) -> dict[Any, list[Step]]:
    """Record index -> steps. The system prompt (the policy wiki) is left out."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out: dict[Any, list[Step]] = {}
    for i, rec in enumerate(data):
        steps: list[Step] = []
        traj = rec["traj"]
        for j, msg in enumerate(traj):
            role = msg.get("role")
            if role in ("user", "assistant") and isinstance(msg.get("content"), str) and msg["content"]:
                steps.append((role, msg["content"]))
            if role != "assistant" or not msg.get("tool_calls"):
                continue
            # Results pair by position: the first later ``tool`` message (ids are reused).
            result = next((m.get("content") for m in traj[j + 1:] if m.get("role") == "tool"), None)
            for tc in msg["tool_calls"]:
                fn = tc["function"]
                try:
                    args = json.loads(fn["arguments"])
                except (TypeError, ValueError):
                    args = {"_raw": fn["arguments"]}
                steps.append(Call(fn["name"], args, result))
        out[i] = steps
    return out


_REACT_END = re.compile(r"^(Question: |BEGIN TRIAL \d+$|------------- BEGIN |#####)")
_REACT_ACTION = re.compile(r"^Action (\d+): (.*)$")
_REACT_OBS = re.compile(r"^Observation (\d+): ?(.*)$")
_REACT_STOP = re.compile(r"^(Thought \d+:|Action \d+:|Observation \d+:|Correct answer:|Reflections:|Question: )")
_REACT_CALL = re.compile(r"^([A-Za-z]+)\[(.*)\]$", re.S)
_REACT_TOOLS = {"search": "query", "lookup": "keyword", "finish": "answer"}
_REACT_THOUGHT = re.compile(r"^Thought \d+: ?(.*)$")


def react_call(text: str) -> tuple[str, dict[str, str]]:
    m = _REACT_CALL.match(text)
    if m and m.group(1).lower() in _REACT_TOOLS:
        return m.group(1).lower(), {_REACT_TOOLS[m.group(1).lower()]: m.group(2)}
    return "_invalid", {"raw": text}


def _react(path: Path) -> dict[Any, list[Step]]:
    """Ordinal of a ``Question: `` line -> steps (the question and the thoughts are messages)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("Question: ")]
    out: dict[Any, list[Step]] = {}
    for key, start in enumerate(starts):
        end = next((i for i in range(start + 1, len(lines)) if _REACT_END.match(lines[i])), len(lines))
        steps: list[Step] = [("user", lines[start][len("Question: "):])]
        i = start + 1
        while i < end:
            line = lines[i]
            if m := _REACT_THOUGHT.match(line):
                steps.append(("assistant", m.group(1)))
            elif m := _REACT_ACTION.match(line):
                tool, args = react_call(m.group(2))
                result = None
                k = i + 1
                while k < end and not _REACT_OBS.match(lines[k]) and not _REACT_ACTION.match(lines[k]):
                    k += 1
                if k < end and (o := _REACT_OBS.match(lines[k])):
                    body = [o.group(2)]
                    k += 1
                    while k < end and not _REACT_STOP.match(lines[k]):
                        body.append(lines[k])
                        k += 1
                    result = "\n".join(body).rstrip("\n")
                    i = k - 1
                steps.append(Call(tool, args, result))
            i += 1
        out[key] = steps
    return out


_DELEGATE = re.compile(r"^Orchestrator \(-> (.+)\)$")
_WEB_ACTIONS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = tuple(
    (re.compile(p, re.S), tool, names) for p, tool, names in (
        (r"^I typed '(.*?)' into the browser address bar\.", "visit_url", ("url",)),
        (r"^I typed '(.*?)' into the browser search bar\.", "web_search", ("query",)),
        (r"^I typed '(.*?)' into '(.*?)'\.(?=\s|$)", "type", ("text", "field")),
        (r"^I clicked the browser back button\.", "back", ()),
        (r"^I clicked the control\.", "click", ("target",)),
        (r"^I clicked '(.*?)'\.(?=\s|$)", "click", ("target",)),
        (r"^I scrolled (up|down) one page in the browser\.", "scroll", ("direction",)),
        (r"^I input '(.*?)'\.(?=\s|$)", "input", ("text",)),
    )
)


def _web_action(content: str) -> Call | None:
    for pattern, tool, names in _WEB_ACTIONS:
        if m := pattern.match(content):
            groups = m.groups() or ("",) * len(names)  # "the control" has an empty target
            return Call(tool, dict(zip(names, groups)), content[m.end():].lstrip("\n"))
    return None


def _magentic_one(path: Path) -> dict[Any, list[Step]]:
    history = json.loads(path.read_text(encoding="utf-8"))["history"]
    steps: list[Step] = []
    for j, msg in enumerate(history):
        role, content = msg.get("role", ""), msg.get("content") or ""
        if m := _DELEGATE.match(role):
            agent = m.group(1)
            reply = None
            for later in history[j + 1:]:
                if _DELEGATE.match(later.get("role", "")):
                    break  # re-delegated before any reply: this one got none
                if later.get("role") == agent:
                    reply = later.get("content") or ""
                    break
            steps.append(Call(agent, {"instruction": content}, reply, j))
        elif role == "WebSurfer" and (call := _web_action(content)) is not None:
            steps.append(replace(call, turn=j))
        elif role == "human":
            steps.append(("user", content))
        elif role.startswith("Orchestrator"):
            steps.append(("assistant", content))
    return {None: steps}


_FENCE = re.compile(r"```([^\n`]*)\n(.*?)```", re.S)
_TERMINAL = "Computer_terminal"


def _captain_agent(path: Path) -> dict[Any, list[Step]]:
    history = json.loads(path.read_text(encoding="utf-8"))["history"]
    steps: list[Step] = []
    for j, msg in enumerate(history):
        content = msg.get("content") or ""
        if msg.get("name") == _TERMINAL:
            continue  # a reply is the result of the call before it, or unanswered chatter
        steps.append(("user" if j == 0 else "assistant", content))
        blocks = _FENCE.findall(content)
        nxt = history[j + 1] if j + 1 < len(history) else None
        if blocks and nxt is not None and nxt.get("name") == _TERMINAL:
            info = blocks[0][0].strip().lower()
            code = "\n\n".join(body.strip("\n") for _, body in blocks)
            steps.append(Call(f"exec.{info}" if info else "exec", {"code": code}, nxt.get("content") or "", j))
    return {None: steps}


#: source -> converter of one file into {trace_key: steps}
CONVERTERS: dict[str, Callable[[Path], dict[Any, list[Step]]]] = {
    "tau-bench-airline-gpt4o": _tau_bench,
    "reflexion-react-hotpotqa": _react,
    "who-and-when/Hand-Crafted": _magentic_one,
    "who-and-when/Algorithm-Generated": _captain_agent,
}


# -- how each run ended (SPEC §11), read from the same files ------------------------------
#: (outcome, history index of the annotated mistake or None)
RunEnd = tuple[str, int | None]


def _tau_bench_ends(path: Path) -> dict[Any, RunEnd]:
    """Record index -> its reward as an outcome (1 = solved)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    return {i: (from_reward(rec.get("reward")), None) for i, rec in enumerate(data)}


_REACT_SECTION = re.compile(r"^-+ BEGIN (CORRECT|INCORRECT|HALTED) AGENTS -+\s*$")


def _react_ends(path: Path) -> dict[Any, RunEnd]:
    """Ordinal of a ``Question: `` line -> the outcome of the section it is in."""
    out: dict[Any, RunEnd] = {}
    section = None
    for line in path.read_text(encoding="utf-8").split("\n"):
        if m := _REACT_SECTION.match(line):
            section = m.group(1).lower()
        elif line.startswith("BEGIN TRIAL "):
            section = None
        elif line.startswith("Question: "):
            out[len(out)] = (SECTION_OUTCOMES.get(section or "", UNKNOWN), None)
    return out


def _who_and_when_ends(path: Path) -> dict[Any, RunEnd]:
    """Who&When collects failed runs, each annotated with the history step that made it fail."""
    step = history_step(json.loads(path.read_text(encoding="utf-8")).get("mistake_step"))
    return {None: (FAILURE if step is not None else UNKNOWN, step)}


ENDS: dict[str, Callable[[Path], dict[Any, RunEnd]]] = {
    "tau-bench-airline-gpt4o": _tau_bench_ends,
    "reflexion-react-hotpotqa": _react_ends,
    "who-and-when/Hand-Crafted": _who_and_when_ends,
    "who-and-when/Algorithm-Generated": _who_and_when_ends,
}


@lru_cache(maxsize=8)
def _converted(source: str, path: str) -> dict[Any, list[Step]]:
    return CONVERTERS[source](Path(path))


@lru_cache(maxsize=8)
def _ends(source: str, path: str) -> dict[Any, RunEnd]:
    return ENDS[source](Path(path))


def run_end_meta(end: RunEnd | None, steps: list[Step]) -> dict[str, Any]:
    """An episode's outcome meta: the outcome, and the annotated mistake as a tool-call index."""
    if end is None:
        return outcome_meta(UNKNOWN)
    outcome, mistake = end
    k = None if mistake is None else call_at_step((c.turn for c in _calls(steps)), mistake)
    return outcome_meta(outcome, k)


# -- labels -> episodes ----------------------------------------------------------------
def _observation(result: str | None) -> Observation | None:
    return NO_RESULT if result is None else Observation(result, result.startswith("Error:"))


def episode_id(trace: dict) -> str:
    """A readable id from the label's locator: family plus where the trace sits in its file."""
    fam, loc = FAMILIES[trace["source"]], trace.get("locator") or {}
    if trace["source"] == "tau-bench-airline-gpt4o":
        return f"{fam}:task{loc.get('task_id')}_trial{loc.get('trial')}"
    if trace["source"] == "reflexion-react-hotpotqa":
        return f"{fam}:{Path(trace['file']).parent.name}:L{loc.get('line')}"
    return f"{fam}:{Path(trace['file']).stem}"


def labelled_episode(trace: dict, steps: list[Step], end: RunEnd | None = None) -> Episode:
    """The episode of one label entry: messages and calls in order, calls labelled (SPEC §6),
    and how the run ended (``end``, see :data:`ENDS`) in its meta."""
    onset = trace["onset"] if trace["loops"] else None
    meta = {"source": trace["source"], "file": trace["file"], "trace_key": trace["trace_key"],
            "locator": trace.get("locator") or {}, "calls_sha1": trace["calls_sha1"], **run_end_meta(end, steps)}
    ep = Episode(episode_id(trace), family=FAMILIES[trace["source"]], meta=meta)
    parent: str | None = None
    k = 0
    for step in steps:
        nid = f"n{len(ep.nodes)}"
        if isinstance(step, Call):
            label = Label(True, trace["kind"]) if onset is not None and k >= onset else Label(False)
            ep.add(ToolNode(nid, parent, ToolCall(step.tool, step.args, f"c{k}"), _observation(step.result), label))
            k += 1
        else:
            ep.add(ThinkNode(nid, parent, Message(step[0], step[1])))
        parent = nid
    return ep


def episode_calls(ep: Episode) -> list[Call]:
    """An episode's calls as the labels hash them (results: the observation text, if any)."""
    out = []
    for n in ep.tool_nodes():
        obs = n.observation
        out.append(Call(n.call.tool, dict(n.call.args), None if obs is None or obs.content is None else obs.content))
    return out


def mismatch(trace: dict, calls: list[Call]) -> str | None:
    """Why ``calls`` are not the trace ``trace`` labels, or None when they are."""
    got = calls_sha1(calls)
    if got != trace["calls_sha1"]:
        return (f"calls_sha1 {got[:12]} != label {trace['calls_sha1'][:12]} "
                f"({len(calls)} calls converted, {trace['n_calls']} labelled)")
    results = [result_sha1(c.result) for c in calls]
    if results != trace["result_sha1"]:
        bad = next(i for i, (a, b) in enumerate(zip(results, trace["result_sha1"])) if a != b)
        return f"calls match but result {bad} differs from the labelled one"
    return None


def where(trace: dict) -> str:
    loc = trace.get("locator") or {}
    extra = ", ".join(f"{k}={v}" for k, v in loc.items() if k != "question_core")
    key = "" if trace["trace_key"] is None else f"#{trace['trace_key']}"
    return f"{trace['file']}{key} ({extra})"


@dataclass
class SuiteLoad:
    """What loading a real suite gave: the episodes and an account of every label."""

    episodes: list[Episode] = field(default_factory=list)
    matched: int = 0
    ambiguous: int = 0
    problems: list[str] = field(default_factory=list)  # labels that could not be matched, one line each
    skipped_sources: dict[str, int] = field(default_factory=dict)  # source -> labels not loaded (no corpus)

    @property
    def unmatched(self) -> int:
        return len(self.problems)


#: The fields of one trace's label that loading relies on, and the types they must have.
LABEL_FIELDS: dict[str, tuple[type, ...]] = {
    "source": (str,), "file": (str,), "loops": (bool,), "onset": (int, type(None)), "kind": (str, type(None)),
    "ambiguous": (bool,), "calls_sha1": (str,), "result_sha1": (list,), "n_calls": (int,),
}


def check_labels(doc: Any, path: str | Path) -> None:
    """Raise a one-line :class:`RealSuiteError` naming the first field of a labels file (the
    schema of the corpora's ``dev.json``) that loading could not use."""
    if not isinstance(doc, dict) or not isinstance(doc.get("traces"), list):
        raise RealSuiteError(f"{path}: not a labels file (expected an object with a 'traces' list, "
                             "the schema of the corpora's dev.json)")
    for i, trace in enumerate(doc["traces"]):
        if not isinstance(trace, dict):
            raise RealSuiteError(f"{path}: traces[{i}] is not an object")
        for name, types in LABEL_FIELDS.items():
            if name not in trace:
                raise RealSuiteError(f"{path}: traces[{i}]: missing field {name!r}")
            value = trace[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                raise RealSuiteError(f"{path}: traces[{i}].{name} must be {want}, not {value!r}")
        if "trace_key" not in trace:
            raise RealSuiteError(f"{path}: traces[{i}]: missing field 'trace_key'")
        if trace["loops"] and not trace["ambiguous"] and trace["onset"] is None:
            raise RealSuiteError(f"{path}: traces[{i}]: loops is true but onset is null")
        if trace["onset"] is not None and not 0 <= trace["onset"] < trace["n_calls"]:
            raise RealSuiteError(f"{path}: traces[{i}].onset {trace['onset']} is outside its {trace['n_calls']} calls")


def load_labels(name: str = "real-dev", labels_path: str | Path | None = None) -> dict:
    if labels_path is not None:
        path = Path(labels_path)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise RealSuiteError(f"{path}: cannot read labels ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise RealSuiteError(f"{path}: labels are not valid JSON ({exc})") from None
        check_labels(doc, path)
        return doc
    if name not in SUITES:
        raise RealSuiteError(f"unknown real suite {name!r}; known: {', '.join(SUITES)}")
    return json.loads(_data(SUITES[name]).read_text(encoding="utf-8"))


def _data(filename: str):
    return resources.files("scenarios").joinpath("data/real", filename)


def _from_corpus(labels: dict, corpus_dir: Path, sources: Iterable[str], out: SuiteLoad) -> None:
    wanted = set(sources)
    for i, trace in enumerate(labels["traces"]):
        source = trace["source"]
        if source not in FAMILIES:
            out.problems.append(f"traces[{i}] ({trace['file']}): source {source!r} is not a corpus of this suite "
                                f"({', '.join(FAMILIES)}; other traces: `loopbench replay --format F --labels FILE`); "
                                "label not used")
            continue
        if source not in wanted:
            continue
        if trace["ambiguous"]:
            out.ambiguous += 1
            continue
        path = corpus_dir / trace["file"]
        try:
            steps = _converted(source, str(path)).get(trace["trace_key"])
        except OSError as exc:
            out.problems.append(f"{where(trace)}: cannot read {path} ({exc.strerror or exc}); label not used")
            continue
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            out.problems.append(f"{where(trace)}: {path} does not convert ({type(exc).__name__}: {exc}); label not used")
            continue
        if steps is None:
            out.problems.append(f"{where(trace)}: no trace with key {trace['trace_key']!r} in {path}; label not used")
            continue
        why = mismatch(trace, _calls(steps))
        if why:
            out.problems.append(f"{where(trace)}: {why}; label not used")
            continue
        out.episodes.append(labelled_episode(trace, steps, _ends(source, str(path)).get(trace["trace_key"])))
        out.matched += 1


def _from_package(name: str, labels: dict, out: SuiteLoad) -> None:
    by_id = {episode_id(t): t for t in labels["traces"] if t["source"] in SHIPPABLE}
    for t in by_id.values():
        out.ambiguous += t["ambiguous"]
    read = loads_trace(gzip.decompress(_data(SHIPPED[name]).read_bytes()), name=SHIPPED[name])
    out.problems.extend(f"shipped {SHIPPED[name]}: {p}" for p in read.problems)
    seen = set()  # episode ids met in the data, used or reported
    for ep in read.episodes:
        trace = by_id.get(ep.id)
        seen.add(ep.id)
        if trace is None or trace["ambiguous"]:
            out.problems.append(f"shipped {SHIPPED[name]}: episode {ep.id} has no usable label; not used")
            continue
        why = mismatch(trace, episode_calls(ep))
        if why:
            out.problems.append(f"shipped {SHIPPED[name]}: {where(trace)}: {why}; label not used")
            continue
        out.episodes.append(ep)
        out.matched += 1
    for eid, t in by_id.items():
        if eid not in seen and not t["ambiguous"]:
            out.problems.append(f"{where(t)}: labelled but missing from shipped {SHIPPED[name]}; label not used")


def load_suite(name: str = "real-dev", corpus_dir: str | Path | None = None, *,
               labels_path: str | Path | None = None, from_corpus_only: bool = False) -> SuiteLoad:
    """Episodes of a real suite with an account of every label (see :class:`SuiteLoad`).

    τ-bench and ReAct come from the package data (or, with ``from_corpus_only``, are
    converted from ``corpus_dir`` too); Who&When traces are converted from ``corpus_dir``
    and counted in ``skipped_sources`` when it is not given.
    """
    labels = load_labels(name, labels_path)
    out = SuiteLoad()
    local = [s for s in FAMILIES if s not in SHIPPABLE]
    if from_corpus_only:
        if corpus_dir is None:
            raise RealSuiteError("from_corpus_only needs corpus_dir")
        local = list(FAMILIES)
    else:
        _from_package(name, labels, out)
    if corpus_dir is not None:
        corpus = Path(corpus_dir)
        if not corpus.is_dir():
            raise RealSuiteError(f"{corpus}: corpus directory does not exist")
        _from_corpus(labels, corpus, local, out)
    else:
        for t in labels["traces"]:
            if t["source"] in local:
                out.skipped_sources[t["source"]] = out.skipped_sources.get(t["source"], 0) + 1
    order = {s: i for i, s in enumerate(FAMILIES)}
    out.episodes.sort(key=lambda e: (order[e.meta["source"]], e.id))
    if labels_path is None:
        attach_severities(name, out.episodes, out.problems)
    return out


def label_onset(ep: Episode) -> int | None:
    """The labelled onset of a real episode: its first call labelled ``loop: true``."""
    return next((i for i, n in enumerate(ep.tool_nodes()) if n.label is not None and n.label.loop), None)


def load_severities(name: str) -> dict[str, dict]:
    """The suite's proposed severities by ``calls_sha1`` (empty when it has none)."""
    if name not in SEVERITIES or not _data(SEVERITIES[name]).is_file():
        return {}
    doc = json.loads(_data(SEVERITIES[name]).read_text(encoding="utf-8"))
    return {t["calls_sha1"]: t for t in doc["traces"]}


def attach_severities(name: str, episodes: Iterable[Episode], problems: list[str]) -> None:
    """Put each looping episode's proposed severity into ``meta["severity"]`` (SPEC §11).

    The hand labels mark every call from the onset on, so they do not say how long a loop
    lasts; the severities file does, for the onset the labels name. An entry proposed for
    another onset is reported and left out, never applied to a loop it was not judged on.
    """
    found = load_severities(name)
    if not found:
        return
    for ep in episodes:
        onset = label_onset(ep)
        entry = found.get(ep.meta.get("calls_sha1", ""))
        if onset is None or entry is None:
            continue
        if entry.get("onset") != onset:
            problems.append(f"{SEVERITIES[name]}: episode {ep.id}: severity proposed for onset {entry.get('onset')}, "
                            f"the label's onset is {onset}; not used")
            continue
        ep.meta[SEVERITY_KEY] = {k: entry[k] for k in ("persistence", "to_end", "severity", "source")}


class RealSuiteWarning(UserWarning):
    """A label that could not be matched to its trace (it is left out, never misapplied)."""


def load_real_suite(name: str = "real-dev", corpus_dir: str | Path | None = None,
                    problems: list[str] | None = None, labels_path: str | Path | None = None) -> list[Episode]:
    """The labelled episodes of real suite ``name`` (families: ``tau_bench_airline``,
    ``react_hotpotqa``, and with ``corpus_dir`` ``magentic_one`` and ``captain_agent``).

    With ``labels_path`` (a labels file of the ``dev.json`` schema: another half, your own
    labels) every labelled trace is converted from ``corpus_dir``, which it then needs.
    Every label that cannot be matched to its trace goes to ``problems`` (one line
    each), or is warned about when ``problems`` is None.
    """
    if labels_path is not None and corpus_dir is None:
        raise RealSuiteError("a labels file needs the corpora its traces come from (corpus_dir)")
    load = load_suite(name, corpus_dir, labels_path=labels_path, from_corpus_only=labels_path is not None)
    if problems is not None:
        problems.extend(load.problems)
    else:
        for p in load.problems:
            warnings.warn(p, RealSuiteWarning, stacklevel=2)
    return load.episodes


# -- building the package data -----------------------------------------------------------
def build_package_data(corpus_dir: str | Path, out_dir: str | Path, name: str = "real-dev",
                       labels_path: str | Path | None = None) -> SuiteLoad:
    """Convert the shippable sources of ``corpus_dir`` and write ``<out_dir>/<SHIPPED[name]>``.

    The gzip header carries no timestamp, so the same corpus gives the same bytes.
    """
    labels = load_labels(name, labels_path)
    load = SuiteLoad()
    _from_corpus(labels, Path(corpus_dir), SHIPPABLE, load)
    load.episodes.sort(key=lambda e: (e.meta["source"] != SHIPPABLE[0], e.id))
    out = Path(out_dir) / SHIPPED[name]
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = b"".join(dumps_events(episode_events(ep)) for ep in load.episodes)
    with atomic_file(out, binary=True) as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                             compresslevel=9) as gz:
        gz.write(payload)
    return load


def _main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m scenarios.realsuite",
                                 description="Check real-suite labels against a corpus, or rebuild the shipped data.")
    ap.add_argument("command", choices=("check", "build"))
    ap.add_argument("--corpus", required=True, help="the corpora folder (e.g. ../shared/corpora/real)")
    ap.add_argument("--suite", default="real-dev", choices=sorted(SUITES), help="which shipped suite (default real-dev)")
    ap.add_argument("--labels", help="labels file (default: the suite's shipped copy)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "data" / "real"))
    args = ap.parse_args(argv)
    try:
        if args.command == "build":
            load = build_package_data(args.corpus, args.out, args.suite, labels_path=args.labels)
        else:
            load = load_suite(args.suite, corpus_dir=args.corpus, labels_path=args.labels, from_corpus_only=True)
    except RealSuiteError as exc:
        print(f"error: {exc}")
        return 2
    for p in load.problems:
        print(f"unmatched: {p}")
    fams: dict[str, int] = {}
    for ep in load.episodes:
        fams[ep.family] = fams.get(ep.family, 0) + 1
    print(f"matched {load.matched}, ambiguous {load.ambiguous}, unmatched {load.unmatched}; "
          + ", ".join(f"{k} {v}" for k, v in fams.items()))
    return 1 if load.problems else 0


if __name__ == "__main__":
    raise SystemExit(_main())
