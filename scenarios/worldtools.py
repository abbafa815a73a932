"""More stub tools for the world, each modelled on a situation real traces show.

- records (``get_record``, ``update_record``, ``cancel_record``): a booking-style API
  whose writes answer with the whole record, so a write can echo a record read before;
- ``wiki_search``: an encyclopedia lookup that fails with a list of similar titles
  (ReAct's ``Search[...]``); a failure teaches something only when a title is new;
- ``run_code``: a code runner (CaptainAgent's terminal); what runs is the computation,
  so new code printing an old output is progress and the same code again is not;
- ``open_url`` / ``scroll``: a browser viewport; scrolling shows the next screen until
  the end of the page, where it shows the last one again (Magentic-One's scroll stalls);
- ``delegate``: an orchestrator's request to a sub-agent, answered once; the same
  request again, in any words, gets no reply;
- ``bash``: one command tool that reads, edits and tests (see ``scenarios.shell``).

Nothing in a call is ever executed: commands and code are parsed by small, fixed rules.
"""
from __future__ import annotations

import ast
import json
import operator
from dataclasses import replace
from typing import Any, Mapping

from detectors.protocol import Observation

from .lexicon import CONCEPTS, concepts_of

#: Fields of a record an update may change; ``payment`` and ``note`` are not shown in the
#: record's text (an API that answers with a summary of the record, not all of it).
RECORD_FIELDS = ("cabin", "seats", "bags", "payment", "note")
HIDDEN_FIELDS = frozenset({"payment", "note"})
CABINS = ("basic", "economy", "business")


def no_reply() -> Observation:
    """What a delegation that got no reply returns.

    Today an empty text; when the trace format can say "ran, result not recorded" this is
    the one place to switch to it.
    """
    return Observation("")


def norm_path(path: Any) -> str:
    p = str(path).strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    while "//" in p:
        p = p.replace("//", "/")
    return p.rstrip("/") or "/"


def digest(*parts: Any) -> str:
    import hashlib

    return hashlib.blake2s("\x1f".join(map(str, parts)).encode(), digest_size=6).hexdigest()


# -- records ---------------------------------------------------------------------------
def record_ids(seed: int, n: int = 12) -> tuple[str, ...]:
    alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
    out = []
    for i in range(n):
        h = digest(seed, "record", i)
        out.append("".join(alphabet[int(h[2 * k:2 * k + 2], 16) % len(alphabet)] for k in range(6)))
    return tuple(dict.fromkeys(out))


def base_record(seed: int, rid: str) -> dict[str, Any]:
    h = bytes.fromhex(digest(seed, "rec", rid))
    names = sorted(CONCEPTS)
    return {"id": rid, "owner": names[h[0] % len(names)], "status": "active", "cabin": CABINS[h[1] % 3],
            "seats": 1 + h[2] % 4, "bags": h[3] % 3, "payment": f"card_{1000 + h[4] * 7 % 9000}", "note": ""}


def record_text(fields: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in fields.items() if k not in HIDDEN_FIELDS}, sort_keys=True)


# -- code --------------------------------------------------------------------------------
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
        ast.USub: operator.neg, ast.UAdd: operator.pos}


def canonical_code(code: str) -> str:
    """The computation a snippet describes: comments, blank lines and spacing dropped."""
    lines = []
    for line in str(code).splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            lines.append(" ".join(line.replace("(", " ( ").replace(")", " ) ").replace("=", " = ").split()))
    return "\n".join(lines)


def run_snippet(code: str) -> str:
    """Evaluate ``name = expr`` and ``print(expr, ...)`` lines over numbers; anything else
    is an error. Raises ``ValueError`` with the message a terminal would print."""
    if len(code) > 2000:
        raise ValueError("code too long")
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"SyntaxError: {exc.msg}") from None
    env: dict[str, float] = {}
    out: list[str] = []

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ValueError(f"NameError: name '{node.id}' is not defined")
            return env[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("OverflowError: exponent too large")
            try:
                return _OPS[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ValueError("ZeroDivisionError: division by zero") from None
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("unsupported expression")

    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = ev(stmt.value)
        elif (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
              and stmt.value.func.id == "print" and not stmt.value.keywords):
            out.append(" ".join(f"{ev(a):g}" for a in stmt.value.args))
        else:
            raise ValueError("unsupported statement")
    return "\n".join(out)


# -- browser -----------------------------------------------------------------------------
def viewports(seed: int, url: str) -> int:
    """How many screens the page at ``url`` is long."""
    return 3 + int(digest(seed, "screens", url)[:2], 16) % 6


def request_key(instruction: str) -> str:
    """What a delegated request asks for: its concepts, whatever the wording."""
    return ",".join(sorted(concepts_of(instruction)))


class MoreTools:
    """Handlers mixed into ``World``; they use its ``seed``, ``files``, ``_page_text``,
    ``_rank`` and ``docs``, and the per-path ``WorldState``."""

    # -- records
    def _record(self, state, rid: str) -> dict[str, Any] | None:
        if rid not in self.record_ids():
            return None
        fields = base_record(self.seed, rid)
        for r, k, v in state.records:
            if r == rid:
                fields[k] = v
        return fields

    def record_ids(self) -> tuple[str, ...]:
        return record_ids(self.seed)

    def _t_get_record(self, state, args: Mapping[str, Any]):
        rid = str(args["record_id"]).strip()
        fields = self._record(state, rid)
        if fields is None:
            return Observation(f"Error: record {rid} not found", error=True), frozenset({f"norecord:{rid}"}), state
        text = record_text(fields)
        return Observation(text), frozenset({f"record:{rid}:{digest(text)}"}), state

    def _t_update_record(self, state, args: Mapping[str, Any]):
        rid, key, value = str(args["record_id"]).strip(), str(args["field"]), args["value"]
        fields = self._record(state, rid)
        if fields is None:
            return Observation(f"Error: record {rid} not found", error=True), frozenset({f"norecord:{rid}"}), state
        if key not in RECORD_FIELDS:
            return Observation(f"Error: field {key} cannot be updated", error=True), frozenset({f"badfield:{key}"}), state
        if fields["status"] != "active":
            return Observation(f"Error: record {rid} is {fields['status']}", error=True), frozenset({f"inactive:{rid}"}), state
        # A write is an action: what it gains is the change it makes to this record's state.
        before = digest(sorted(fields.items()))
        fields[key] = value
        state = replace(state, records=state.records + ((rid, key, value),))
        text = record_text(fields)
        return Observation(text), frozenset({f"rwrite:{rid}:{key}:{value}:{before}", f"record:{rid}:{digest(text)}"}), state

    def _t_cancel_record(self, state, args: Mapping[str, Any]):
        rid = str(args["record_id"]).strip()
        fields = self._record(state, rid)
        if fields is None:
            return Observation(f"Error: record {rid} not found", error=True), frozenset({f"norecord:{rid}"}), state
        if fields["status"] != "active":
            return Observation(f"Error: record {rid} is {fields['status']}", error=True), frozenset({f"inactive:{rid}"}), state
        state = replace(state, records=state.records + ((rid, "status", "cancelled"),))
        fields["status"] = "cancelled"
        text = record_text(fields)
        return Observation(text), frozenset({f"rcancel:{rid}", f"record:{rid}:{digest(text)}"}), state

    # -- encyclopedia
    def titles(self) -> dict[str, Any]:
        """Each distinct document title and its first document (the documents never change)."""
        out = self.__dict__.get("_titles")
        if out is None:
            out = {}
            for d in self.docs:
                out.setdefault(d.title, d)
            self.__dict__["_titles"] = out
            self.__dict__["_folded"] = {t.casefold(): d for t, d in out.items()}
        return out

    def title_match(self, entity: str):
        """The document whose title ``entity`` names (case, spacing and quotes aside), or None."""
        self.titles()
        return self.__dict__["_folded"].get(" ".join(entity.strip().strip("\"'").split()).casefold())

    def similar_titles(self, entity: str, k: int = 5) -> list[str]:
        qc = concepts_of(entity)
        cache = self.__dict__.setdefault("_similar", {})
        hit = cache.get(qc)
        if hit is None:
            scored = sorted(((-len(d.concepts & qc), t) for t, d in self.titles().items() if d.concepts & qc))
            hit = cache[qc] = [t for _, t in scored[:k]]
        return hit

    def _t_wiki_search(self, state, args: Mapping[str, Any]):
        entity = str(args["entity"])
        d = self.title_match(entity)
        if d is not None:
            return Observation(d.body), frozenset({f"doc:{d.id}"}), state
        similar = self.similar_titles(entity)
        listed = ", ".join(repr(t) for t in similar)
        # Not flagged as an error: the look-up ran and answered, as ReAct's Search does.
        return (Observation(f"Could not find [{entity}]. Similar: [{listed}]."),
                # A failure teaches only the titles it suggests (none: nothing learned).
                frozenset(f"title:{t}" for t in similar), state)

    # -- code
    def _t_run_code(self, state, args: Mapping[str, Any]):
        code = str(args["code"])
        ran = f"ran:{digest(canonical_code(code))}"
        try:
            out = run_snippet(code)
        except ValueError as exc:
            return Observation(f"exitcode: 1 (execution failed)\nCode output: {exc}", error=True), frozenset({ran}), state
        return Observation(f"exitcode: 0 (execution succeeded)\nCode output: {out}"), frozenset({ran}), state

    # -- browser
    def _viewport(self, state, url: str, i: int):
        n = viewports(self.seed, url)
        text = f"{url} (screen {i + 1} of {n}, {100 * (i + 1) // n}% of the page)\n{self._page_text(f'{url}#{i}')}"
        return Observation(text), frozenset({f"view:{url}:{i}"}), replace(state, browser=(url, i))

    def _t_open_url(self, state, args: Mapping[str, Any]):
        return self._viewport(state, str(args["url"]).strip(), 0)

    def _t_scroll(self, state, args: Mapping[str, Any]):
        direction = str(args.get("direction", "down")).strip().lower()
        url, i = state.browser
        if not url:
            return Observation("Error: no page is open", error=True), frozenset({"view:none"}), state
        n = viewports(self.seed, url)
        i = min(n - 1, i + 1) if direction == "down" else max(0, i - 1)
        return self._viewport(state, url, i)

    # -- delegation
    def _t_delegate(self, state, args: Mapping[str, Any]):
        agent, key = str(args.get("agent", "assistant")), request_key(str(args["instruction"]))
        if not key:
            return Observation(f"{agent}: I do not understand the request.", error=True), frozenset({f"noreq:{agent}"}), state
        if (agent, key) in state.delegated:
            # The sub-agent fulfilled this request already and does not answer it again.
            return no_reply(), frozenset(), state
        state = replace(state, delegated=state.delegated + ((agent, key),))
        return (Observation(f"{agent}: done. {self._page_text('delegate:' + key)}"), frozenset({f"reply:{agent}:{key}"}),
                state)

