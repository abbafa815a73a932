"""What a detector derives from a call, computed once: per call object, or per arguments.

``CallMemo``: the harness hands ``check`` and ``record`` the same call object back to
back, so a signature, a prepared form or an embedding looked up in ``check`` is reused by
``record``. One slot, keyed by object identity: equal but distinct calls (a repeat
later in the run) are computed afresh, which is exactly right for a memo of one call.

``ArgsMemo``: for what depends on the tool and the arguments alone, a bounded memo keyed
by them, so equal calls (a repeat later on the path, the same call on another branch or in
another conversation) share one computation.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

import orjson

from .protocol import ToolCall


class CallMemo:
    """Remember ``fn(call)`` for the last call seen."""

    __slots__ = ("fn", "_call", "_value")

    def __init__(self, fn: Callable[[ToolCall], Any]):
        self.fn = fn
        self._call: ToolCall | None = None
        self._value: Any = None

    def __call__(self, call: ToolCall) -> Any:
        if call is not self._call:
            self._value = self.fn(call)
            self._call = call
        return self._value


_MAX_KEY_BYTES = 2048  # calls with larger arguments are computed afresh, not kept
_INF = float("inf")


def _plain(value: Any, depth: int = 0) -> bool:
    """True when ``value`` is made of JSON's own types only (dict with str keys, list,
    tuple, str, int, bool, None, finite float): then its canonical JSON says everything
    about it. Subclasses (an enum, a str with its own ``__str__``), NaN (written as
    ``null``, like ``None``) and other objects that JSON would conflate are not plain."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is float:
        return value == value and value != _INF and value != -_INF
    if depth > 50:
        return False
    if t is dict:
        for k, v in value.items():
            if type(k) is not str or not _plain(v, depth + 1):
                return False
        return True
    if t is list or t is tuple:
        for v in value:
            if not _plain(v, depth + 1):
                return False
        return True
    return False


def args_key(args: Any) -> bytes | None:
    """The canonical JSON of plain ``args`` (keys sorted), or ``None`` when they are not
    plain or too large to keep: two calls with the same key have the same arguments,
    up to key order and list-versus-tuple."""
    if not _plain(args):
        return None
    try:
        key = orjson.dumps(args, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # integers beyond 64 bits, text with lone surrogates
        return None
    return key if len(key) <= _MAX_KEY_BYTES else None


class ArgsMemo:
    """Remember ``fn(call)`` by the call's tool and arguments, for up to ``entries`` distinct
    calls (the oldest forgotten first); calls whose arguments have no ``args_key`` are
    computed every time.

    For a ``fn`` that reads only ``call.tool`` and ``call.args`` and treats key order and
    lists and tuples alike: then a remembered value is exactly what ``fn`` would return.
    A call repeated later in a run, or on another path of a tree, is computed once.
    """

    __slots__ = ("fn", "entries", "_memo")

    def __init__(self, fn: Callable[[ToolCall], Any], entries: int = 4096):
        self.fn = fn
        self.entries = entries
        self._memo: OrderedDict[tuple[str, bytes], Any] = OrderedDict()

    def __call__(self, call: ToolCall) -> Any:
        key = args_key(call.args)
        if key is None or type(call.tool) is not str:
            return self.fn(call)
        memo_key = (call.tool, key)
        value = self._memo.get(memo_key)
        if value is None:
            value = self.fn(call)
            if len(self._memo) >= self.entries:
                self._memo.popitem(last=False)
            self._memo[memo_key] = value
        return value
