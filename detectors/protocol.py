"""The detector protocol: what a loop guard sees before and after each tool call.

A detector is consulted *before* a call executes (``check``) and told what happened
*after* (``record``). Both are pure: they take a state and return a decision or a new
state, never mutating the old one, so sibling branches of a tree can share their
parent's state safely. A detector sees only what a real harness sees: calls,
observations and the agent's messages; never labels or simulator facts.
"""
from __future__ import annotations

import enum
import inspect
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Iterator, Mapping

from .params import check_params


class Verdict(str, enum.Enum):
    """What the harness should do with a proposed call, gentlest first."""

    ALLOW = "allow"
    NUDGE = "nudge"  # an in-band message becomes the call's observation
    PRUNE = "prune"  # drop the call; the branch may end
    ESCALATE = "escalate"  # stop and hand the transcript to a human
    STOP = "stop"  # end the episode

    def __str__(self) -> str:  # so f-strings and CSVs show "nudge", not "Verdict.NUDGE"
        return self.value


#: Severity order, used when several layers speak at once.
SEVERITY = {Verdict.ALLOW: 0, Verdict.NUDGE: 1, Verdict.PRUNE: 2, Verdict.ESCALATE: 3, Verdict.STOP: 4}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A proposed tool call: tool name plus JSON arguments.

    ``step`` names the plan step the call claims to execute, for agents that
    declared a plan; ``turn`` groups the calls proposed in one model turn.
    """

    tool: str
    args: Mapping[str, Any]
    call_id: str = ""
    step: str | None = None
    turn: int | None = None


@dataclass(frozen=True, slots=True)
class Observation:
    """What a tool returned (text or JSON) and whether it was an error.

    ``nudge`` is true when the harness, not the tool, produced the text (a guard's
    in-band message); a real harness knows this, so detectors may use it.

    ``recorded`` is false when the call ran but its result was not recorded (an
    OpenTelemetry span without the opt-in ``gen_ai.tool.call.result``, a delegation that
    got no reply): ``content`` is then ``None`` and means nothing, while ``error`` still
    says whether the call failed, when the source knows that much. See :data:`UNRECORDED`.
    """

    content: Any
    error: bool = False
    nudge: bool = False
    recorded: bool = True


#: A call that ran but whose result was not recorded (see :func:`unrecorded`).
UNRECORDED = Observation(None, recorded=False)
_UNRECORDED_ERROR = Observation(None, error=True, recorded=False)


def unrecorded(error: bool = False) -> Observation:
    """The observation of a call that ran without a recorded result; ``error`` if it is known to have failed."""
    return _UNRECORDED_ERROR if error else UNRECORDED


def ran(observation: Observation | None) -> bool:
    """True when the tool ran (recorded or not); false for a call that was pruned, blocked or nudged."""
    return observation is not None and not observation.nudge


def nudge_only(decision: "Decision") -> bool:
    """The decision voices a finding that is no strike toward a stop once the call ran
    (``progress_guard``'s ``review_nudges``: a re-view costs one call); its first event says so."""
    return bool(decision.events) and bool(decision.events[0][1].get("nudge_only"))


def result_known(observation: Observation | None) -> bool:
    """True when the tool ran and its result was recorded: only then may a detector read ``content``.

    Result-aware layers (no progress, result hashes, same-error streaks) treat a call that
    ran without a known result as neither progress nor the lack of it.
    """
    return observation is not None and not observation.nudge and observation.recorded


@dataclass(frozen=True, slots=True)
class Message:
    """A message on the path: the agent's turn text, or a harness/user message.

    ``plan`` carries a declared plan (ordered step names) when the agent commits to one.
    """

    role: str
    content: str = ""
    plan: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """A detector's answer for one proposed call.

    ``score`` is the detector's loopiness for this call (higher is loopier), so
    thresholds can be swept from stored scores. ``message`` is the in-band text a
    nudge or refusal puts in front of the model; ``events`` are observer events
    such as ``("loop:detected", {...})``; ``stream`` lines are what a harness
    would print to the user.
    """

    verdict: Verdict
    score: float
    message: str | None = None
    reason: str = ""
    events: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    stream: tuple[str, ...] = ()

    @property
    def alarm(self) -> bool:
        return self.verdict is not Verdict.ALLOW


ALLOW_ZERO = Decision(Verdict.ALLOW, 0.0)
_ALLOW_BY_COUNT = tuple(Decision(Verdict.ALLOW, float(i)) for i in range(256))


def allow(score: int | float) -> Decision:
    """An ALLOW decision; small integer scores come from a table (decisions are immutable,
    and building one is a noticeable share of a sub-microsecond check)."""
    if type(score) is int and 0 <= score < 256:
        return _ALLOW_BY_COUNT[score]
    return Decision(Verdict.ALLOW, float(score))


class Detector:
    """Base class for loop detectors.

    Subclasses take only keyword parameters with defaults in ``__init__`` and store
    each under the same attribute name (scikit-learn style), so ``get_params`` and
    ``clone`` work and every result can record how a detector was built.

    ``scope`` is ``"path"`` when state follows the tree (each branch extends its
    parent's state) and ``"run"`` when one state is threaded through every call of
    the episode in execution order (a run-wide counter).

    ``threshold_param`` names the parameter that acts as an alarm threshold on the
    score: the detector alarms on a call iff ``score >= threshold_for(tool, value)``.
    That contract lets a sweep recompute alarms from stored scores in one pass.
    """

    name: ClassVar[str] = ""
    scope: ClassVar[str] = "path"
    threshold_param: ClassVar[str | None] = None

    # -- optional hooks: declared here with their defaults, for built-ins and plug-ins alike ----
    #: ``loopbench tune``: per-tool override key -> candidate values (least permissive first).
    #: Detectors that take ``tool_overrides`` declare theirs; empty means nothing to tune.
    tune_candidates: ClassVar[Mapping[str, tuple]] = {}
    #: The keys of ``tune_candidates`` that only move the alarm threshold, so a tuning step can
    #: evaluate them from stored scores instead of re-running the detector.
    tune_fast_keys: ClassVar[tuple[str, ...]] = ()
    #: A detector that nudges first and halts later names the parameter that sets when it halts
    #: (``progress_guard``: ``stop_after``): an alarmed call halts iff ``score >=
    #: halt_threshold(tool, value)``. ``loopbench tune --objective deploy`` picks it from stored scores.
    halt_param: ClassVar[str | None] = None
    #: Such a guard may also keep its first findings to itself: ``nudge_param`` names the parameter
    #: that sets when it starts to nudge (``progress_guard``: ``nudge_after``). A finding has a score
    #: ``>= nudge_threshold(tool, 0)`` whatever its verdict, and is voiced (a nudge or a halt) iff its
    #: score reaches ``nudge_threshold(tool, value)``: a silent finding is an ALLOW with that score.
    nudge_param: ClassVar[str | None] = None
    #: What each parameter may be (``detectors.params``: ``Range``, ``OneOf``, ``Each``), checked
    #: before the detector is built; a parameter not named here is checked against its type.
    param_ranges: ClassVar[Mapping[str, Any]] = {}
    #: What each value a parameter takes means, where the names alone do not say (``progress_guard``'s
    #: ``skip_rules``: rule -> what it says); ``loopbench list DETECTOR`` prints them.
    value_docs: ClassVar[Mapping[str, Mapping[str, str]]] = {}
    #: Where the detector's own rules came from: a list parameter that switches parts off
    #: (``progress_guard``'s ``skip_rules``, ``skip_layers``) -> each part it can name -> the real
    #: corpora (``real-dev`` family names) whose traces that part was written from. Leave-one-
    #: corpus-out with ``--cv-rules`` scores each held-out corpus with the parts written from it
    #: switched off: the detector as it would be had that corpus never been read.
    derived_from: ClassVar[Mapping[str, Mapping[str, tuple[str, ...]]]] = {}
    #: Conformance checks (``detectors.testing``) this detector fails on purpose: name -> reason.
    expected_failures: ClassVar[Mapping[str, str]] = {}
    #: Cumulative cost counters a runner reports in ``timings.csv`` (see :data:`COST_COUNTERS`):
    #: texts encoded by a model, and cache lookups / hits. Detectors without a model keep 0.
    model_calls: int = 0
    cache_lookups: int = 0
    cache_hits: int = 0

    def prefetch(self, calls: Iterable[ToolCall]) -> int:
        """Prepare for ``calls`` before scoring them (a model-backed detector encodes every distinct
        text in one batch); returns the texts encoded. A runner calls it once per task when
        :func:`prefetches` is true. The default does nothing."""
        return 0

    @property
    def wants_prefetch(self) -> bool:
        """Whether this instance, with its parameters, has a ``prefetch`` worth calling: a
        detector whose options leave its model out (``progress_guard`` without its semantic
        layer, or on static vectors) says no, and a run then neither shares its encoding
        between workers nor records an embedding backend for it."""
        return True

    # -- the protocol -------------------------------------------------------------
    def start(self) -> Any:
        """A fresh state for a new episode."""
        return None

    def check(self, state: Any, call: ToolCall) -> Decision:
        """The verdict for ``call`` given the path so far. Must not mutate ``state``."""
        raise NotImplementedError

    def record(self, state: Any, call: ToolCall, decision: Decision, observation: Observation | None) -> Any:
        """The state after ``call`` was handled.

        ``observation`` is what the agent saw (the tool's result, or the nudge text
        with ``nudge=True``); it is ``None`` when the call did not run (pruned,
        blocked). A call that ran but whose result the trace did not record arrives as
        an observation with ``recorded=False`` and ``content=None`` (:data:`UNRECORDED`,
        or :func:`unrecorded` with ``error=True`` when the call is known to have failed):
        it did run, so argument-based state (repeat counts, step budgets) counts it as
        usual, but its content must not be read as a result. Use :func:`ran` for "did
        it run" and :func:`result_known` for "may I look at the result"; a detector that
        only tests ``observation is None`` already counts such a call as run.
        """
        return state

    def on_message(self, state: Any, message: Message) -> Any:
        """The state after a message appears on the path (agent text, a plan, a user turn)."""
        return state

    # -- thresholds -----------------------------------------------------------------
    def threshold_for(self, tool: str, value: float) -> float:
        """The effective alarm threshold for ``tool`` when the swept parameter is ``value``.

        Detectors with per-tool overrides return the override for that tool.
        """
        return value

    def halt_threshold(self, tool: str, value: float) -> float:
        """The score from which an alarm on ``tool`` halts when ``halt_param`` is ``value``."""
        return value

    def nudge_threshold(self, tool: str, value: float) -> float:
        """The score from which a finding on ``tool`` is voiced when ``nudge_param`` is ``value``."""
        return value

    # -- parameters (scikit-learn style) -------------------------------------------
    @classmethod
    def validate_params(cls, params: Mapping[str, Any]) -> None:
        """Raise ``detectors.params.ParamError`` for a value this detector does not take. The
        default checks ``param_ranges`` and, for undeclared parameters, the type; override it
        for checks that relate parameters to each other."""
        check_params(cls, params)

    @classmethod
    def param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self" and p.kind == p.KEYWORD_ONLY]

    def get_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.param_names()}

    def clone(self, **overrides: Any) -> "Detector":
        params = self.get_params()
        unknown = set(overrides) - set(params)
        if unknown:
            raise ValueError(f"{type(self).__name__} has no parameter(s) {', '.join(sorted(unknown))}")
        params.update(overrides)
        return type(self)(**params)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


#: The cost counters of :class:`Detector`, in ``timings.csv`` order.
COST_COUNTERS = ("model_calls", "cache_hits", "cache_lookups")


def cost_counters(detector: Any) -> dict[str, int]:
    """A detector's cumulative cost counters (0 where it keeps none, as for duck-typed detectors)."""
    return {k: int(getattr(detector, k, 0) or 0) for k in COST_COUNTERS}


def prefetches(detector: Any) -> bool:
    """True when ``detector`` has a ``prefetch`` of its own (not :class:`Detector`'s no-op)
    and wants it called (``Detector.wants_prefetch``)."""
    fn = getattr(type(detector), "prefetch", None)
    return callable(fn) and fn is not Detector.prefetch and bool(getattr(detector, "wants_prefetch", True))


def tool_param(tool_overrides: Mapping[str, Mapping[str, Any]] | None, tool: str, param: str, default: Any) -> Any:
    """A per-tool override such as ``{"http_get": {"max_repeats": 3}}``, or ``default``."""
    if not tool_overrides:
        return default
    per_tool = tool_overrides.get(tool)
    if per_tool is None:
        return default
    return per_tool.get(param, default)


def tool_exempt(tool_overrides: Mapping[str, Mapping[str, Any]] | None, tool: str) -> bool:
    """True when ``tool`` is exempt (``{"check_status": {"exempt": true}}``): never flagged."""
    return bool(tool_param(tool_overrides, tool, "exempt", False))


#: (pause, resume) callbacks of whoever times detector calls (``sim.play.watchdog``).
_SETUP_HOOKS: list[tuple[Any, Any]] = []


def watch_setup(pause: Any, resume: Any) -> tuple[Any, Any]:
    """Have ``pause()`` and ``resume()`` called around every :func:`setup_work`; returns a
    handle for :func:`unwatch_setup`."""
    handle = (pause, resume)
    _SETUP_HOOKS.append(handle)
    return handle


def unwatch_setup(handle: tuple[Any, Any]) -> None:
    if handle in _SETUP_HOOKS:
        _SETUP_HOOKS.remove(handle)


@contextmanager
def setup_work() -> Iterator[None]:
    """Mark work inside a detector call that is one-time set-up, not checking — loading a
    model on the first call that needs it. A harness's per-check time limit pauses for it
    and gives the call a fresh limit afterwards, so a cold model is not a hung detector.
    """
    for pause, _ in _SETUP_HOOKS:
        pause()
    try:
        yield
    finally:
        for _, resume in _SETUP_HOOKS:
            resume()
