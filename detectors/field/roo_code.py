"""``roo_code``: Roo Code's ``ToolRepetitionDetector`` — the (limit+1)-th identical consecutive call asks the user."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..callmemo import CallMemo
from ..protocol import Decision, Detector, Observation, ToolCall, Verdict, tool_exempt, tool_param
from ..signature import exact_signature
from ._common import EMPTY_RUN, Run
from ..params import Range


def model_text(tool: str) -> str:
    """The tool error Roo hands back to the model, word for word."""
    return f"Tool call repetition limit reached for {tool}. Please try a different approach."


def user_text(tool: str) -> str:
    """The ``mistake_limit_reached`` question shown to the user (its head, as quoted in PEERS.md)."""
    return f"Roo appears to be stuck in a loop, attempting the same action ({tool}) repeatedly."


class RooCodeDetector(Detector):
    """Block the (``limit`` + 1)-th identical *consecutive* call and ask the user.

    **Identity**: sorted-key JSON of the tool name and its parameters (Roo keys
    ``{name, params, nativeArgs}``; our calls carry one argument object, so this is the
    tree executor's exact signature). **Rule**: consecutive only — the counter is 0 for a
    new call and grows by one per identical call right after it; the call is blocked
    when the counter reaches ``limit`` (Roo's ``consecutiveMistakeLimit``, the
    detector's constructor argument; default 3 = ``DEFAULT_CONSECUTIVE_MISTAKE_LIMIT``),
    i.e. the 4th identical call in a row. ``limit <= 0`` means unlimited (what tasks
    started through Roo's API get). Any different call in between resets the counter, so
    A,B,A,B never accumulates. The score is the counter over the limit, so the detector
    alarms iff ``score >= 1``. There is no ``threshold_param``: the reset after a block
    depends on the limit, so scores stored under one limit do not predict another.

    **Intervention**: the call is not run and the user is asked → ``escalate``; the
    decision carries the tool error the model receives as ``message`` and the user
    question as ``stream``.

    **Mapping notes**: after a block Roo resets its counter *and* its previous call, so
    the next identical call runs again and the block after it needs ``limit`` more
    repeats — as here (the score, the counter, restarts at 0). In Roo the user has
    answered by then; in our runs ``escalate`` ends the episode anyway.
    ``exempt_calls`` models Roo's historical browser-scroll exemption
    (``isBrowserScrollAction``, PR #7471, Aug 2025 – Feb 2026): a call matching an entry
    ``{"tool": "browser_action", "args": {"action": "scroll_down"}}`` (the tool and every
    listed argument equal) is transparent — it neither resets nor advances the count.
    The default is none, as in Roo today (the browser tool was removed). Per-tool
    overrides add a whole-tool exemption (``{"tool": {"exempt": True}}``, transparent the
    same way) and Kilo Code's raised per-tool limit (``{"tool": {"limit": N}}``). The
    related "no tool use" mistake counter (turns without a tool call) is left out: it
    fires on model turns, not on a proposed call.

    >>> det = RooCodeDetector()
    >>> s = det.start()
    >>> out = []
    >>> for i in range(4):
    ...     call = ToolCall("read_file", {"path": "a.py"})
    ...     d = det.check(s, call)
    ...     s = det.record(s, call, d, Observation("same"))
    ...     out.append(d.verdict.value)
    >>> out
    ['allow', 'allow', 'allow', 'escalate']
    """

    # Roo Code: a limit of 0 or below means "never block" (its own tests set both).
    param_ranges = {"limit": Range()}
    # Per-tool tuning re-runs every candidate: a per-tool limit moves the reset after a block.
    tune_candidates = {"limit": (2, 3, 4, 5, 6), "exempt": (True,)}
    tune_fast_keys: tuple[str, ...] = ()

    def __init__(self, *, limit: int = 3, tool_overrides: Mapping[str, Mapping[str, Any]] | None = None,
                 exempt_calls: Sequence[Mapping[str, Any]] = ()):
        self.limit = limit
        self.tool_overrides = tool_overrides
        self.exempt_calls = tuple(exempt_calls)
        for entry in self.exempt_calls:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("tool"), str):
                raise ValueError(f"exempt_calls entries are {{'tool': name, 'args': {{...}}}}, got {entry!r}")
        self._key = CallMemo(lambda call: exact_signature(call.tool, call.args))

    def start(self) -> Run:
        return EMPTY_RUN

    def _transparent(self, call: ToolCall) -> bool:
        if tool_exempt(self.tool_overrides, call.tool):
            return True
        for entry in self.exempt_calls:
            if entry["tool"] == call.tool and isinstance(call.args, Mapping):
                wanted = entry.get("args") or {}
                if all(k in call.args and call.args[k] == v for k, v in wanted.items()):
                    return True
        return False

    def threshold_for(self, tool: str, value: float) -> float:
        if tool_exempt(self.tool_overrides, tool):
            return float("inf")
        limit = tool_param(self.tool_overrides, tool, "limit", value)
        return float("inf") if limit <= 0 else limit

    def check(self, state: Run, call: ToolCall) -> Decision:
        if self._transparent(call):
            return Decision(Verdict.ALLOW, 0.0)
        count = state.prior(self._key(call))
        limit = self.threshold_for(call.tool, self.limit)
        score = count / limit  # 0 when unlimited
        if count < limit:
            return Decision(Verdict.ALLOW, score)
        return Decision(
            Verdict.ESCALATE,
            score,
            message=model_text(call.tool),
            reason=f"{call.tool} repeated {count + 1} times in a row (limit {limit:g})",
            events=(("consecutive_mistake", {"kind": "tool_repetition", "tool": call.tool, "count": count + 1}),),
            stream=(user_text(call.tool),),
        )

    def record(self, state: Run, call: ToolCall, decision: Decision, observation: Observation | None) -> Run:
        if self._transparent(call):
            return state
        if decision.alarm:
            return EMPTY_RUN  # Roo resets the counter and the previous call after a block
        return state.extend(self._key(call))
