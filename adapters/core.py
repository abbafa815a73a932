"""What every adapter shares: building a guard per run, and turning its verdict into an action.

A framework adapter asks ``Step.before`` whether a proposed call runs; then, when it ran,
``Step.after`` records its result. Everything framework-specific stays in the adapter modules.
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from detectors.guard import LoopGuard
from detectors.protocol import Decision, ToolCall, Verdict
from detectors.registry import make_detector

HALTS = (Verdict.STOP, Verdict.ESCALATE)


class LoopHalted(RuntimeError):
    """The guard ended the run: ``reason`` is the guard's, ``decision`` its full answer."""

    def __init__(self, tool: str, decision: Decision):
        self.tool, self.decision, self.reason = tool, decision, decision.reason or str(decision.verdict)
        super().__init__(f"loop guard halted the run at {tool!r}: {self.reason}")


GuardFactory = Callable[[], LoopGuard]


def guard_factory(detector: str = "progress_guard", config: str | Path | None = None,
                  **params: Any) -> GuardFactory:
    """A function that builds one fresh guard per run: any registered detector (or
    ``module:Class``), with the parameters of a ``loopbench tune`` TOML (its
    ``[detectors.NAME]`` table) and then ``params`` on top."""
    merged: dict[str, Any] = {}
    if config is not None:
        path = Path(config)
        try:
            table = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path}: {exc}") from None
        merged.update(table.get("detectors", {}).get(detector, {}))
    merged.update(params)
    make_detector(detector, **merged)  # fail now, at setup, on an unknown name or a bad value

    def build() -> LoopGuard:
        return LoopGuard(make_detector(detector, **merged))

    return build


@dataclass(frozen=True)
class Action:
    """What the adapter does with a proposed call: ``run`` it, or give ``message`` instead."""

    run: bool
    message: str = ""
    decision: Decision | None = None


def call_of(tool: str, args: Mapping[str, Any], turn: int | None = None) -> ToolCall:
    """The call as the guard sees it; ``turn`` is the number of the model response that
    proposed it (the calls of one response share it), as each framework counts responses."""
    return ToolCall(tool, dict(args or {}), turn=turn)


def before(guard: LoopGuard, tool: str, args: Mapping[str, Any], turn: int | None = None) -> Action:
    """The guard's verdict on a proposed call; raises ``LoopHalted`` on stop/escalate.

    A nudge is recorded at once (the model sees its message as the call's result); a
    pruned call never ran and is recorded as such (there is no branch to drop in a
    framework's run, so the model is told the call was dropped)."""
    call = call_of(tool, args, turn)
    decision = guard.check(call)
    if decision.verdict is Verdict.ALLOW:
        return Action(True, decision=decision)
    guard.record(call, decision=decision)
    if decision.verdict in HALTS:
        raise LoopHalted(tool, decision)
    text = decision.message or f"[loop guard] call not run: {decision.reason or decision.verdict}"
    return Action(False, text, decision)


def after(guard: LoopGuard, tool: str, args: Mapping[str, Any], result: Any, error: bool = False,
          decision: Decision | None = None, turn: int | None = None) -> None:
    """Record what an allowed call returned (text as the model sees it)."""
    guard.record(call_of(tool, args, turn), result=result if isinstance(result, str) or result is None else str(result),
                 error=error, decision=decision)
