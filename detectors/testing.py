"""The detector conformance suite: named, independent checks any detector can run against itself.

Like scikit-learn's ``check_estimator``: :func:`check_detector` runs every check on a
fresh clone of a detector and raises on the first unexpected failure;
:func:`parametrize_with_checks` turns the same checks into one pytest test each, for a
third party's own CI::

    from detectors.testing import parametrize_with_checks
    from my_guard import MyGuard

    @parametrize_with_checks([MyGuard(), MyGuard(limit=5)])
    def test_conformance(detector, check):
        check(detector)

The checks encode the rules of SPEC §2: calls arrive one at a time (no look-ahead),
``check``/``record`` never change a parent's state, sibling branches are independent
(path-scoped detectors), argument key order is irrelevant, ``start()`` resets and
``clone()`` rebuilds an identical detector, odd arguments never crash a detector,
scores are finite, verdicts agree with the score for detectors with a
``threshold_param``; and two quality floors: an exact repeat is caught within
``DELTA`` calls of its onset, and a short clean trace of distinct calls raises no alarm.
The same floors hold when the calls ran but their results were not recorded
(``Observation(None, recorded=False)``): the repeat is still caught from the arguments,
and unknown results are no evidence of a loop.

Known failures are data, not scattered skips: a detector class may declare
``expected_failures = {"check_name": "reason"}`` (or pass the same mapping to
:func:`check_detector`); checks that cannot apply (sibling independence for a
run-scoped detector, threshold consistency without a ``threshold_param``) are skipped
by themselves. This module imports nothing outside ``detectors`` and needs no pytest
or hypothesis (if hypothesis is installed, one extra check draws random traces).
"""
from __future__ import annotations

import copy
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from .protocol import Decision, Message, Observation, ToolCall, Verdict, unrecorded

#: The detection window of the quality floor (the scorer's Δ, SPEC §5).
DELTA = 5

Event = tuple  # ("call", ToolCall, Observation) | ("message", Message)


class DetectorCheckError(AssertionError):
    """A conformance check failed; the message says which rule and on what input."""


class CheckNotApplicable(Exception):
    """Raised by a check that does not apply to this detector (reported as skipped)."""


# -- driving a detector over a linear trace ------------------------------------------------------
def _call(tool: str, args: Mapping[str, Any], i: int, step: str | None = None) -> ToolCall:
    return ToolCall(tool, args, call_id=f"c{i}", step=step, turn=i)


def _trace(calls: Iterable[tuple[str, Mapping[str, Any], Any]], messages: bool = True) -> list[Event]:
    """Events for (tool, args, observation content) triples, with the agent's text between calls."""
    out: list[Event] = []
    for i, (tool, args, content) in enumerate(calls):
        if messages:
            out.append(("message", Message("assistant", f"Next I call {tool}.")))
        error = isinstance(content, str) and content.startswith("Error")
        out.append(("call", _call(tool, args, i), Observation(content, error=error)))
    return out


def _snap(d: Any) -> tuple:
    """What is compared between two decisions: verdict, score and in-band message."""
    if not isinstance(d, Decision):
        raise DetectorCheckError(f"check() returned {type(d).__name__}, not a Decision")
    return (d.verdict, float(d.score), d.message)


def run_trace(detector: Any, events: Sequence[Event], state: Any = None, fresh: bool = True) -> tuple[list[Decision], Any]:
    """Feed ``events`` to ``detector`` as one path; the decisions for its calls and the final state.

    As in open-loop replay, an alarm is only recorded: the call's real observation is
    what the detector learns from.
    """
    if fresh:
        state = detector.start()
    decisions = []
    for ev in events:
        if ev[0] == "message":
            state = detector.on_message(state, ev[1])
        else:
            _, call, obs = ev
            d = detector.check(state, call)
            decisions.append(d)
            state = detector.record(state, call, d, obs)
    return decisions, state


def _fresh(detector: Any) -> Any:
    """A fresh, unfitted copy built from the detector's parameters."""
    if hasattr(detector, "clone"):
        return detector.clone()
    if hasattr(detector, "get_params"):
        return type(detector)(**detector.get_params())
    return copy.deepcopy(detector)


# -- the traces the checks use ---------------------------------------------------------------------
def clean_trace() -> list[Event]:
    """Eight distinct calls, each returning new information: no guard should fire."""
    return _trace([
        ("search", {"query": "quarterly revenue 2023"}, "Found: revenue report Q1, Q2, Q3 2023 (3 hits)."),
        ("read_file", {"path": "reports/q3.md"}, "Q3 revenue was 4.1M, up 12% on Q2."),
        ("list_dir", {"path": "reports"}, "q1.md q2.md q3.md summary.csv"),
        ("read_file", {"path": "reports/summary.csv"}, "quarter,revenue\nq1,3.2\nq2,3.66\nq3,4.1"),
        ("calc", {"expression": "4.1 / 3.2"}, "1.28125"),
        ("search", {"query": "competitor pricing europe"}, "Two articles on European pricing pressure."),
        ("http_get", {"url": "https://example.com/fx"}, "EUR/USD 1.09 as of Monday."),
        ("write_file", {"path": "out/answer.md", "content": "Revenue grew 28% from Q1 to Q3."}, "wrote 33 bytes"),
    ])


def repeat_trace() -> tuple[list[Event], int]:
    """Three distinct calls, then the third repeated verbatim with the same result; and the onset."""
    events = _trace([
        ("search", {"query": "q3 revenue"}, "3 results: report-q3, memo-17, slides-9"),
        ("read_file", {"path": "report-q3.md"}, "Q3 revenue was 4.1M."),
        ("http_get", {"url": "https://example.com/status", "retries": 0}, "status: degraded since 09:00"),
    ] + [("http_get", {"url": "https://example.com/status", "retries": 0}, "status: degraded since 09:00")] * 7)
    return events, 3


def mixed_trace() -> list[Event]:
    """Repeats interleaved with new calls, nested arguments, errors, a user turn and a plan."""
    nested = {"filter": {"year": 2023, "tags": ["a", "b"], "opts": {"z": 1, "a": [1, {"k": "v"}]}}, "limit": 10}
    events = [("message", Message("user", "Summarise Q3 revenue.")),
              ("message", Message("assistant", "Plan first.", plan=("search", "read", "answer")))]
    rows = [
        ("search", {"query": "q3 revenue", "limit": 5}, "3 results", "search"),
        ("search", dict(nested), "0 results", None),
        ("read_file", {"path": "a.md"}, "alpha", "read"),
        ("search", {"query": "q3 revenue", "limit": 5}, "3 results", None),
        ("http_get", {"url": "https://x.test"}, "Error: 503 service unavailable", None),
        ("http_get", {"url": "https://x.test"}, "Error: 503 service unavailable", None),
        ("search", dict(nested), "0 results", None),
        ("read_file", {"path": "a.md"}, "alpha", "read"),
        ("calc", {"expression": "1+1"}, "2", None),
        ("search", {"query": "Q3 Revenue ", "limit": 5}, "3 results", None),
        ("read_file", {"path": "a.md"}, "alpha", "read"),
        ("read_file", {"path": "a.md"}, "alpha", "read"),
        ("search", {"query": "q3 revenue", "limit": 5}, "3 results", "answer"),
    ]
    for i, (tool, args, content, step) in enumerate(rows):
        events.append(("message", Message("assistant", f"Calling {tool} again." if i % 3 else "Thinking.")))
        events.append(("call", _call(tool, args, i, step), Observation(content, error=content.startswith("Error"))))
    return events


def standard_traces() -> list[list[Event]]:
    return [clean_trace(), repeat_trace()[0], mixed_trace(), random_trace(7), random_trace(11)]


def random_trace(seed: int, n: int = 25) -> list[Event]:
    """A seeded trace over a small call vocabulary, so repeats, cycles and near-repeats occur."""
    rng = random.Random(seed)
    tools = ["search", "read_file", "http_get", "check_status"]
    calls = []
    for _ in range(n):
        tool = rng.choice(tools)
        args: dict[str, Any] = {"q": rng.choice(["alpha", "beta", "Alpha ", "gamma delta"])}
        if rng.random() < 0.5:
            args["n"] = rng.randint(1, 3)
        if rng.random() < 0.3:
            args["opts"] = {"deep": rng.choice([True, False]), "list": [rng.randint(0, 2)]}
        content = rng.choice(["r1", "r2", "same", "Error: timeout", f"fresh {rng.random():.3f}"])
        calls.append((tool, args, content))
    return _trace(calls, messages=rng.random() < 0.5)


def _reorder(value: Any) -> Any:
    """The same value with every mapping's keys in reverse order."""
    if isinstance(value, Mapping):
        return {k: _reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [_reorder(v) for v in value]
    return value


def _with_args(events: Sequence[Event], f: Callable[[Any], Any]) -> list[Event]:
    out = []
    for ev in events:
        if ev[0] == "call":
            c = ev[1]
            out.append(("call", ToolCall(c.tool, f(c.args), c.call_id, c.step, c.turn), ev[2]))
        else:
            out.append(ev)
    return out


def _nested(depth: int) -> dict[str, Any]:
    value: Any = "leaf"
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return {"payload": value}


class _Opaque:
    def __repr__(self) -> str:
        return "<opaque>"


def odd_arguments() -> list[tuple[str, Mapping[str, Any]]]:
    """Arguments a real harness may hand a guard: empty, huge, unicode, NaN, deep, non-JSON."""
    return [
        ("empty", {}),
        ("huge_string", {"content": "x" * 1_000_000}),
        ("unicode", {"query": "résumé 日本語 🚀 \u200b ZWSP", "Ключ": "значение"}),
        ("lone_surrogate", {"query": "bad \ud800 text"}),
        ("control_chars", {"query": "a\x00b\nc\td"}),
        ("floats", {"x": 1.5, "nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "neg_zero": -0.0}),
        ("big_int", {"n": 10**40, "m": -(2**70)}),
        ("nested_200", _nested(200)),
        ("list_valued", {"paths": ["a.py", "b.py", "a.py"], "matrix": [[1, 2], [3, 4]], "empty": []}),
        ("none_and_bool", {"a": None, "b": True, "c": False}),
        ("set", {"tags": {"b", "a", "c"}}),
        ("bytes", {"blob": b"\xff\x00binary"}),
        ("object", {"obj": _Opaque()}),
        ("tuple_and_frozenset", {"t": (1, 2), "f": frozenset({1})}),
        ("non_str_keys", {1: "one", "two": 2}),
        ("blank_strings", {"query": "   ", "path": ""}),
    ]


def odd_observations() -> list[Observation]:
    return [
        Observation(None),
        Observation(""),
        Observation("y" * 1_000_000),
        Observation({"rows": [1, 2, {"nested": [float("nan")]}], "ok": True}),
        Observation(b"\xff\xfe bytes"),
        Observation("Error: boom", error=True),
        Observation(["a", "b"]),
        Observation(12345),
    ]


# -- the checks ----------------------------------------------------------------------------------------
def _same_decisions(a: Sequence[Decision], b: Sequence[Decision], what: str) -> None:
    sa, sb = [_snap(d) for d in a], [_snap(d) for d in b]
    if sa != sb:
        i = next((k for k, (x, y) in enumerate(zip(sa, sb)) if x != y), min(len(sa), len(sb)))
        raise DetectorCheckError(f"{what}: decisions differ at call {i}: {sa[i] if i < len(sa) else None} "
                                 f"!= {sb[i] if i < len(sb) else None}")


def check_decisions_are_well_formed(detector: Any) -> None:
    """Every check returns a Decision with a Verdict and a real score; a nudge carries its text."""
    for events in standard_traces():
        for d in run_trace(detector, events)[0]:
            _snap(d)
            if not isinstance(d.verdict, Verdict):
                raise DetectorCheckError(f"verdict {d.verdict!r} is not a Verdict")
            if isinstance(d.score, bool) or not isinstance(d.score, (int, float)):
                raise DetectorCheckError(f"score {d.score!r} is not a number")
            if d.verdict is Verdict.NUDGE and not (isinstance(d.message, str) and d.message.strip()):
                raise DetectorCheckError("a nudge must carry the in-band message the agent will see")


def check_finite_scores(detector: Any) -> None:
    """Scores are finite numbers (no NaN, no infinity), whatever the input."""
    for events in standard_traces():
        for i, d in enumerate(run_trace(detector, events)[0]):
            if not math.isfinite(float(d.score)):
                raise DetectorCheckError(f"score {d.score!r} at call {i} is not finite")


def check_no_look_ahead(detector: Any) -> None:
    """A call's decision depends only on what came before it: a prefix scores like the full trace's start."""
    for events in standard_traces():
        full = run_trace(detector, events)[0]
        for cut in range(len(events) + 1):
            part = run_trace(_fresh(detector), events[:cut])[0]
            _same_decisions(part, full[: len(part)], f"prefix of {cut} events")


def check_no_state_mutation(detector: Any) -> None:
    """``check`` and ``record`` leave the state they were given as it was.

    Judged by behaviour (what the old state answers to later calls), so persistent
    structures that share storage between a parent and its extension pass.
    """
    events = mixed_trace()
    probes = [ev[1] for ev in events if ev[0] == "call"][:6]
    state = detector.start()
    for ev in events:
        if ev[0] == "message":
            state = detector.on_message(state, ev[1])
            continue
        _, call, obs = ev
        before = [_snap(detector.check(state, p)) for p in probes]
        # Derive two children from the same state, as two sibling branches would.
        d = detector.check(state, call)
        child = detector.record(state, call, d, obs)
        for p in probes:
            detector.record(child, p, detector.check(child, p), obs)
        after = [_snap(detector.check(state, p)) for p in probes]
        if before != after:
            raise DetectorCheckError(f"state changed after check/record of {call.tool}{dict(call.args)}: "
                                     f"{before} -> {after}")
        state = child


def check_sibling_independence(detector: Any) -> None:
    """Two branches from one state never see each other's calls (path-scoped detectors)."""
    if getattr(detector, "scope", "path") == "run":
        raise CheckNotApplicable("run-scoped: one state is threaded through every call of the episode by design")
    prefix = _trace([("search", {"query": "q3"}, "3 hits"), ("read_file", {"path": "a.md"}, "alpha")])
    branch = _trace([("http_get", {"url": "https://x.test"}, "same"), ("read_file", {"path": "a.md"}, "alpha"),
                     ("http_get", {"url": "https://x.test"}, "same"), ("search", {"query": "q3"}, "3 hits")] * 2)
    _, root = run_trace(detector, prefix)
    alone = run_trace(detector, branch, root, fresh=False)[0]
    _, root2 = run_trace(detector, prefix)
    run_trace(detector, branch, root2, fresh=False)  # the first sibling
    second = run_trace(detector, branch, root2, fresh=False)[0]  # the second, from the same parent state
    _same_decisions(second, alone, "a branch after a sibling branch from the same state")


def check_key_order_invariance(detector: Any) -> None:
    """Arguments with their keys in another order (at every depth) get the same decisions."""
    for events in standard_traces():
        a = run_trace(detector, events)[0]
        b = run_trace(_fresh(detector), _with_args(events, _reorder))[0]
        _same_decisions(a, b, "keys in reverse order")


def check_reset(detector: Any) -> None:
    """``start()`` gives a fresh state: a trace scores the same after the instance saw other traces."""
    fresh = run_trace(_fresh(detector), mixed_trace())[0]
    for events in (repeat_trace()[0], random_trace(3), mixed_trace()):
        run_trace(detector, events)
    again = run_trace(detector, mixed_trace())[0]
    _same_decisions(again, fresh, "after other episodes on the same instance")


def check_clone(detector: Any) -> None:
    """``clone()`` rebuilds from ``get_params()`` and behaves identically."""
    if not hasattr(detector, "get_params"):
        raise DetectorCheckError("a detector needs get_params() (subclass detectors.Detector)")
    params = detector.get_params()
    twin = _fresh(detector)
    if twin is detector:
        raise DetectorCheckError("clone() returned the same object")
    if type(twin) is not type(detector):
        raise DetectorCheckError(f"clone() returned a {type(twin).__name__}, not a {type(detector).__name__}")
    if twin.get_params() != params:
        raise DetectorCheckError(f"clone() has params {twin.get_params()!r}, not {params!r}")
    rebuilt = type(detector)(**params)
    if rebuilt.get_params() != params:
        raise DetectorCheckError("constructing from get_params() does not give the same params: "
                                 "store each __init__ argument unchanged under its own name")
    for events in standard_traces():
        _same_decisions(run_trace(twin, events)[0], run_trace(detector, events)[0], "clone vs original")


def check_robust_to_odd_arguments(detector: Any) -> None:
    """Odd arguments and observations never raise, and still give a finite, well-formed decision."""
    state = detector.start()
    for label, args in odd_arguments():
        call = _call("odd_tool", args, 0)
        for attempt in range(2):  # twice: the repeat goes through the "seen before" path
            try:
                d = detector.check(state, call)
                _snap(d)
                if not math.isfinite(float(d.score)):
                    raise DetectorCheckError(f"non-finite score {d.score!r}")
                state = detector.record(state, call, d, Observation(f"result for {label}"))
            except DetectorCheckError as exc:
                raise DetectorCheckError(f"arguments {label!r}: {exc}") from None
            except Exception as exc:  # noqa: BLE001 — any exception is the finding
                raise DetectorCheckError(f"arguments {label!r} (attempt {attempt + 1}): "
                                         f"{type(exc).__name__}: {str(exc)[:200]}") from exc
    for obs in odd_observations():
        call = _call("read_file", {"path": "x"}, 1)
        try:
            d = detector.check(state, call)
            state = detector.record(state, call, d, obs)
            detector.record(state, call, d, None)  # a pruned call: no observation at all
            state = detector.on_message(state, Message("tool", str(obs.content)[:100]))
        except Exception as exc:  # noqa: BLE001
            raise DetectorCheckError(f"observation {str(obs.content)[:40]!r}: {type(exc).__name__}: {str(exc)[:200]}") from exc


def check_threshold_consistency(detector: Any) -> None:
    """For a detector with a ``threshold_param``: alarm iff score >= threshold_for(tool, value)."""
    param = getattr(detector, "threshold_param", None)
    if not param:
        raise CheckNotApplicable("no threshold_param: alarms are not a threshold on the score")
    value = getattr(detector, param)
    for events in standard_traces():
        calls = [ev[1] for ev in events if ev[0] == "call"]
        for call, d in zip(calls, run_trace(detector, events)[0]):
            limit = detector.threshold_for(call.tool, value)
            if d.alarm != (float(d.score) >= limit):
                raise DetectorCheckError(f"{call.tool}: verdict {d.verdict.value} with score {d.score} "
                                         f"but threshold {limit} ({param}={value})")


def check_catches_exact_repeat(detector: Any) -> None:
    """Quality floor: an exact repeat (same call, same result) is caught within DELTA calls of its onset."""
    events, onset = repeat_trace()
    decisions = run_trace(detector, events)[0]
    first = next((i for i, d in enumerate(decisions) if d.alarm), None)
    if first is None:
        raise DetectorCheckError(f"never fired on {len(decisions) - onset} verbatim repeats of one call")
    if first < onset:
        raise DetectorCheckError(f"fired at call {first}, before the first repeat (call {onset})")
    if first > onset + DELTA:
        raise DetectorCheckError(f"fired at call {first}, more than {DELTA} calls after the onset {onset}")


def without_results(events: Sequence[Event]) -> list[Event]:
    """The same events with every call run but its result not recorded (error flags kept),
    as in a trace exported without OpenTelemetry's opt-in ``gen_ai.tool.call.result``."""
    return [("call", ev[1], unrecorded(bool(ev[2].error))) if ev[0] == "call" else ev for ev in events]


def check_robust_to_unrecorded_results(detector: Any) -> None:
    """Calls that ran without a recorded result (``recorded=False``, no content) never crash a
    detector, alone or mixed with recorded ones, and give well-formed, finite decisions
    without look-ahead."""
    for events in standard_traces():
        stripped = without_results(events)
        half = [s if k % 2 else e for k, (e, s) in enumerate(zip(events, stripped))]
        for variant, what in ((stripped, "no results"), (half, "every other result missing")):
            try:
                decisions = run_trace(_fresh(detector), variant)[0]
            except DetectorCheckError:
                raise
            except Exception as exc:  # noqa: BLE001 — any exception is the finding
                raise DetectorCheckError(f"{what}: {type(exc).__name__}: {str(exc)[:200]}") from exc
            for i, d in enumerate(decisions):
                _snap(d)
                if not math.isfinite(float(d.score)):
                    raise DetectorCheckError(f"{what}: score {d.score!r} at call {i} is not finite")
            cut = len(variant) // 2
            part = run_trace(_fresh(detector), variant[:cut])[0]
            _same_decisions(part, decisions[: len(part)], f"{what}, prefix of {cut} events")


def check_catches_unrecorded_repeat(detector: Any) -> None:
    """Quality floor without results: an exact repeat of a call whose results were not recorded
    is caught within DELTA calls of its onset — the arguments alone show the repeat."""
    events, onset = repeat_trace()
    decisions = run_trace(detector, without_results(events))[0]
    first = next((i for i, d in enumerate(decisions) if d.alarm), None)
    if first is None:
        raise DetectorCheckError(f"never fired on {len(decisions) - onset} verbatim repeats of one call "
                                 f"whose results were not recorded")
    if first < onset:
        raise DetectorCheckError(f"fired at call {first}, before the first repeat (call {onset}), results not recorded")
    if first > onset + DELTA:
        raise DetectorCheckError(f"fired at call {first}, more than {DELTA} calls after the onset {onset}, "
                                 f"results not recorded")


def check_quiet_on_unrecorded_clean_trace(detector: Any) -> None:
    """Distinct calls whose results were not recorded raise no alarm: an unknown result is
    not evidence that the agent learned nothing."""
    for i, d in enumerate(run_trace(detector, without_results(clean_trace()))[0]):
        if d.alarm:
            raise DetectorCheckError(f"fired ({d.verdict.value}, score {d.score}) at call {i} of a clean trace "
                                     f"whose results were not recorded")


def check_quiet_on_clean_trace(detector: Any) -> None:
    """Quality floor: no alarm on a short trace of distinct, informative calls."""
    for i, d in enumerate(run_trace(detector, clean_trace())[0]):
        if d.alarm:
            raise DetectorCheckError(f"fired ({d.verdict.value}, score {d.score}) at call {i} of a clean trace")


def _declared_per_param(detector: Any, attribute: str) -> tuple[type, dict, dict]:
    """(class, what the class declares per parameter in ``attribute``, the detector's params);
    CheckNotApplicable when it declares nothing, DetectorCheckError when it names a parameter
    the detector does not take."""
    cls = type(detector)
    declared = dict(getattr(cls, attribute, None) or {})
    if not declared:
        raise CheckNotApplicable(f"the class declares no {attribute}")
    params = detector.get_params() if hasattr(detector, "get_params") else {}
    accepted = set(cls.param_names()) if hasattr(cls, "param_names") else set(params)
    unknown = set(declared) - accepted
    if unknown:
        raise DetectorCheckError(f"{attribute} names parameter(s) the detector does not take: {', '.join(sorted(unknown))}")
    return cls, declared, params


def check_rejects_out_of_range_params(detector: Any) -> None:
    """Every range the class declares in ``param_ranges`` is enforced: a value just outside it
    (below, above, of the wrong type, not among the choices) is refused with a ValueError
    before the detector is built, and the detector's own parameters pass."""
    from .params import outside_values
    from .registry import build

    cls, declared, params = _declared_per_param(detector, "param_ranges")
    build(cls, params)
    for name, rule in declared.items():
        for bad in outside_values(rule):
            try:
                build(cls, {**params, name: bad})
            except ValueError:
                continue
            raise DetectorCheckError(f"{name}={bad!r} is outside the declared range ({rule.describe()}) "
                                     "but the detector was built")


def check_derived_from_names_switches(detector: Any) -> None:
    """What ``derived_from`` declares can be switched off: each key is a parameter the detector
    takes, and the detector builds, and runs the standard traces, with every part it names
    switched off at once (what leave-one-corpus-out does with a corpus they came from)."""
    from .registry import build

    cls, declared, params = _declared_per_param(detector, "derived_from")
    off = {name: list(params.get(name) or ()) + list(parts) for name, parts in declared.items()}
    try:
        variant = build(cls, {**params, **off})
    except ValueError as exc:
        raise DetectorCheckError(f"with every part derived_from names switched off the detector is refused: {exc}") from None
    for events in standard_traces():
        run_trace(variant, events)


def check_random_traces(detector: Any) -> None:
    """Hypothesis-drawn traces: no look-ahead, key-order invariance and finite scores hold on each."""
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError:
        raise CheckNotApplicable("hypothesis is not installed (the deterministic checks still ran)") from None

    value = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "A ", "b", "q3"]),
                         lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
                         max_leaves=6)
    call = st.tuples(st.sampled_from(["search", "read_file", "http_get"]),
                     st.dictionaries(st.sampled_from(["q", "path", "n", "opts"]), value, max_size=3),
                     st.sampled_from(["r1", "r2", "Error: x", "new"]))

    @settings(max_examples=30, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.lists(call, min_size=1, max_size=12), st.integers(0, 12))
    def prop(calls, cut):
        events = _trace(calls, messages=False)
        full = run_trace(_fresh(detector), events)[0]
        for d in full:
            if not math.isfinite(float(d.score)):
                raise DetectorCheckError(f"score {d.score!r} is not finite")
        _same_decisions(run_trace(_fresh(detector), events[:cut])[0], full[:cut], "prefix")
        _same_decisions(run_trace(_fresh(detector), _with_args(events, _reorder))[0], full, "keys reordered")

    prop()


#: Every check, in the order they run. Each takes a detector (a fresh clone) and raises
#: DetectorCheckError on failure or CheckNotApplicable when it does not apply.
CHECKS: dict[str, Callable[[Any], None]] = {f.__name__: f for f in (
    check_decisions_are_well_formed,
    check_finite_scores,
    check_no_look_ahead,
    check_no_state_mutation,
    check_sibling_independence,
    check_key_order_invariance,
    check_reset,
    check_clone,
    check_robust_to_odd_arguments,
    check_threshold_consistency,
    check_catches_exact_repeat,
    check_quiet_on_clean_trace,
    check_rejects_out_of_range_params,
    check_robust_to_unrecorded_results,
    check_catches_unrecorded_repeat,
    check_quiet_on_unrecorded_clean_trace,
    check_derived_from_names_switches,
    check_random_traces,
)}


# -- running the checks ------------------------------------------------------------------------------
@dataclass
class CheckResult:
    check: str
    status: str  # passed | failed | xfail (failed as declared) | xpass (declared, but passed) | skipped
    detail: str = ""


@dataclass
class ConformanceReport:
    detector: str
    results: list[CheckResult] = field(default_factory=list)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == "failed"]

    def __str__(self) -> str:
        lines = [f"conformance of {self.detector}:"]
        lines += [f"  {r.status:7s} {r.check}" + (f" — {r.detail}" if r.detail else "") for r in self.results]
        return "\n".join(lines)


#: A declared failure of the first check carries over to the second: a detector that cannot
#: catch an exact repeat with its results cannot catch it without them.
IMPLIED_FAILURES = {"check_catches_exact_repeat": "check_catches_unrecorded_repeat"}


def expected_failures_of(detector: Any, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The known failures of ``detector``: its class's ``expected_failures`` plus ``extra``
    (plus those implied by them, :data:`IMPLIED_FAILURES`)."""
    declared = dict(getattr(detector, "expected_failures", None) or {})
    declared.update(extra or {})
    for name, implied in IMPLIED_FAILURES.items():
        if name in declared and implied not in declared:
            declared[implied] = f"{declared[name]} (results recorded or not)"
    unknown = set(declared) - set(CHECKS)
    if unknown:
        raise ValueError(f"expected_failures names unknown check(s): {', '.join(sorted(unknown))} "
                         f"(known: {', '.join(CHECKS)})")
    return declared


def run_check(detector: Any, name: str, expected_failures: Mapping[str, str] | None = None) -> CheckResult:
    """Run one named check on a fresh clone of ``detector``; never raises for a failing check."""
    expected = expected_failures_of(detector, expected_failures)
    try:
        CHECKS[name](_fresh(detector))
    except CheckNotApplicable as exc:
        return CheckResult(name, "skipped", str(exc))
    except Exception as exc:  # noqa: BLE001 — a crash inside a check is a failure of the detector
        detail = str(exc) if isinstance(exc, DetectorCheckError) else f"{type(exc).__name__}: {exc}"
        if name in expected:
            return CheckResult(name, "xfail", f"{expected[name]} ({detail[:200]})")
        return CheckResult(name, "failed", detail)
    if name in expected:
        return CheckResult(name, "xpass", f"declared as failing ({expected[name]}) but passed")
    return CheckResult(name, "passed")


def check_detector(detector: Any, *, expected_failures: Mapping[str, str] | None = None,
                   raise_on_failure: bool = True) -> ConformanceReport:
    """Run every conformance check on fresh clones of ``detector``.

    Raises :class:`DetectorCheckError` listing every unexpected failure unless
    ``raise_on_failure`` is false; returns the report either way.

    >>> from detectors.exact import ExactDetector
    >>> report = check_detector(ExactDetector())
    >>> report.failures
    []
    """
    report = ConformanceReport(repr(detector))
    for name in CHECKS:
        report.results.append(run_check(detector, name, expected_failures))
    if raise_on_failure and report.failures:
        raise DetectorCheckError("\n".join(f"{r.check}: {r.detail}" for r in report.failures))
    return report


def _check_id(detector: Any) -> str:
    name = getattr(detector, "name", "") or type(detector).__name__
    return str(name)


def parametrize_with_checks(detectors: Sequence[Any], *, expected_failures: Mapping[str, str] | None = None,
                            ids: Sequence[str] | None = None):
    """A ``pytest.mark.parametrize`` over (detector, check) pairs: one test per detector and check.

    The test receives a detector and a ``check`` callable; ``check(detector)`` runs that
    check on a fresh clone. Declared failures are strict ``xfail`` (a check that starts
    passing must be removed from the declaration); checks that do not apply are skipped.
    """
    import pytest  # only the parametrizer needs pytest

    params = []
    for k, det in enumerate(detectors):
        label = ids[k] if ids else _check_id(det)
        expected = expected_failures_of(det, expected_failures)
        for name, fn in CHECKS.items():
            marks = []
            if name in expected:
                marks.append(pytest.mark.xfail(reason=expected[name], strict=True, raises=DetectorCheckError))
            params.append(pytest.param(det, _Runner(name), id=f"{label}-{name}", marks=marks))
    return pytest.mark.parametrize("detector, check", params)


class _Runner:
    """``check(detector)`` for the parametrizer: runs one named check on a fresh clone."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, detector: Any) -> None:
        try:
            CHECKS[self.name](_fresh(detector))
        except CheckNotApplicable as exc:
            import pytest

            pytest.skip(str(exc))

    def __repr__(self) -> str:
        return self.name
