"""Call signatures shared by the detectors: canonical JSON, stable hashes, normalisation.

One place decides what makes two calls "the same", so every detector that claims
sorted-key identity means exactly the same thing by it.

Odd arguments never raise here; the rules, for every helper:

- empty ``{}`` and huge strings are ordinary values (hashing 50 MB is fine; detectors
  that tokenise or embed clip their own text);
- unicode is kept as is; a lone surrogate is escaped (``\ud800``) instead of refused;
- NaN and ±infinity are ``null`` (as ``JSON.stringify``); ``-0.0`` stays ``-0.0``;
- integers beyond 64 bits are exact; past ``int``'s digit limit they are written in hex;
- tuples are lists; sets are lists of their members' ``repr``, sorted; bytes are their
  UTF-8 text (invalid bytes replaced); any other object is its ``repr``, or its type name
  if ``repr`` raises;
- nesting past ``MAX_DEPTH`` (200) levels is cut to ``"<too deep>"`` where the pure-Python
  path recurses (orjson handles up to 254 levels itself);
- non-string keys are their text; arguments that are not a mapping are compared as one
  value (``normalized_*`` use their ``str``, falling back to canonical JSON when ``str``
  raises or recurses too deep).
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping

import orjson
import xxhash

_SORTED = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS
_ORDERED = orjson.OPT_NON_STR_KEYS


def _fallback(value: Any) -> Any:
    # Arguments that JSON cannot carry (sets, bytes, objects) are identified by their repr,
    # so a detector never crashes on them and equal reprs still collide.
    if isinstance(value, (set, frozenset)):
        return sorted(_safe_repr(v) for v in value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return _safe_repr(value)


def _safe_repr(value: Any) -> str:
    # A third-party object's __repr__ may raise, or recurse without end; its type still names it.
    try:
        return repr(value)
    except Exception:  # noqa: BLE001
        return f"<{type(value).__module__}.{type(value).__qualname__}>"


def canonical_json(value: Any) -> bytes:
    """Canonical JSON bytes: object keys sorted recursively, no whitespace.

    NaN and infinities become ``null`` (as JSON.stringify does); values JSON cannot
    carry fall back to their ``repr``.
    """
    try:
        return orjson.dumps(value, option=_SORTED, default=_fallback)
    except (TypeError, orjson.JSONEncodeError):
        # Integers beyond 64 bits, or recursion deeper than orjson allows.
        return _canonical_slow(value).encode("utf-8", "replace")


def content_text(content: Any, limit: int | None = None) -> str:
    """What a tool returned, as text: a string as it is, anything else as canonical JSON (keys
    sorted, so the same record in another key order reads the same); at most ``limit`` chars.
    The one way detectors turn an observation into text."""
    if not isinstance(content, str):
        content = canonical_json(content).decode("utf-8", "replace")
    return content if limit is None else content[:limit]


def ordered_json(value: Any) -> bytes:
    """JSON bytes that keep each object's key order, as JavaScript's ``JSON.stringify`` does.

    For peers whose identity is order-sensitive (Gemini CLI); everything else should use
    :func:`canonical_json`.
    """
    try:
        return orjson.dumps(value, option=_ORDERED, default=_fallback)
    except (TypeError, orjson.JSONEncodeError):
        return _canonical_slow(value, sort_keys=False).encode("utf-8", "replace")


#: Below this depth a value is written as ``"<too deep>"``: the pure-Python fallback recurses,
#: and Python's stack holds about a thousand frames.
MAX_DEPTH = 200


def _canonical_slow(value: Any, depth: int = 0, sort_keys: bool = True) -> str:
    if depth > MAX_DEPTH:
        return '"<too deep>"'
    if isinstance(value, Mapping):
        items = [(k if isinstance(k, str) else _value_text(k), v) for k, v in value.items()]
        if sort_keys:
            items.sort(key=lambda kv: kv[0])
        body = ",".join(f"{_json_str(k)}:{_canonical_slow(v, depth + 1, sort_keys)}" for k, v in items)
        return "{" + body + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_canonical_slow(v, depth + 1, sort_keys) for v in value) + "]"
    if isinstance(value, float) and not math.isfinite(value):
        return "null"
    if isinstance(value, str):
        return _json_str(value)
    if isinstance(value, (bool, float)) or value is None:
        return orjson.dumps(value).decode()
    if isinstance(value, int):
        try:
            return str(value)
        except ValueError:  # more digits than int->str allows (sys.set_int_max_str_digits)
            return _json_str(hex(value))
    fallback = _fallback(value)
    return _canonical_slow(fallback, depth + 1, sort_keys) if isinstance(fallback, list) else _json_str(fallback)


def _json_str(text: str) -> str:
    try:
        return orjson.dumps(text).decode()
    except orjson.JSONEncodeError:
        # A lone surrogate (json.loads accepts "\ud800"): orjson refuses it, the stdlib escapes it.
        return json.dumps(text)


def stable_hash(args: Any) -> int:
    """A 64-bit hash of the canonical JSON of ``args``.

    The seed tree executor uses djb2 over the sorted-key JSON; xxh3 plays the same role
    (deterministic, order-insensitive through the canonical form) with fewer
    collisions, at a fraction of the cost.
    """
    return xxhash.xxh3_64_intdigest(canonical_json(args))


def exact_key(tool: str, args: Any) -> tuple[str, int]:
    """The exact signature as a hashable key: (tool, stable hash of the sorted-key JSON).

    Same equality as ``exact_signature`` without formatting a string on the hot path.
    """
    try:
        blob = orjson.dumps(args, option=_SORTED, default=_fallback)
    except (TypeError, orjson.JSONEncodeError):
        blob = _canonical_slow(args).encode("utf-8", "replace")
    return tool, xxhash.xxh3_64_intdigest(blob)


def _value_text(value: Any) -> str:
    """``str(value)`` as the seed normalises, for any value: one nested past the stack, an
    integer past ``int``'s digit limit or an object whose ``__str__`` raises falls back to
    its canonical JSON."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 — RecursionError, ValueError, or a third-party __str__ that raises
        return canonical_json(value).decode("utf-8", "replace")


#: Integers below this print without hitting ``int``'s digit limit (and stay exact).
_BIG_INT = 10**18


def normalized_key(tool: str, args: Any) -> tuple:
    """The seed-002 normalisation as a hashable key: equal exactly when
    ``normalized_signature`` is, without building and printing a dict.

    A flat ``(tool, key, text, key, text, ...)`` tuple: one allocation instead of a pair
    per key, with strings and booleans (the common values) normalised without a call.
    """
    if type(args) is not dict and not isinstance(args, Mapping):
        return tool, _value_text(args).strip().lower()
    try:
        keys = sorted(args)  # keys are unique, so this is the seed's sorted(items) order
    except TypeError:
        keys = sorted(args, key=repr)
    out = [tool]
    add = out.append
    for k in keys:
        v = args[k]
        add(k)
        if type(v) is str:
            add(v.strip().lower())
        elif type(v) is bool:
            add("true" if v else "false")  # str(v).strip().lower()
        elif type(v) is int and -_BIG_INT < v < _BIG_INT:
            add(str(v))  # digits and a sign: nothing to strip or lower
        else:
            add(_value_text(v).strip().lower())
    return tuple(out)


def exact_signature(tool: str, args: Any) -> str:
    """``tool:hash`` as in the seed tree executor: key order never matters."""
    return f"{tool}:{stable_hash(args)}"


def ordered_signature(tool: str, args: Any) -> str:
    """``tool:hash`` over :func:`ordered_json`: the same arguments in another key order differ."""
    return f"{tool}:{xxhash.xxh3_64_intdigest(ordered_json(args))}"


def normalized_signature(tool: str, args: Mapping[str, Any]) -> str:
    """The signature guard's normalisation, exactly as seed 002 writes it.

    Top-level keys sorted, each value turned into text, stripped and lower-cased. Like
    the seed, nested values are compared by their text form.
    """
    if not isinstance(args, Mapping):
        return f"{tool}::{_value_text(args).strip().lower()}"
    try:
        items = sorted(args.items())
    except TypeError:  # keys of mixed types cannot be ordered; order their text instead
        items = sorted(args.items(), key=lambda kv: repr(kv[0]))
    norm = {k: _value_text(v).strip().lower() for k, v in items}
    return f"{tool}::{_value_text(norm)}"


def args_text(args: Any) -> str:
    """A compact, readable form of the arguments for messages: ``{"q": "x"}`` -> ``q="x"``."""
    if isinstance(args, Mapping):
        parts = []
        # Sorted, so a message does not depend on the order the model wrote the keys in.
        for k, v in sorted(args.items(), key=lambda kv: str(kv[0])):
            text = canonical_json(v).decode("utf-8", "replace")
            if len(text) > 80:
                text = text[:77] + "..."
            parts.append(f"{k}={text}")
        return ", ".join(parts)
    return canonical_json(args).decode("utf-8", "replace")[:200]
