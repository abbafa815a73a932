"""How long a loop lasts once it starts (SPEC §11): persistence, ``to_end`` and severity.

Along one path, from the onset (its first redundant call): **persistence** is the number
of redundant calls in a row, the onset included, before the agent brings in something
new; **to_end** is true when that run reaches the path's last call. A loop is **runaway**
when persistence is at least :data:`RUNAWAY_PERSISTENCE` or it lasts to the end, else a
**blip** (one or two redundant calls, then the agent moves on).

Generated episodes know which calls are redundant by construction (the world labels every
call); real traces get it in hindsight from the labeller, which reads each call's result.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

#: Redundant calls in a row from the onset (the onset included) that make a loop runaway.
RUNAWAY_PERSISTENCE = 3
RUNAWAY, BLIP = "runaway", "blip"
SEVERITIES = (RUNAWAY, BLIP)
#: Episode meta key of a recorded severity: ``{"persistence": int, "to_end": bool, "severity": str,
#: "source": "labeller" | "human"}`` (the real suite's, for its one looping path).
SEVERITY_KEY = "severity"


@dataclass(frozen=True, slots=True)
class Severity:
    persistence: int
    to_end: bool

    @property
    def severity(self) -> str:
        return RUNAWAY if self.persistence >= RUNAWAY_PERSISTENCE or self.to_end else BLIP


def severity_meta(sev: Severity, source: str | None = None) -> dict[str, Any]:
    """``sev`` as episode meta, rows and severity files record it: persistence, to_end and severity
    in that order (files keep it), then ``source`` when given (see :data:`SEVERITY_KEY`)."""
    meta: dict[str, Any] = {"persistence": sev.persistence, "to_end": sev.to_end, "severity": sev.severity}
    if source is not None:
        meta["source"] = source
    return meta


def severity(redundant: Sequence[bool | None], onset: int) -> Severity:
    """The severity of the loop starting at path position ``onset``, given which calls of the
    path are redundant (``redundant[onset]`` is the onset itself and should be true).

    ``None`` marks a call that asks the world nothing (a ``think`` note): it neither
    continues the loop nor ends it, and is not counted.
    """
    if not 0 <= onset < len(redundant):
        raise ValueError(f"onset {onset} is outside a path of {len(redundant)} calls")
    run = 0
    for flag in redundant[onset:]:
        if flag is None:
            continue
        if not flag:
            return Severity(run, False)
        run += 1
    return Severity(run, True)
