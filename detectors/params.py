"""Checking a detector's parameters before it is built: type, range and allowed values.

A detector declares what each parameter may be in ``param_ranges`` (a class attribute:
parameter name -> :class:`Range`, :class:`OneOf` or :class:`Each`); a parameter it does not
declare is checked against its type, read from the constructor's annotation or, failing
that, its default (an ``int`` default takes integers, a ``float`` default numbers, a
``tuple`` of strings a list of strings). So a plug-in gets type checks for free and ranges
by declaring them, and a detector's constructor may still reject a value itself: the
command line reports both the same way, as one line naming detector, parameter, value and
what is allowed, before any work starts.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass
from typing import Any, Mapping


class ParamError(ValueError):
    """A parameter value a detector does not take: which parameter, the value, what is allowed."""

    def __init__(self, param: str, value: Any, allowed: str) -> None:
        self.param, self.value, self.allowed = param, value, allowed
        super().__init__(f"{param}={value!r} is not allowed (expected {allowed})")


def _number_kind(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    if kind is int:
        return isinstance(value, int)
    return isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value))


@dataclass(frozen=True)
class Range:
    """A number between ``lo`` and ``hi`` (both included; ``None`` = unbounded); ``kind`` int or
    float; ``none_ok``: ``None`` is also allowed (it switches the check off)."""

    lo: float | None = None
    hi: float | None = None
    kind: type = int
    none_ok: bool = False

    def describe(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if self.lo is not None and self.hi is not None:
            what += f" from {self.lo} to {self.hi}"
        elif self.lo is not None:
            what += f" >= {self.lo}"
        elif self.hi is not None:
            what += f" <= {self.hi}"
        return what + (" or none" if self.none_ok else "")

    def ok(self, value: Any) -> bool:
        if value is None:
            return self.none_ok
        if not _number_kind(value, self.kind):
            return False
        return (self.lo is None or value >= self.lo) and (self.hi is None or value <= self.hi)


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of values."""

    choices: tuple

    def describe(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)

    def ok(self, value: Any) -> bool:
        return any(value == c and type(value) is type(c) for c in self.choices)


@dataclass(frozen=True)
class Each:
    """A list whose every item passes ``rule``."""

    rule: Any

    def describe(self) -> str:
        return f"a list of {self.rule.describe()}"

    def ok(self, value: Any) -> bool:
        return isinstance(value, (list, tuple)) and all(self.rule.ok(v) for v in value)


@dataclass(frozen=True)
class TypeRule:
    """Only a type: ``kinds`` names the accepted ones (``int``, ``float``, ``bool``, ``str``,
    ``None``, ``list[str]``, ``list``, ``table``)."""

    kinds: tuple[str, ...]

    _TEXT = {"int": "an integer", "float": "a number", "bool": "true or false", "str": "a string",
             "None": "none", "list[str]": "a list of strings", "list": "a list", "table": "a table"}

    def describe(self) -> str:
        return " or ".join(self._TEXT[k] for k in self.kinds)

    def ok(self, value: Any) -> bool:
        return any(_is_kind(value, k) for k in self.kinds)


def _is_kind(value: Any, kind: str) -> bool:
    if kind == "int":
        return _number_kind(value, int)
    if kind == "float":
        return _number_kind(value, float)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "None":
        return value is None
    if kind == "list[str]":
        return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
    if kind == "list":
        return isinstance(value, (list, tuple))
    return isinstance(value, Mapping)  # "table"


_ANNOTATION_KINDS = {"int": "int", "float": "float", "bool": "bool", "str": "str", "None": "None"}


def _annotation_kinds(annotation: Any) -> tuple[str, ...] | None:
    """The kinds a simple annotation names (``int | None``, ``Sequence[str]``, ``Mapping[...]``),
    or ``None`` when it names something else (then the default decides)."""
    if annotation is inspect.Parameter.empty:
        return None
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", None) or str(annotation)
    text = text.replace("typing.", "")
    if text.startswith("Optional[") and text.endswith("]"):
        text = text[len("Optional["):-1] + " | None"
    kinds = []
    for part in (p.strip() for p in text.split("|")):
        base = part.split("[", 1)[0]
        if part in _ANNOTATION_KINDS:
            kinds.append(_ANNOTATION_KINDS[part])
        elif base in ("Sequence", "list", "tuple") and part[len(base):] in ("[str]", "[str, ...]"):
            kinds.append("list[str]")
        elif base in ("Sequence", "list", "tuple"):
            kinds.append("list")
        elif base in ("Mapping", "dict"):
            kinds.append("table")
        else:
            return None
    return tuple(kinds)


def _default_kinds(default: Any) -> tuple[str, ...] | None:
    if default is inspect.Parameter.empty or default is None:
        return None
    for kind, t in (("bool", bool), ("int", int), ("float", float), ("str", str)):
        if isinstance(default, t):
            return (kind,)
    if isinstance(default, (list, tuple)):
        return ("list[str]",) if default and all(isinstance(v, str) for v in default) else ("list",)
    if isinstance(default, Mapping):
        return ("table",)
    return None


def param_rules(cls: type) -> dict[str, Any]:
    """Every keyword parameter's rule: the declared ``param_ranges`` entry, else its type."""
    declared = dict(getattr(cls, "param_ranges", {}) or {})
    rules: dict[str, Any] = {}
    try:
        sig = inspect.signature(cls.__init__)
    except (TypeError, ValueError):
        return declared
    for p in sig.parameters.values():
        if p.name == "self" or p.kind not in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD):
            continue
        if p.name in declared:
            rules[p.name] = declared[p.name]
            continue
        kinds = _annotation_kinds(p.annotation) or _default_kinds(p.default)
        if kinds:
            if p.default is None and "None" not in kinds:
                kinds += ("None",)
            if "int" in kinds and "float" in kinds:
                kinds = tuple(k for k in kinds if k != "int")
            rules[p.name] = TypeRule(kinds)
    return rules


def check_params(cls: type, params: Mapping[str, Any]) -> None:
    """Raise :class:`ParamError` for the first parameter in ``params`` its rule refuses."""
    rules = param_rules(cls)
    for name, value in params.items():
        rule = rules.get(name)
        if rule is not None and not rule.ok(value):
            raise ParamError(name, value, rule.describe())


def outside_values(rule: Any) -> list[Any]:
    """Values just outside a declared rule, for the conformance suite: below ``lo``, above
    ``hi``, a wrong type, a value not among the choices."""
    if isinstance(rule, Range):
        vals: list[Any] = ["not a number"]
        step = 1 if rule.kind is int else 1e-6
        if rule.lo is not None:
            vals.append(rule.lo - step)
        if rule.hi is not None:
            vals.append(rule.hi + step)
        if rule.kind is int:
            vals.append((rule.lo if rule.lo is not None else 0) + 0.5)
        return vals
    if isinstance(rule, OneOf):
        return ["\u0000 no such choice"]
    if isinstance(rule, Each):
        return [[v] for v in outside_values(rule.rule)] + ["not a list"]
    if isinstance(rule, TypeRule):
        return [object()]
    return []
