"""Loops injected into clean real traces (SPEC §10): labelled loops in the distribution of real agents.

A clean trace (every call labelled ``loop: false``, or judged clean by the labeller of
:mod:`scenarios.labeling` when it has no labels) is copied up to an *insertion point* —
after a random tool call, at least the first — and then one injection follows, built from
the trace's own calls and results:

==========================  ================  ==========================================================
injection                   onset label kind  what is inserted
==========================  ================  ==========================================================
``stale``                   stale             an earlier call again, its result again
``cosmetic``                cosmetic          an earlier call with its arguments reformatted (case,
                                              quoting, whitespace, key order), its result again
``paraphrased``             paraphrased       an earlier call with a free-text argument reworded (the
                                              lexicon's rules, :func:`reword`), kept only when the
                                              bundled model puts it within ``PARAPHRASE_FLOOR`` cosine
``drift``                   drift             an earlier call with a number or date nudged, result unchanged
``cycle``                   cycle             the last two calls (A, B) again: A B A B
``no_progress``             no_progress       three new calls of a tool that failed before, with that
                                              failure (nothing new); the third is the onset
``reread_after_failed_      stale             a write of the trace that fails (a write error of the
write``                                       trace), then an earlier read, identical, identical result
``silent_redelegation``     stale/paraphrased a delegation of the trace again (reworded when it can be)
                                              that gets no reply (``detectors.protocol.unrecorded``)
==========================  ================  ==========================================================

Hard negatives, labelled clean: ``reread_after_write`` (an earlier read again right after a
successful write, returning the write's record), ``paging`` (a search or lookup again on its
next page, returning text the trace has not shown yet), ``retry_success`` (the next call of
the trace first fails with a transient error, then the trace's own call succeeds).

Where an injected call repeats an earlier one, its result is the earlier result with the
changed argument text put in where the result echoed it ("Could not find [X]").

Labels are exact by construction: the calls before the insertion point keep their
tool, arguments and results byte for byte; an injected loop's first redundant call is the
path's onset (every earlier call is the clean source's or a non-redundant injected call:
the failing write, the first two calls of a no-progress run). The rubric's conditions
are checked where they decide the label: no successful write between the repeated call
and its repeat, the repeated call is not a write that succeeded nor a note to self, and
:func:`scenarios.labeling.args_match` reads a cosmetic, paraphrased or drifted call as
that kind of re-issue. After the injection the trace ends (``END_SHARE`` of the time: a
loop that runs to the end, repeated until the trace is as long as its source, as a third of
the real ones do: docs/inject.md) or goes on with the source's remaining calls, labelled clean, up to the first one that would re-issue an injected call (that
one and the rest are dropped: the source never saw the injection, so its later calls
cannot be judged against it).

Where the loop falls is drawn as the hand-labelled loops of real-dev fall, on what a look
at a trace shows (the realism check, :mod:`scenarios.inject_realism`): the repeated call
is a failed one ``FAILED_SHARE`` of the time (a trace that has none gets no such
injection), the gap back to it follows ``GAP_WEIGHTS``. With ``anywhere`` (the CLI's
``--anywhere``, for a handful of traces) any repeatable call may be drawn, failed or not.

Everything is drawn from ``random.Random`` seeded by (seed, source trace id, kind):
the same seed gives the same output, and adding a trace does not change the others.
"""
from __future__ import annotations

import datetime as _dt
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Sequence

from detectors.protocol import Observation, ToolCall, result_known, unrecorded
from detectors.result_news import NOT_FOUND
from scenarios import labeling, realsuite
from scenarios.importers._common import unique_id
from scenarios.lexicon import FILLER, concepts_of
from scenarios.text import cosmetic_variants, paraphrase
from scenarios.tree import Episode, Label, ToolNode

#: Injected loops, in the order the CLI lists them.
LOOP_KINDS = ("stale", "cosmetic", "paraphrased", "drift", "cycle", "no_progress",
              "reread_after_failed_write", "silent_redelegation")
#: Hard negatives built from the same traces (labelled clean).
NEGATIVE_KINDS = ("reread_after_write", "paging", "retry_success")
KINDS = LOOP_KINDS + NEGATIVE_KINDS
#: The family an injected episode reports under: one per injection kind.
FAMILY_PREFIX = "inj_"
#: Meta key of an injected episode: which injection was made (kind, onset, source trace id, ...).
META_KEY = "injection"

#: Lowest cosine (the bundled model) between a free text and its rewording; below it the
#: rewording may have changed the intent, and it is rejected.
PARAPHRASE_FLOOR = 0.8
#: Share of injected episodes that end with the injected loop (a loop that runs to the end, as
#: long as the source trace: :func:`_run_to_end`); the others go on with the source's calls.
END_SHARE = 0.5
#: How many times the redundant call (or A-B pair) is repeated: drawn from these.
REPEATS = (1, 1, 2, 3)
#: Share of injected repeats that re-issue a failed call (an error, nothing found) where the
#: trace has one: about three in four of the 44 hand-labelled loop onsets of real-dev re-issue
#: a failed call, against 9% of the calls of its clean traces (agents come back to what did
#: not help). Drawn first, then the call: a weight on each call instead let the many
#: successful reads of a long trace outvote its few failures (31% of injected repeats).
FAILED_SHARE = 0.75
#: Relative weight of each gap (calls back to the call re-issued) when the repeated call is
#: drawn: the histogram of the 44 hand-labelled loop onsets of real-dev (26 at gap 1, 10 at
#: 2, 4 at 3, 2 at 4, 2 at 5), longer gaps at weight 1 (possible, rare).
GAP_WEIGHTS = {1: 26.0, 2: 10.0, 3: 4.0, 4: 2.0, 5: 2.0}
#: Rewordings tried per paraphrase before the kind is given up for that trace.
REWORD_TRIES = 8

#: Tools that end a run or talk to the model itself: never repeated as a loop.
_FINAL = re.compile(r"^(finish|final_answer|answer|submit|done|stop|respond)$", re.I)
_NOTE = re.compile(r"^(think|reflect|scratchpad|note|todo|plan)$", re.I)
#: A call that hands work to someone else (another agent, a human).
_DELEGATION = re.compile(r"transfer|delegat|hand_?off|assign|orchestrat|instruct|ask_|_agent|agent_|escalat", re.I)
#: Arguments that hold prose (an instruction, a query), by name.
_FREE_KEYS = frozenset(("query", "q", "prompt", "text", "message", "question", "instruction", "instructions", "task",
                        "description", "search", "search_query", "keyword", "keywords", "topic", "goal", "request",
                        "summary", "reason", "content"))
_SEARCHY = re.compile(r"search|lookup|find|list|query|browse|scroll", re.I)
_PAGE_KEYS = ("page", "offset", "start", "cursor", "skip", "page_number")
_LOOKUP_PAGE = re.compile(r"^\(Result (\d+)\s*/\s*(\d+)\)")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: Transient failures a retried call may meet first (what HTTP and RPC clients report).
TRANSIENT_ERRORS = ("Error: request timed out", "Error: service temporarily unavailable (503)",
                    "Error: connection reset by peer", "Error: rate limit exceeded, retry later (429)")
#: Word swaps of the rewording rules for prose the lexicon does not cover (general English).
_SYNONYMS = {
    "user": "customer", "customer": "user", "wants": "would like", "needs": "requires", "requires": "needs",
    "assistance": "help", "help": "assistance", "booking": "reservation", "reservation": "booking",
    "change": "modify", "modify": "change", "cancel": "call off", "refund": "reimbursement",
    "find": "look up", "information": "info", "info": "information", "about": "on", "regarding": "about",
    "please": "kindly", "request": "ask", "requesting": "asking for", "check": "verify", "verify": "check",
    "get": "obtain", "show": "give", "list": "enumerate", "search": "look for", "movie": "film", "film": "movie",
    "born": "birth", "birthplace": "place of birth", "also": "too", "the": "", "a": "",
}
_WORD = re.compile(r"\S+")
_PROSE = re.compile(r"[A-Za-z]{2,}")
#: Texts longer than this (words) are reworded by word swaps only: the lexicon's
#: re-rendering and moving comma-separated parts suit queries, not instructions.
SHORT_TEXT_WORDS = 8

#: cosine(text, candidates) -> one similarity per candidate.
Similarity = Callable[[str, Sequence[str]], list[float]]


class InjectError(Exception):
    """An input that cannot be used at all (unknown kind): a one-line message."""


@dataclass(frozen=True)
class Insert:
    """One injected call: what is called, what it returned, its label."""

    call: ToolCall
    obs: Observation
    label: Label


@dataclass
class Plan:
    """One injection into one trace."""

    at: int  # tool calls of the source kept before the injection
    calls: list[Insert]
    repeats: int | None = None  # the source call the onset re-issues (None: no single one)
    retry_next: bool = False  # the source's next call retries the last injected one (retry_success)


@dataclass
class InjectRun:
    """What an injection run gave: the episodes and why traces or kinds were left out."""

    episodes: list[Episode] = field(default_factory=list)
    sources: int = 0  # usable (clean) source traces
    skipped_traces: Counter = field(default_factory=Counter)  # reason -> traces
    not_injectable: Counter = field(default_factory=Counter)  # kind -> traces it could not be built from

    def per_kind(self) -> Counter:
        return Counter(ep.meta[META_KEY]["kind"] for ep in self.episodes)


def check_kinds(kinds: Iterable[str]) -> list[str]:
    out = list(dict.fromkeys(kinds))
    bad = [k for k in out if k not in KINDS]
    if bad:
        raise InjectError(f"unknown injection kind(s) {', '.join(bad)}; known: {', '.join(KINDS)}")
    if not out:
        raise InjectError("no injection kinds given")
    return out


# -- the model's similarity -------------------------------------------------------------
def model_similarity(embedder: Any = None) -> Similarity:
    """Cosine with the bundled sentence model: ``embedder`` (a
    :class:`detectors.embedding_model.Embedder`), by default the process-wide cached one."""
    from detectors.embedding_model import shared_embedder

    emb = embedder if embedder is not None else shared_embedder()

    def sim(text: str, candidates: Sequence[str]) -> list[float]:
        if not candidates:
            return []
        vecs = emb.embed([text, *candidates])
        return [float(v) for v in vecs[1:] @ vecs[0]]

    return sim


# -- reading a source trace ---------------------------------------------------------------
def failed(obs: Observation | None) -> bool:
    """A result that says the call got nothing: an error, an empty list, "not found"."""
    if obs is None or not result_known(obs):
        return False
    text = (obs.content or "").strip()
    # NOT_FOUND (what the detectors read as "nothing found") covers an empty list, null,
    # none and "no results"; an empty JSON object is a failure here too (a lookup that
    # returned no record), though to the detectors it is a result like any other.
    return obs.error or text == "{}" or bool(NOT_FOUND.match(text))


class Source:
    """A clean linear trace, read once for every kind."""

    def __init__(self, ep: Episode, anywhere: bool = False):
        self.ep = ep
        # The share of repeats drawn among failed calls (None: any call, ``anywhere``).
        self.failed_share = None if anywhere else FAILED_SHARE
        self.calls = ep.tool_nodes()
        n = len(self.calls)
        self.text = [c.observation.content if c.observation is not None and result_known(c.observation) else None
                     for c in self.calls]
        self.error = [bool(c.observation is not None and c.observation.error) for c in self.calls]
        self.failed = [failed(c.observation) for c in self.calls]
        self.write = [labeling.is_write(c.call) for c in self.calls]  # the labeller's rubric
        self.ok_write = [self.write[i] and self.text[i] is not None and not self.error[i] for i in range(n)]
        # The last successful write before each insertion point (a repeat across it is no loop).
        self.last_write = []
        last = -1
        for i in range(n + 1):
            self.last_write.append(last)
            if i < n and self.ok_write[i]:
                last = i

        # Nothing is inserted after a call that ends the run (a ReAct ``finish``).
        self.end = next((i for i, c in enumerate(self.calls) if _FINAL.match(c.call.tool)), n)

    def __len__(self) -> int:
        return len(self.calls)

    def points(self, first: int = 1) -> range:
        """Insertion points (tool calls kept before the injection), none after a final call."""
        return range(first, self.end + 1)

    def repeatable(self, j: int, at: int) -> bool:
        """Whether call ``j`` re-issued at insertion point ``at`` is redundant by the rubric:
        it got a result, asks the world something, is no successful write, and no
        successful write came after it."""
        c = self.calls[j]
        return (self.text[j] is not None and j > self.last_write[at] and not self.ok_write[j]
                and not _FINAL.match(c.call.tool) and not _NOTE.match(c.call.tool)
                and not (self.text[j] == "" and not self.error[j]))

    def fresh(self, i: int) -> bool:
        """Call ``i`` brought something: a result that is no failure (a no-progress run can start after it)."""
        return self.text[i] is not None and not self.failed[i]


def clean_reason(ep: Episode) -> str | None:
    """Why ``ep`` cannot be a source (``None``: it can): it branches, has no calls, or loops."""
    if not ep.tool_nodes():
        return "no tool calls"
    if not ep.is_linear():
        return "branching trace (inject works on linear traces)"
    tools = ep.tool_nodes()
    if all(n.label is not None for n in tools):
        return "labelled looping" if ep.looping else None
    labels, _ = labeling.propose(ep)
    return "judged looping by the labeller" if any(lab.loop for lab in labels.values()) else None


# -- argument edits -------------------------------------------------------------------------
def _echoed(obs: Observation, old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """The earlier result's text, with each changed top-level text argument put in where a
    failure echoed it ("Could not find [X]", "not available on date D": the first
    occurrence). A result that found something is what the tool returns whatever the
    request's wording, and is kept as it is."""
    result = obs.content
    if result is None or not failed(obs) or result.lstrip()[:1] in ("{", "["):
        return result
    for k, v in old.items():
        w = new.get(k)
        if isinstance(v, str) and isinstance(w, str) and v != w and len(v.strip()) >= 3 and v in result:
            result = result.replace(v, w, 1)
    return result


def _string_keys(args: dict[str, Any]) -> list[str]:
    return [k for k, v in args.items() if isinstance(v, str) and v.strip()]


def _reordered(args: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    keys = list(args)
    if len(keys) > 1:
        while True:
            rng.shuffle(keys)
            if keys != list(args):
                break
    return {k: args[k] for k in keys}


def _cosmetic_args(args: dict[str, Any], rng: random.Random) -> dict[str, Any] | None:
    keys = _string_keys(args)
    if not keys:
        return None
    k = rng.choice(keys)
    v = args[k]
    options = cosmetic_variants(v, rng, 4) + [f'"{v}"', f"'{v}'"]
    new = dict(args)
    new[k] = rng.choice(options)
    if rng.random() < 0.5:
        new = _reordered(new, rng)
    m = labeling.args_match(args, new)
    return new if m is not None and m[0] == "cosmetic" else None


def _free_text_key(args: dict[str, Any]) -> str | None:
    """The argument that holds prose: a free-text key, or the longest multi-word string."""
    best = None
    for k, v in args.items():
        if not isinstance(v, str) or labeling.looks_like_code(v) or len(_PROSE.findall(v)) < 2:
            continue
        if k.lower() in _FREE_KEYS:
            return k
        if best is None or len(v) > len(args[best]):
            best = k
    return best


def reword(text: str, rng: random.Random) -> str:
    """A rewording of ``text`` by the project's rules: the lexicon's paraphrases
    (:func:`scenarios.text.paraphrase`) for a short query that names the lexicon's
    concepts; otherwise word swaps from a small table, and for a short text filler words
    added, a comma-separated part moved or brackets and quotes dropped."""
    words = _WORD.findall(text)
    short = len(words) <= SHORT_TEXT_WORDS
    if short and concepts_of(text):
        return paraphrase(text, rng)
    for _ in range(rng.choice((1, 2)) if short else rng.choice((2, 3, 4))):
        r = rng.random()
        swaps = [i for i, w in enumerate(words) if w.lower().strip(",.") in _SYNONYMS]
        if swaps and (r < 0.35 or not short):
            i = rng.choice(swaps)
            w = words[i]
            core = w.lower().strip(",.")
            words[i] = w.lower().replace(core, _SYNONYMS[core]) if _SYNONYMS[core] else ""
        elif not short:
            break
        elif r < 0.55 and "," in text and len(words) > 2:
            parts = [p.strip() for p in " ".join(words).split(",") if p.strip()]
            rng.shuffle(parts)
            words = " ".join(parts).split()
        elif r < 0.7 and any(ch in text for ch in "()[]\"'"):
            words = [w.strip("()[]\"'") for w in words]
        else:
            words.insert(rng.choice((0, len(words))), rng.choice(FILLER))
        words = [w for w in words if w]
    return " ".join(words)


def _paraphrased_args(args: dict[str, Any], rng: random.Random, sim: Similarity) -> dict[str, Any] | None:
    key = _free_text_key(args)
    if key is None:
        return None
    text = args[key]
    cands = []
    for _ in range(REWORD_TRIES):
        cand = reword(text, rng)
        new = dict(args)
        new[key] = cand
        m = labeling.args_match(args, new)
        if m is not None and m[0] == "paraphrased" and cand not in cands:
            cands.append(cand)
    if not cands:
        return None
    for cand, s in zip(cands, sim(text, cands)):
        if s >= PARAPHRASE_FLOOR:
            new = dict(args)
            new[key] = cand
            return new
    return None


def _nudged(value: Any, step: int) -> Any:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value + step
    if isinstance(value, float):
        return round(value + step, 6)
    if isinstance(value, str) and _DATE.match(value):
        try:
            return (_dt.date.fromisoformat(value) + _dt.timedelta(days=step)).isoformat()
        except ValueError:
            return None
    return None


def _drifted_args(args: dict[str, Any], rng: random.Random, step: int) -> dict[str, Any] | None:
    keys = [k for k, v in args.items() if _nudged(v, 1) is not None]
    rng.shuffle(keys)
    for k in keys:
        new = dict(args)
        new[k] = _nudged(args[k], step)
        m = labeling.args_match(args, new)
        if m is not None and m[0] == "drift":
            return new
    return None


# -- choosing where ---------------------------------------------------------------------------
def _pick_repeat(src: Source, rng: random.Random, ok: Callable[[int], bool] = lambda j: True,
                 ok_at: Callable[[int], bool] = lambda at: True, any_call: bool = False
                 ) -> tuple[int, int] | None:
    """An insertion point and an earlier call to repeat there, drawn as real loops fall
    (bench/bench_inject_realism.py measures how close): first whether a failed call is
    repeated (the source's ``failed_share``; ``any_call``: either), then the point,
    uniformly among those with such a call before them, then the call by the gap back to
    it (``GAP_WEIGHTS``).
    A trace without such a call gives ``None``: drawing a failure that the trace does not
    have would skew the injected loops towards the successful reads real loops seldom
    repeat. ``ok(j)`` is asked lazily, only of the calls drawn (it may be costly: a
    rewording checked by the model), and once per call."""
    points = {at: [j for j in range(at) if src.repeatable(j, at)] for at in src.points() if ok_at(at)}
    points = {at: js for at, js in points.items() if js}
    want_failed = _want_failed(src, rng) if not any_call else None
    verdict: dict[int, bool] = {}
    while points:
        wanted = {at: [j for j in js if want_failed in (None, src.failed[j])] for at, js in points.items()}
        wanted = {at: js for at, js in wanted.items() if js}
        if not wanted:
            return None
        at = rng.choice(sorted(wanted))
        js = wanted[at]
        j = rng.choices(js, weights=[GAP_WEIGHTS.get(at - j, 1.0) for j in js])[0]
        if j not in verdict:
            verdict[j] = ok(j)
        if verdict[j]:
            return at, j
        points = {a: [x for x in xs if x != j] for a, xs in points.items()}
        points = {a: xs for a, xs in points.items() if xs}
    return None


def _want_failed(src: Source, rng: random.Random) -> bool | None:
    """Whether the call repeated is to be a failed one (``None``: either)."""
    return None if src.failed_share is None else rng.random() < src.failed_share


def _copy(src: Source, j: int, args: dict[str, Any] | None = None) -> ToolCall:
    c = src.calls[j].call
    return ToolCall(c.tool, dict(c.args) if args is None else args)


def _loop(call: ToolCall, obs: Observation, kind: str) -> Insert:
    return Insert(call, obs, Label(True, kind))


def _clean(call: ToolCall, obs: Observation) -> Insert:
    return Insert(call, obs, Label(False, None))


# -- the kinds ------------------------------------------------------------------------------------
def _stale(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    pick = _pick_repeat(src, rng)
    if pick is None:
        return None
    at, j = pick
    obs = src.calls[j].observation
    return Plan(at, [_loop(_copy(src, j), obs, "stale") for _ in range(rng.choice(REPEATS))], repeats=j)


def _edited_repeat(src: Source, rng: random.Random, kind: str, edit: Callable[[dict, int], dict | None]) -> Plan | None:
    """A repeat of an earlier call whose arguments ``edit`` changes (``None``: it cannot)."""
    first: dict[int, dict | None] = {}

    def editable(j: int) -> bool:
        first[j] = edit(src.calls[j].call.args, 1)
        return first[j] is not None

    pick = _pick_repeat(src, rng, editable)
    if pick is None:
        return None
    at, j = pick
    old = src.calls[j].call.args
    obs = src.calls[j].observation
    out = []
    for k in range(rng.choice(REPEATS)):
        args = first[j] if k == 0 else edit(old, k + 1)
        if args is None:
            break
        content = _echoed(obs, old, args)
        out.append(_loop(_copy(src, j, args), Observation(content, obs.error), kind))
    return Plan(at, out, repeats=j)


def _cosmetic(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    return _edited_repeat(src, rng, "cosmetic", lambda a, k: _cosmetic_args(a, rng))


def _paraphrased(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    return _edited_repeat(src, rng, "paraphrased", lambda a, k: _paraphrased_args(a, rng, sim))


def _drift(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    sign = rng.choice((1, -1))
    return _edited_repeat(src, rng, "drift", lambda a, k: _drifted_args(a, rng, sign * k))


def _cycle(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    points = [at for at in src.points(2)
              if src.repeatable(at - 2, at) and src.repeatable(at - 1, at)
              and (src.calls[at - 2].call.tool, src.calls[at - 2].call.args)
              != (src.calls[at - 1].call.tool, src.calls[at - 1].call.args)]
    # As for a single repeat: a cycle over a failure where real loops are (FAILED_SHARE).
    want_failed = _want_failed(src, rng)
    points = [at for at in points if want_failed in (None, src.failed[at - 2] or src.failed[at - 1])]
    if not points:
        return None
    at = rng.choice(points)
    a, b = at - 2, at - 1
    out = []
    for _ in range(rng.choice(REPEATS)):
        out += [_loop(_copy(src, a), src.calls[a].observation, "cycle"),
                _loop(_copy(src, b), src.calls[b].observation, "cycle")]
    return Plan(at, out, repeats=a)


def _vocabulary(src: Source) -> list[str]:
    """Short texts the trace itself offers as other things to try: names quoted in its
    prose results (a search's "Similar:" titles) and its prose arguments."""
    seen: dict[str, None] = {}
    for i, c in enumerate(src.calls):
        text = src.text[i]
        if text and text.lstrip()[:1] not in ("{", "["):
            for item in re.findall(r"""['"]([^'"\n\[\]]{3,80})['"]""", text[:4000]):
                seen.setdefault(item.strip(), None)
        for v in c.call.args.values():
            if isinstance(v, str) and 3 <= len(v) <= 80 and "\n" not in v and _PROSE.search(v):
                seen.setdefault(v.strip(), None)
    return list(seen)


def _no_progress(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    """Three calls in a row that fail as a call of the trace failed before: each a new
    request in prose (not another id or item: that is fan-out), none bringing anything new."""
    vocab = _vocabulary(src)
    points = [(at, f) for at in src.points() if src.fresh(at - 1)
              for f in range(at) if src.failed[f] and _free_text_key(src.calls[f].call.args)
              and f > src.last_write[at] and not src.write[f]]
    rng.shuffle(points)
    want = 3 + rng.choice((0, 0, 1))
    for at, f in points[:6]:
        base = src.calls[f]
        key = _free_text_key(base.call.args)
        earlier = [c.call.args for c in src.calls[:at] if c.call.tool == base.call.tool]
        pool = [v for v in vocab if v != base.call.args[key]]
        rng.shuffle(pool)
        made: list[dict] = []
        for v in pool:
            args = dict(base.call.args)
            args[key] = v
            if all(labeling.args_match(e, args) is None for e in earlier + made):
                made.append(args)
                if len(made) == want:
                    break
        if len(made) < 3:
            continue
        out = []
        for k, args in enumerate(made):
            obs = Observation(_echoed(base.observation, base.call.args, args), base.observation.error)
            call = ToolCall(base.call.tool, args)
            out.append(_loop(call, obs, "no_progress") if k >= 2 else _clean(call, obs))
        return Plan(at, out, repeats=None)
    return None


def _write_error(src: Source, tool: str) -> str | None:
    """The trace's own error for a write: of this tool if it has one, else of any write, else any error."""
    for pred in (lambda i: src.calls[i].call.tool == tool and src.write[i], lambda i: src.write[i], lambda i: True):
        for i in range(len(src)):
            if src.error[i] and src.text[i] and pred(i):
                return src.text[i]
    return None


def _reread_after_failed_write(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    writes = [i for i in range(len(src)) if src.write[i] and not _FINAL.match(src.calls[i].call.tool)]
    if not writes:
        return None
    w = rng.choice(writes)
    error = _write_error(src, src.calls[w].call.tool)
    if error is None:
        return None
    wcall = src.calls[w].call

    def new_write(at: int) -> bool:
        """The write was not issued before (else its failing repeat would be the onset)."""
        return all(labeling.args_match(c.call.args, wcall.args) is None for c in src.calls[:at] if c.call.tool == wcall.tool)

    # The read is repeated because of the failed write before it, not its own failure.
    pick = _pick_repeat(src, rng, lambda j: not src.write[j], new_write, any_call=True)
    if pick is None:
        return None
    at, j = pick
    return Plan(at, [_clean(ToolCall(wcall.tool, dict(wcall.args)), Observation(error, True)),
                     _loop(_copy(src, j), src.calls[j].observation, "stale")], repeats=j)


def _silent_redelegation(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    def delegation(j: int) -> bool:
        c = src.calls[j].call
        return bool(_DELEGATION.search(c.tool)) or (_free_text_key(c.args) or "").lower() in ("instruction", "instructions",
                                                                                              "task", "request")
    # A delegation is a write when it succeeds (it hands the work on); its own success
    # does not make its repeat news, so it may be repeated while no other write came after.
    delegations = [j for j in range(len(src)) if delegation(j) and src.text[j] is not None and not src.error[j]]
    points = []
    for at in src.points():
        js = [j for j in delegations if j < at and j >= src.last_write[at]]  # no other write since
        if js:
            points.append((at, js))
    if not points:
        return None
    at, js = rng.choice(points)
    j = rng.choice(js)
    args = _paraphrased_args(src.calls[j].call.args, rng, sim)
    kind = "paraphrased" if args is not None else "stale"
    return Plan(at, [_loop(_copy(src, j, args), unrecorded(), kind)], repeats=j)


def _reread_after_write(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    writes = [w for w in range(src.end) if src.ok_write[w] and not _DELEGATION.search(src.calls[w].call.tool)]
    rng.shuffle(writes)
    for w in writes:
        wvals = {v for v in src.calls[w].call.args.values() if isinstance(v, (str, int)) and not isinstance(v, bool)}
        reads = [j for j in range(w) if not src.write[j] and src.text[j] is not None and not src.error[j]
                 and not _NOTE.match(src.calls[j].call.tool) and not _FINAL.match(src.calls[j].call.tool)]
        related = [j for j in reads if wvals & set(src.calls[j].call.args.values())]
        if not (related or reads):
            continue
        j = rng.choice(related or reads)
        record = src.text[w] if j in related and _same_record(src.text[j], src.text[w]) else src.text[j]
        return Plan(w + 1, [_clean(_copy(src, j), Observation(record, False))], repeats=j)
    return None


def _same_record(read: str, written: str) -> bool:
    """Whether a write returned the record a read returns (the same JSON object keys): then
    the read after the write returns the written record."""
    try:
        a, b = json.loads(read), json.loads(written)
    except ValueError:
        return False
    return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()


def _paging(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    """A search or lookup again on its next page, with text from a later result of the
    trace (the agent has not seen it yet): paging that brings new text."""
    cands = []
    for at in src.points():
        seen = set(src.text[:at])
        later_by_tool: dict[str, list[int]] = {}
        for j in range(at):
            c = src.calls[j].call
            if not (src.text[j] and not src.error[j] and _SEARCHY.search(c.tool) and not src.write[j]):
                continue
            later = later_by_tool.get(c.tool)
            if later is None:
                later = later_by_tool[c.tool] = [
                    i for i in range(at, len(src)) if src.calls[i].call.tool == c.tool and src.text[i]
                    and not src.failed[i] and len(src.text[i]) >= 20 and src.text[i] not in seen]
            if later:
                cands.append((at, j, later))
    if not cands:
        return None
    at, j, later = rng.choice(cands)
    c = src.calls[j].call
    text = src.text[rng.choice(later)]
    m = _LOOKUP_PAGE.match(src.text[j])
    args = dict(c.args)
    if m and int(m.group(1)) < int(m.group(2)):
        # A stateful lookup pages with the same arguments: the next match.
        text = f"(Result {int(m.group(1)) + 1} / {m.group(2)}) {text}"
    else:
        key = next((k for k in _PAGE_KEYS if isinstance(args.get(k), int) and not isinstance(args.get(k), bool)), None)
        if key is None:
            args["page"] = 2
        else:
            args[key] = args[key] + (10 if key in ("offset", "start", "skip") else 1)
    return Plan(at, [_clean(ToolCall(c.tool, args), Observation(text, False))], repeats=j)


def _retry_success(src: Source, rng: random.Random, sim: Similarity) -> Plan | None:
    points = [at for at in src.points() if at < len(src) and src.fresh(at - 1) and src.fresh(at)
              and not _NOTE.match(src.calls[at].call.tool) and not _FINAL.match(src.calls[at].call.tool)]
    if not points:
        return None
    at = rng.choice(points)
    error = rng.choice(TRANSIENT_ERRORS)
    return Plan(at, [_clean(_copy(src, at), Observation(error, True))], repeats=None, retry_next=True)


BUILDERS: dict[str, Callable[[Source, random.Random, Similarity], Plan | None]] = {
    "stale": _stale, "cosmetic": _cosmetic, "paraphrased": _paraphrased, "drift": _drift, "cycle": _cycle,
    "no_progress": _no_progress, "reread_after_failed_write": _reread_after_failed_write,
    "silent_redelegation": _silent_redelegation, "reread_after_write": _reread_after_write, "paging": _paging,
    "retry_success": _retry_success,
}


def _run_to_end(src: Source, plan: Plan, kind: str) -> Plan:
    """A loop that ends its trace goes on until the trace is as long as its source: the agent
    spends the calls it had left (every hand-labelled loop of real-dev runs to the end of its
    trace, most of them to the corpus's step limit). The last call (a cycle: the last pair)
    again and again; a copy of a call made just before is a stale repeat, whatever edit made it."""
    period = 2 if kind == "cycle" else 1
    tail = plan.calls[-period:]
    if not all(ins.label.loop for ins in tail):
        return plan
    out = list(plan.calls)
    while plan.at + len(out) + period <= len(src):
        out += [ins if kind == "cycle" else Insert(ins.call, ins.obs, Label(True, "stale")) for ins in tail]
    return replace(plan, calls=out)


# -- assembling the episode ---------------------------------------------------------------------
def assemble(src: Source, plan: Plan, kind: str, seed: int, ends: bool, copy: int = 0) -> Episode:
    """The source's prefix, the injection, then (unless ``ends``) the rest of the source up to
    the first call that re-issues an injected one."""
    ep = src.ep
    last = src.calls[plan.at - 1]
    cut = ep.nodes.index(last) + 1
    taken = {n.id for n in ep.nodes}
    out = Episode(f"{ep.id}~{kind}" + (f"#{copy}" if copy else ""), family=FAMILY_PREFIX + kind, seed=seed)
    for n in ep.nodes[:cut]:
        out.add(replace(n, label=Label(False, None)) if isinstance(n, ToolNode) else replace(n))
    parent = last.id
    injected: list[ToolCall] = []
    shown = [ins.obs.content for ins in plan.calls if ins.obs.content]
    for k, ins in enumerate(plan.calls):
        nid = unique_id(taken, f"inj{k}")
        out.add(ToolNode(nid, parent, replace(ins.call, call_id=nid), ins.obs, ins.label))
        injected.append(ins.call)
        parent = nid
    kept_calls = 0
    if not ends:
        for n in ep.nodes[cut:]:
            if isinstance(n, ToolNode):
                retry = kept_calls == 0 and plan.retry_next
                if not retry and any(c.tool == n.call.tool and labeling.args_match(c.args, n.call.args) is not None
                                     for c in injected):
                    break
                text = n.observation.content if n.observation is not None else None
                if text and any(text in t for t in shown):
                    break  # its result was shown already (a page taken from later in the trace)
                kept_calls += 1
                out.add(replace(n, parent=parent, label=Label(False, None)))
            else:
                out.add(replace(n, parent=parent))
            parent = n.id
    onset = next((plan.at + k for k, ins in enumerate(plan.calls) if ins.label.loop), None)
    meta = {k: v for k, v in ep.meta.items() if k not in ("calls_sha1", labeling.SOURCE_KEY, labeling.DECISION_KEY, META_KEY)}
    meta[META_KEY] = {
        "kind": kind,
        "loop": kind in LOOP_KINDS,
        "label_kind": None if onset is None else plan.calls[onset - plan.at].label.kind,
        "onset": onset,
        "at": plan.at,
        "repeats": plan.repeats,
        "injected_calls": len(plan.calls),
        "continued_calls": kept_calls,
        "runs_to_end": ends,
        "source": ep.id,
        "source_family": ep.family,
        "seed": seed,
    }
    out.meta = meta
    return out


def inject_trace(ep: Episode, kind: str, seed: int, similarity: Similarity, copy: int = 0,
                 source: Source | None = None, anywhere: bool = False) -> Episode | None:
    """``ep`` with one injection of ``kind`` (``None`` when the trace offers nothing to build it from).

    ``ep`` must be a clean linear trace (see :func:`clean_reason`).
    """
    src = source or Source(ep, anywhere)
    rng = random.Random(f"{seed}\x1f{ep.id}\x1f{kind}\x1f{copy}")
    plan = BUILDERS[kind](src, rng, similarity)
    if plan is None or not plan.calls:
        return None
    # A retry that succeeds needs the source's next call: that trace always goes on.
    ends = rng.random() < END_SHARE and not plan.retry_next
    if ends and kind in LOOP_KINDS:
        plan = _run_to_end(src, plan, kind)
    return assemble(src, plan, kind, seed, ends=ends, copy=copy)


def inject_episodes(episodes: Iterable[Episode], kinds: Sequence[str], seed: int, per_kind: int = 1,
                    similarity: Similarity | None = None, anywhere: bool = False) -> InjectRun:
    """Every usable trace of ``episodes`` with ``per_kind`` injections of each of ``kinds``, in
    input order (trace by trace, kind by kind)."""
    kinds = check_kinds(kinds)
    sim = similarity or _lazy_model_similarity()
    run = InjectRun()
    for ep in episodes:
        why = clean_reason(ep)
        if why is not None:
            run.skipped_traces[why] += 1
            continue
        run.sources += 1
        src = Source(ep, anywhere)
        for kind in kinds:
            for copy in range(per_kind):
                out = inject_trace(ep, kind, seed, sim, copy, src)
                if out is None:
                    run.not_injectable[kind] += 1
                else:
                    run.episodes.append(out)
    return run


def _lazy_model_similarity() -> Similarity:
    """The model's similarity, loaded on the first paraphrase (most kinds never need it)."""
    holder: list[Similarity] = []

    def sim(text: str, candidates: Sequence[str]) -> list[float]:
        if not holder:
            holder.append(model_similarity())
        return holder[0](text, candidates)

    return sim


#: 0-based index of the first call labelled ``loop: true`` (the onset), if any.
onset_of = realsuite.label_onset
