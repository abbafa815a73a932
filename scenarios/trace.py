"""The JSON Lines trace format (SPEC §6): write episodes out, read them back.

Reading never stops at a bad record: each one yields a one-line problem naming the
file and line, is counted and skipped, and every valid record is still used.

A ``tool_call`` without a ``tool_result`` never ran (a guard pruned or blocked it); a call
that ran but whose result was not recorded has ``{"kind": "tool_result", "call_id": ...,
"recorded": false}`` (no ``content``; ``error`` if the failure is known) and is read as
``detectors.protocol.unrecorded(error)``.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import orjson

from detectors.protocol import Message, Observation, ToolCall, unrecorded

from scenarios.files import atomic_file
from scenarios.outcome import meta_problem
from scenarios.tree import Episode, Label, ThinkNode, ToolNode

KINDS = ("episode", "tool_call", "tool_result", "message", "error")
#: A record longer than this is refused without being parsed, to keep memory bounded.
MAX_LINE_BYTES = 64 * 1024 * 1024
#: A record nested deeper than this is refused: nothing real nests so deep, and a parser
#: recursing through millions of levels would exhaust the stack.
MAX_DEPTH = 200


# -- writing ---------------------------------------------------------------------------
def episode_events(ep: Episode) -> Iterator[dict[str, Any]]:
    head: dict[str, Any] = {"episode": ep.id, "kind": "episode", "family": ep.family}
    if ep.seed is not None:
        head["seed"] = ep.seed
    if ep.meta:
        head["meta"] = ep.meta
    yield head
    for node in ep.nodes:
        if isinstance(node, ThinkNode):
            msg = node.message
            kind = "error" if msg.role == "error" else "message"
            ev: dict[str, Any] = {"episode": ep.id, "kind": kind, "node": node.id, "parent": node.parent}
            if kind == "error":
                ev["message"] = msg.content
            else:
                ev["role"] = msg.role
                ev["content"] = msg.content
                if msg.plan is not None:
                    ev["plan"] = list(msg.plan)
            yield ev
        else:
            call = node.call
            ev = {
                "episode": ep.id,
                "kind": "tool_call",
                "tool": call.tool,
                "args": dict(call.args),
                "call_id": call.call_id or node.id,
                "node": node.id,
                "parent": node.parent,
            }
            if call.step is not None:
                ev["step"] = call.step
            if call.turn is not None:
                ev["turn"] = call.turn
            if node.label is not None:
                ev["label"] = {"loop": node.label.loop, "kind": node.label.kind}
            if node.price or node.tokens:
                ev["cost"] = {"price": node.price, "tokens": node.tokens}
            yield ev
            if node.observation is not None:
                yield result_event(ep.id, call.call_id or node.id, node.observation)


def result_event(episode_id: str, call_id: str, obs: Observation) -> dict[str, Any]:
    """The ``tool_result`` record of an observation; a call that ran without a recorded
    result is written ``"recorded": false`` with no ``content``."""
    res: dict[str, Any] = {"episode": episode_id, "kind": "tool_result", "call_id": call_id}
    if obs.recorded:
        res["content"] = obs.content
    else:
        res["recorded"] = False
    res["error"] = obs.error
    if obs.nudge:
        res["nudge"] = True
    return res


def dumps_events(events: Iterable[dict[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(e, default=repr) + b"\n" for e in events)


def write_trace(path: str | os.PathLike, episodes: Iterable[Episode]) -> None:
    """Write episodes to ``path`` atomically (streamed to a temporary file renamed into place)."""
    with atomic_file(path, binary=True) as fh:
        for ep in episodes:
            fh.write(dumps_events(episode_events(ep)))


# -- reading ---------------------------------------------------------------------------
class TraceError(Exception):
    """The whole input is unusable (missing file, a directory): a one-line message."""


@dataclass
class ReadResult:
    episodes: list[Episode] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # skipped records
    warnings: list[str] = field(default_factory=list)  # used, but incomplete
    records: int = 0

    @property
    def skipped(self) -> int:
        return len(self.problems)


class _Bad(Exception):
    pass


def _require(rec: dict, key: str, typ: type, what: str) -> Any:
    if key not in rec:
        raise _Bad(f"{what} is missing field {key!r}")
    val = rec[key]
    if not isinstance(val, typ):
        raise _Bad(f"{what} field {key!r} must be {_json_type(typ.__name__)}, got {_json_type(type(val).__name__)}")
    return val


def _short(value: Any, limit: int = 60) -> str:
    """``repr`` for a one-line message, clipped: a field may hold megabytes."""
    text = repr(value[: limit + 1] if isinstance(value, str) else value) if not isinstance(value, (dict, list)) \
        else f"<{_json_type(type(value).__name__)}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _json_type(name: str) -> str:
    return {"str": "a string", "dict": "an object", "list": "an array", "bool": "a boolean", "int": "an integer",
            "float": "a number", "NoneType": "null"}.get(name, name)


class _EpisodeBuilder:
    def __init__(self, episode_id: str) -> None:
        self.ep = Episode(episode_id)
        self.last: str | None = None
        self.open_calls: dict[str, list[ToolNode]] = {}
        self.node_ids: set[str] = set()
        self.counter = 0

    def _node_id(self, rec: dict) -> str:
        nid = rec.get("node")
        if nid is None:
            nid = f"n{self.counter}"
            while nid in self.node_ids:
                self.counter += 1
                nid = f"n{self.counter}"
        elif not isinstance(nid, (str, int)) or isinstance(nid, bool):
            raise _Bad("field 'node' must be a string")
        nid = str(nid)
        if nid in self.node_ids:
            raise _Bad(f"duplicate node id {_short(nid)}")
        self.counter += 1
        return nid

    def _parent(self, rec: dict) -> str | None:
        if "parent" not in rec:
            return self.last
        parent = rec["parent"]
        if parent is None:
            return None
        parent = str(parent)
        if parent not in self.node_ids:
            raise _Bad(f"parent {_short(parent)} is not an earlier node of episode {_short(self.ep.id)}")
        return parent

    def add(self, rec: dict) -> None:
        kind = rec["kind"]
        if kind == "episode":
            if self.ep.nodes:
                raise _Bad("episode header must come before the episode's other events")
            family = rec.get("family", "replay")
            if not isinstance(family, str):
                raise _Bad("field 'family' must be a string")
            self.ep.family = family
            seed = rec.get("seed")
            self.ep.seed = seed if isinstance(seed, int) and not isinstance(seed, bool) else None
            meta = rec.get("meta")
            meta = meta if isinstance(meta, dict) else {}
            if (why := meta_problem(meta)) is not None:
                raise _Bad(why)
            self.ep.meta = meta
            return
        if kind == "tool_call":
            tool = _require(rec, "tool", str, "tool_call")
            args = _require(rec, "args", dict, "tool_call")
            call_id = rec.get("call_id")
            if call_id is None:
                raise _Bad("tool_call is missing field 'call_id'")
            call_id = str(call_id)
            label = None
            if "label" in rec and rec["label"] is not None:
                lab = rec["label"]
                if not isinstance(lab, dict) or not isinstance(lab.get("loop"), bool):
                    raise _Bad("field 'label' must be an object with a boolean 'loop'")
                kind_ = lab.get("kind")
                label = Label(lab["loop"], kind_ if isinstance(kind_, str) else None)
            step = rec.get("step")
            turn = rec.get("turn")
            nid = self._node_id(rec)
            parent = self._parent(rec)
            cost = rec.get("cost") if isinstance(rec.get("cost"), dict) else {}
            node = ToolNode(
                nid,
                parent,
                ToolCall(tool, args, call_id, step if isinstance(step, str) else None,
                         turn if isinstance(turn, int) and not isinstance(turn, bool) else None),
                None,
                label,
                price=float(cost.get("price", 0) or 0) if isinstance(cost.get("price", 0), (int, float)) else 0.0,
                tokens=int(cost.get("tokens", 0) or 0) if isinstance(cost.get("tokens", 0), (int, float)) else 0,
            )
            self.open_calls.setdefault(call_id, []).append(node)
        elif kind == "tool_result":
            call_id = rec.get("call_id")
            if call_id is None:
                raise _Bad("tool_result is missing field 'call_id'")
            recorded = rec.get("recorded", True)
            if not isinstance(recorded, bool):
                raise _Bad("tool_result field 'recorded' must be a boolean")
            nudge = rec.get("nudge", False)
            if recorded and "content" not in rec:
                raise _Bad("tool_result is missing field 'content' (write \"recorded\": false for a call "
                           "that ran without a recorded result)")
            if not recorded and "content" in rec:
                raise _Bad("tool_result with \"recorded\": false must not carry 'content'")
            if not recorded and nudge:
                raise _Bad("tool_result with \"recorded\": false cannot be a nudge (a guard's message is always known)")
            error = rec.get("error", False)
            if not isinstance(error, bool):
                raise _Bad("tool_result field 'error' must be a boolean")
            pending = self.open_calls.get(str(call_id))
            if not pending:
                raise _Bad(f"tool_result for call_id {_short(call_id)} has no earlier tool_call without a result")
            # Pair by position: the oldest open call with this id takes the result.
            obs = Observation(rec["content"], error, bool(nudge)) if recorded else unrecorded(error)
            pending.pop(0).observation = obs
            return
        elif kind == "message":
            role = _require(rec, "role", str, "message")
            content = rec.get("content", "")
            if content is None:
                content = ""
            if not isinstance(content, str):
                content = orjson.dumps(content, default=repr).decode()
            plan = rec.get("plan")
            if plan is not None and not (isinstance(plan, list) and all(isinstance(s, str) for s in plan)):
                raise _Bad("field 'plan' must be an array of strings")
            node = ThinkNode(self._node_id(rec), self._parent(rec), Message(role, content, tuple(plan) if plan else None))
        else:  # error
            text = rec.get("message", rec.get("content", ""))
            node = ThinkNode(self._node_id(rec), self._parent(rec), Message("error", str(text)))
        self.ep.add(node)
        self.node_ids.add(node.id)
        self.last = node.id


def iter_lines(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """Lines with their numbers; an over-long line yields ``None`` without being kept."""
    with open(path, "rb") as fh:
        lineno = 0
        while True:
            line = fh.readline(MAX_LINE_BYTES + 1)
            if not line:
                return
            lineno += 1
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                # Skip the rest of this line in bounded chunks.
                while True:
                    chunk = fh.readline(1 << 20)
                    if not chunk or chunk.endswith(b"\n"):
                        break
                yield lineno, None
                continue
            yield lineno, line


def _too_deep(raw: bytes) -> bool:
    """Whether the JSON text ``raw`` nests more than ``MAX_DEPTH`` levels.

    Counting brackets is a C-speed scan; only a record with more brackets than the limit
    is walked, by the stdlib parser, which stops cleanly at the interpreter's recursion
    limit (orjson would recurse as deep as the text goes).
    """
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return False
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        return True
    except (ValueError, UnicodeDecodeError):
        return False  # not valid JSON: orjson will say why
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if d > MAX_DEPTH:
            return True
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return False


def _no_constant(name: str):
    raise ValueError(name)


def loads_json(raw: bytes | str) -> Any:
    """Parse one JSON document safely: ``orjson.JSONDecodeError`` for anything unusable.

    On top of orjson's own checks it refuses documents nested deeper than ``MAX_DEPTH``
    (orjson recurses as deep as the text goes and can overflow the C stack) and names
    NaN/Infinity, which JSON does not have. Importers use it for the same guarantees.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _too_deep(data):
        raise orjson.JSONDecodeError(f"nested deeper than {MAX_DEPTH} levels", "", 0)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if re.search(rb"(?<![\w\"])-?(NaN|Infinity)(?![\w\"])", data):
            raise orjson.JSONDecodeError("NaN and Infinity are not JSON", "", 0) from None
        raise exc from None


def parse_record(raw: bytes) -> dict:
    try:
        rec = loads_json(raw)
    except orjson.JSONDecodeError as exc:
        msg = str(exc).split(":")[0]
        if msg.startswith("nested deeper"):
            raise _Bad(f"record {msg}") from None
        raise _Bad(f"not valid JSON ({msg})") from None
    if not isinstance(rec, dict):
        raise _Bad("a record must be a JSON object")
    ep = rec.get("episode")
    if not isinstance(ep, (str, int)) or isinstance(ep, bool):
        raise _Bad("missing or non-string field 'episode'")
    kind = rec.get("kind")
    if kind not in KINDS:
        raise _Bad(f"field 'kind' must be one of {', '.join(KINDS)}, got {_short(kind)}")
    return rec


def read_trace(path: str | os.PathLike, family: str | None = None) -> ReadResult:
    """Read a trace file. Raises ``TraceError`` only when the file itself is unusable."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory, not a trace file")
    try:
        lines = iter_lines(path)
        result = ReadResult()
        builders: dict[str, _EpisodeBuilder] = {}
        for lineno, raw in lines:
            if raw is None:
                result.problems.append(f"{path}:{lineno}: record longer than {MAX_LINE_BYTES} bytes, skipped")
                continue
            if not raw.strip():
                continue
            result.records += 1
            try:
                rec = parse_record(raw)
                eid = str(rec["episode"])
                builder = builders.get(eid)
                if builder is None:
                    builder = builders[eid] = _EpisodeBuilder(eid)
                builder.add(rec)
            except _Bad as exc:
                result.problems.append(f"{path}:{lineno}: {exc}")
            except RecursionError:
                result.problems.append(f"{path}:{lineno}: record nested too deeply")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if result.records == 0 and not result.problems:
        result.problems.append(f"{path}: empty file (no trace records)")
    for b in builders.values():
        for pending in b.open_calls.values():
            for node in pending:
                result.warnings.append(
                    f"{path}: episode {_short(b.ep.id)}: tool_call {_short(node.call.call_id)} has no tool_result "
                    f"(scored as a call that never ran; write {{\"kind\": \"tool_result\", \"recorded\": false}} "
                    f"if it ran without a recorded result)"
                )
        if family is not None:
            b.ep.family = family
        if b.ep.nodes:
            result.episodes.append(b.ep)
    return result


def loads_trace(text: str | bytes, name: str = "<memory>") -> ReadResult:
    """Read a trace from a string (tests, importers)."""
    import tempfile

    data = text.encode() if isinstance(text, str) else text
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as fh:
        fh.write(data)
    try:
        res = read_trace(fh.name)
        res.problems = [p.replace(fh.name, name) for p in res.problems]
        return res
    finally:
        os.unlink(fh.name)
