"""Import OpenTelemetry traces in OTLP JSON: the tool executions of GenAI agents.

Input is what the OTLP JSON file exporter (``opentelemetry-exporter-otlp-json-file``)
and the collector's ``file`` exporter write: one ``{"resourceSpans": [...]}`` document
per line (JSON Lines), or a single such document; snake_case keys are accepted too.

Mapping:

- one episode per trace id (episode id = the hex trace id), in order of first appearance;
- a **tool span** is one with ``gen_ai.operation.name == "execute_tool"`` (both the
  current and the ≤ v1.36 GenAI conventions), a span named ``execute_tool <tool>``, or an
  OpenInference ``TOOL`` span (Phoenix);
- tool name: ``gen_ai.tool.name`` (else ``tool.name``, else the span name's tail); call id:
  ``gen_ai.tool.call.id`` (else the span id);
- arguments: ``gen_ai.tool.call.arguments`` (≥ v1.37), else the deprecated
  ``gen_ai.tool.input`` or OpenInference ``input.value``, else — the ≤ v1.36 way, where the
  model's tool calls are content events — the ``tool_calls`` of a ``gen_ai.choice`` /
  ``gen_ai.assistant.message`` span event anywhere in the trace with the same call id.
  A JSON string is parsed; a string that is not a JSON object is kept as ``{"_raw": text}``;
- LangChain under OpenInference: a TOOL span's ``output.value`` is the ``ToolMessage`` (its
  ``content`` is the result, its ``tool_call_id`` the call id) and the arguments are the
  model's, on the LLM span (``llm.output_messages.*.tool_calls.*.tool_call.function.arguments``);
- result: ``gen_ai.tool.call.result``, else ``gen_ai.tool.output`` / ``output.value``, else
  the ``content`` of a ``gen_ai.tool.message`` span event with the same ``id`` (≤ v1.36: the
  reply as sent back to the model, on the next chat span). Strings are kept as
  they are, structured values written as JSON. Results are opt-in: a call without one ran
  all the same and is imported as unrecorded (``recorded: false``), so detectors see it;
- a span whose status is ERROR (or that carries ``error.type``) failed: its result, or the
  status message / exception event when it has none, is an error observation;
- tree: tool calls are ordered by start time. Calls under the same agent (nearest
  enclosing agent or tool span) form a chain; a call that starts before the previous one
  ended is a parallel branch (same parent as that one); the calls of a sub-agent — an
  agent span nested in another, or spans under a tool span (agent as a tool) — branch
  off the last call of the enclosing agent that started before the sub-agent did.

No separate ``openai-agents`` format: the OpenAI Agents SDK has no file exporter of its
own (its traces go to OpenAI's dashboard, or to OTel through an instrumentation), and
the OTel instrumentations of it (OpenInference, Logfire, OpenLIT) emit the TOOL /
``execute_tool`` spans read here.

Outcome and tokens (SPEC §11):

- the run's ``meta["outcome"]`` is the root span's status: ERROR (or ``error.type``) is a
  ``failure``, OK a ``success``, UNSET ``unknown``. OK says the run ended without an error,
  not that the task was solved; a harness that knows more should set the status so;
- a tool call's ``tokens`` are those of the model turn that issued it: each model span
  (``gen_ai.operation.name`` chat / text_completion / generate_content, or an OpenInference
  ``LLM`` span) with ``gen_ai.usage.input_tokens`` + ``output_tokens`` (or the older
  ``prompt_tokens`` / ``completion_tokens``, or OpenInference ``llm.token_count.*``) gives
  them to the first tool call that starts after it ended; model turns after the last call
  (the final answer) go to the last call, so the calls' tokens sum to the trace's. A tool
  span with usage of its own keeps that. A trace with no usage at all records none (0).

A trace without tool spans is skipped with a problem line; a file that is OTLP
protobuf, or whose documents hold no tool span at all, gets one clear line. A malformed
document or span is reported with its line and skipped; the good traces are imported.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import orjson

from scenarios.outcome import FAILURE, OUTCOME_KEY, SUCCESS, UNKNOWN
from scenarios.trace import iter_lines, loads_json
from scenarios.tree import Episode

from ._common import MAX_FILE_BYTES, EpisodeBuilder, Report, each_file, parse_arguments, unique_id

FORMAT = "otel"
SUFFIXES = (".jsonl", ".json", ".ndjson", ".otlp")

TOOL_OPERATION = "execute_tool"
AGENT_OPERATIONS = frozenset({"invoke_agent", "create_agent", "invoke_workflow"})
ARGUMENT_KEYS = ("gen_ai.tool.call.arguments", "gen_ai.tool.input", "input.value")
RESULT_KEYS = ("gen_ai.tool.call.result", "gen_ai.tool.output", "output.value")
#: ≤ v1.36 content events: the model's message carrying tool calls, and a tool's reply.
CALL_EVENTS = frozenset({"gen_ai.choice", "gen_ai.assistant.message"})
RESULT_EVENT = "gen_ai.tool.message"
STATUS_ERROR = (2, "STATUS_CODE_ERROR")
STATUS_OK = (1, "STATUS_CODE_OK")
#: Spans of one model call: where a trace records the tokens a turn spent.
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
#: (input, output) usage attributes, newest convention first; OpenInference's last.
USAGE_KEYS = (("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
              ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),
              ("llm.token_count.prompt", "llm.token_count.completion"))


@dataclass
class Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int
    end: int
    attrs: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status_code: Any
    status_message: str
    order: int  # position in the file, the tie-breaker for equal start times
    children: list["Span"] = field(default_factory=list)

    @property
    def operation(self) -> str | None:
        op = self.attrs.get("gen_ai.operation.name")
        return op if isinstance(op, str) else None

    @property
    def is_tool(self) -> bool:
        if self.operation is not None:
            return self.operation == TOOL_OPERATION
        if str(self.attrs.get("openinference.span.kind", "")).upper() == "TOOL":
            return True
        return self.name.startswith(TOOL_OPERATION + " ")

    @property
    def is_agent(self) -> bool:
        return self.operation in AGENT_OPERATIONS or str(self.attrs.get("openinference.span.kind", "")).upper() == "AGENT"

    @property
    def failed(self) -> bool:
        return self.status_code in STATUS_ERROR or "error.type" in self.attrs

    @property
    def is_model(self) -> bool:
        return self.operation in MODEL_OPERATIONS or str(self.attrs.get("openinference.span.kind", "")).upper() == "LLM"

    @property
    def tokens(self) -> int:
        """Tokens the span records (input + output), 0 when it records none."""
        for keys in USAGE_KEYS:
            vals = [self.attrs.get(k) for k in keys]
            nums = [int(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0]
            if nums:
                return sum(nums)
        return 0


class _BadSpan(Exception):
    pass


# -- OTLP JSON decoding ------------------------------------------------------------------
def _get(obj: dict, camel: str, snake: str) -> Any:
    return obj[camel] if camel in obj else obj.get(snake)


def any_value(v: Any) -> Any:
    """The Python value of an OTLP ``AnyValue`` (``{"stringValue": ...}`` and friends)."""
    if not isinstance(v, dict) or not v:
        return None
    (kind, val), = list(v.items())[:1]
    if kind in ("stringValue", "string_value", "boolValue", "bool_value", "doubleValue", "double_value"):
        return val
    if kind in ("intValue", "int_value"):
        try:
            return int(val)  # int64 travels as a string in OTLP JSON
        except (TypeError, ValueError):
            return val
    if kind in ("arrayValue", "array_value"):
        return [any_value(x) for x in (val or {}).get("values", [])]
    if kind in ("kvlistValue", "kvlist_value"):
        return attributes((val or {}).get("values", []))
    if kind in ("bytesValue", "bytes_value"):
        return val
    return None


def attributes(kvs: Any) -> dict[str, Any]:
    if not isinstance(kvs, list):
        return {}
    return {kv["key"]: any_value(kv.get("value")) for kv in kvs if isinstance(kv, dict) and isinstance(kv.get("key"), str)}


def _nanos(raw: Any, what: str) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise _BadSpan(f"{what} must be an integer (nanoseconds), got {str(raw)[:40]!r}") from None


def _span(raw: Any, order: int) -> Span:
    if not isinstance(raw, dict):
        raise _BadSpan("a span must be an object")
    trace_id, span_id = _get(raw, "traceId", "trace_id"), _get(raw, "spanId", "span_id")
    if not isinstance(trace_id, str) or not trace_id:
        raise _BadSpan("span has no 'traceId'")
    if not isinstance(span_id, str) or not span_id:
        raise _BadSpan(f"span of trace {trace_id[:32]} has no 'spanId'")
    parent = _get(raw, "parentSpanId", "parent_span_id")
    start = _nanos(_get(raw, "startTimeUnixNano", "start_time_unix_nano") or 0, "startTimeUnixNano")
    end = _nanos(_get(raw, "endTimeUnixNano", "end_time_unix_nano") or start, "endTimeUnixNano")
    status = raw.get("status") if isinstance(raw.get("status"), dict) else {}
    events = [
        (str(ev.get("name", "")), attributes(ev.get("attributes")))
        for ev in raw.get("events") or [] if isinstance(ev, dict)
    ]
    return Span(
        trace_id, span_id, parent if isinstance(parent, str) and parent else None, str(raw.get("name", "")),
        start, end, attributes(raw.get("attributes")), events, status.get("code"),
        str(status.get("message") or ""), order,
    )


def _spans_of(doc: Any, where: str, report: Report, order: int) -> list[Span]:
    if not isinstance(doc, dict):
        report(f"{where}: expected an OTLP JSON object with 'resourceSpans', skipped")
        return []
    rss = _get(doc, "resourceSpans", "resource_spans")
    if not isinstance(rss, list):
        report(f"{where}: no 'resourceSpans' list (not an OTLP JSON trace document), skipped")
        return []
    out: list[Span] = []
    for rs in rss:
        for ss in (_get(rs, "scopeSpans", "scope_spans") or []) if isinstance(rs, dict) else []:
            for raw in (ss.get("spans") or []) if isinstance(ss, dict) else []:
                try:
                    out.append(_span(raw, order + len(out)))
                except _BadSpan as exc:
                    report(f"{where}: {exc}, span skipped")
    return out


#: Bytes that JSON text never holds outside strings: a protobuf message is full of them.
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 13))


def _looks_binary(head: bytes) -> bool:
    stripped = head.lstrip()
    if stripped[:1] in (b"{", b"[", b""):
        return False
    return any(c in _CONTROL for c in head[:256])


def read_spans(path: Path, report: Report) -> list[Span] | None:
    """Every span of an OTLP JSON file, or ``None`` (with one problem) if the file is unusable."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if _looks_binary(head):
        report(f"{path}: looks like OTLP protobuf (binary), not OTLP JSON; export with the OTLP JSON file "
               "exporter or the collector's file exporter (format: json), skipped")
        return None
    spans: list[Span] = []
    whole = None
    if path.stat().st_size <= MAX_FILE_BYTES:
        try:
            whole = loads_json(path.read_bytes())
        except orjson.JSONDecodeError:
            pass  # JSON Lines, or broken: read line by line below
    if whole is not None:
        return _spans_of(whole, str(path), report, 0)
    for lineno, raw in iter_lines(path):
        where = f"{path}:{lineno}"
        if raw is None:
            report(f"{where}: record too long, skipped")
            continue
        if not raw.strip():
            continue
        try:
            doc = loads_json(raw)
        except orjson.JSONDecodeError as exc:
            report(f"{where}: not valid JSON ({str(exc).split(':')[0]}), skipped")
            continue
        spans.extend(_spans_of(doc, where, report, len(spans)))
    return spans


# -- one trace -> one episode ----------------------------------------------------------
def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for k in keys:
        if k in attrs and attrs[k] is not None:
            return attrs[k]
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else orjson.dumps(value, default=repr).decode()


def _event_json(attrs: dict[str, Any], key: str) -> Any:
    """A content event's field: an attribute of its own, or inside a JSON ``gen_ai.event.content``."""
    if key in attrs:
        return attrs[key]
    body = attrs.get("gen_ai.event.content")
    if isinstance(body, str):
        try:
            body = loads_json(body)
        except orjson.JSONDecodeError:
            return None
    return body.get(key) if isinstance(body, dict) else None


def _results_from_events(spans: list[Span]) -> dict[str, Any]:
    """call id -> result, from the ≤ v1.36 ``gen_ai.tool.message`` events sent back to the model."""
    found: dict[str, Any] = {}
    for sp in spans:
        for name, attrs in sp.events:
            if name == RESULT_EVENT:
                cid, content = _event_json(attrs, "id"), _event_json(attrs, "content")
                if isinstance(cid, str) and cid and content is not None:
                    found.setdefault(cid, content)
    return found


def _tool_calls_from_events(spans: list[Span]) -> dict[str, Any]:
    """call id -> arguments, from the ≤ v1.36 content events of the model's responses."""
    found: dict[str, Any] = {}
    for sp in spans:
        for name, attrs in sp.events:
            if name not in CALL_EVENTS:
                continue
            calls = _event_json(attrs, "tool_calls")
            if calls is None:
                msg = _event_json(attrs, "message")
                calls = msg.get("tool_calls") if isinstance(msg, dict) else None
            if isinstance(calls, str):
                try:
                    calls = loads_json(calls)
                except orjson.JSONDecodeError:
                    calls = None
            for call in calls if isinstance(calls, list) else []:
                if isinstance(call, dict) and isinstance(call.get("id"), str):
                    fn = call.get("function") if isinstance(call.get("function"), dict) else {}
                    found.setdefault(call["id"], fn.get("arguments"))
    return found


def _tool_calls_from_llm_spans(spans: list[Span]) -> dict[str, Any]:
    """call id -> arguments, from OpenInference LLM spans' flattened output messages
    (``llm.output_messages.I.message.tool_calls.J.tool_call.{id,function.arguments}``)."""
    found: dict[str, Any] = {}
    for sp in spans:
        for key, cid in sp.attrs.items():
            if key.startswith("llm.output_messages.") and key.endswith(".tool_call.id") and isinstance(cid, str):
                found.setdefault(cid, sp.attrs.get(key[: -len("id")] + "function.arguments"))
    return found


def _langchain_tool_message(value: Any) -> dict[str, Any] | None:
    """The fields of a LangChain ``ToolMessage`` that OpenInference wrote as a TOOL span's
    ``output.value`` (``{"type": "tool", "data": {"content": ..., "tool_call_id": ...}}``)."""
    if not (isinstance(value, str) and value.startswith('{"type": "tool"')):
        return None
    try:
        doc = loads_json(value)
    except orjson.JSONDecodeError:
        return None
    data = doc.get("data") if isinstance(doc, dict) and doc.get("type") == "tool" else None
    return data if isinstance(data, dict) and "content" in data else None


def _tool_name(sp: Span) -> str:
    name = _first(sp.attrs, ("gen_ai.tool.name", "tool.name"))
    if isinstance(name, str) and name:
        return name
    if sp.name.startswith(TOOL_OPERATION + " "):
        return sp.name[len(TOOL_OPERATION) + 1:]
    return sp.name or "unknown_tool"


def _result(sp: Span, call_id: str, event_results: dict[str, Any]) -> tuple[str | None, bool]:
    value = _first(sp.attrs, RESULT_KEYS)
    if value is None:
        value = event_results.get(call_id)
    failed = sp.failed
    if value is None and failed:
        value = sp.status_message or next(
            (str(a.get("exception.message", "")) for n, a in sp.events if n == "exception"), ""
        ) or str(sp.attrs.get("error.type", "error"))
    return (None if value is None else _text(value)), failed


def _context(sp: Span, by_id: dict[str, Span]) -> Span | None:
    """The agent a call belongs to: the nearest enclosing agent span or tool span."""
    cur = by_id.get(sp.parent_id) if sp.parent_id else None
    seen = 0
    while cur is not None and seen < len(by_id):
        if cur.is_tool or cur.is_agent:
            return cur
        cur = by_id.get(cur.parent_id) if cur.parent_id else None
        seen += 1
    return None


def build_episode(trace_id: str, spans: list[Span], path: Path, report: Report, seen: set[str]) -> Episode | None:
    by_id = {sp.span_id: sp for sp in spans}
    tools = sorted((sp for sp in spans if sp.is_tool), key=lambda s: (s.start, s.order))
    if not tools:
        report(f"{path}: trace {trace_id}: no tool spans (gen_ai.operation.name = execute_tool), skipped")
        return None
    event_args, event_results = _tool_calls_from_events(spans), _results_from_events(spans)
    llm_args = _tool_calls_from_llm_spans(spans)
    root = next((sp for sp in sorted(spans, key=lambda s: (s.start, s.order)) if sp.parent_id not in by_id), None)
    meta: dict[str, Any] = {"trace_id": trace_id}
    if root is not None and root.name:
        meta["root_span"] = root.name
    meta[OUTCOME_KEY] = _outcome(root)
    b = EpisodeBuilder(unique_id(seen, trace_id), FORMAT, path, **meta)

    # Per agent context: its calls so far as (span, node id), in start order.
    chains: dict[str | None, list[tuple[Span, str]]] = {}
    node_of: dict[str, str] = {}  # tool span id -> node id

    def attach_point(ctx: Span | None, before: int) -> str | None:
        """Where a sub-agent's first call hangs: the enclosing agent's last call started earlier."""
        if ctx is None:
            return None
        if ctx.is_tool and ctx.span_id in node_of:
            return node_of[ctx.span_id]
        outer = _context(ctx, by_id)
        earlier = [nid for s, nid in chains.get(outer.span_id if outer else None, []) if s.start <= before]
        return earlier[-1] if earlier else attach_point(outer, before)

    for sp in tools:
        ctx = _context(sp, by_id)
        key = ctx.span_id if ctx is not None else None
        chain = chains.setdefault(key, [])
        if not chain:
            parent = attach_point(ctx, sp.start)
        else:
            prev_span, prev_node = chain[-1]
            # Started before the previous call ended: run in parallel, a sibling branch.
            parent = b.ep.by_id[prev_node].parent if sp.start < prev_span.end else prev_node
        where = f"{path}: trace {trace_id}: span {sp.span_id}"
        call_id = sp.attrs.get("gen_ai.tool.call.id")
        # LangChain under OpenInference: the call id and result are in the ToolMessage written
        # as output.value, the arguments on the model's LLM span (input.value is the tool's input text).
        message = _langchain_tool_message(sp.attrs.get("output.value"))
        if call_id in (None, "") and message is not None:
            call_id = message.get("tool_call_id")
        call_id = str(call_id) if call_id not in (None, "") else sp.span_id
        raw_args = llm_args.get(call_id) if message is not None else None
        if raw_args is None:
            raw_args = _first(sp.attrs, ARGUMENT_KEYS)
        if raw_args is None:
            raw_args = event_args.get(call_id) or llm_args.get(call_id)
        if isinstance(raw_args, str) and not raw_args.lstrip().startswith(("{", "[")):
            args: dict[str, Any] = {"_raw": raw_args}  # a plain-text argument is data, not a fault
        else:
            args = parse_arguments(raw_args, report, where)
        node = b.call(_tool_name(sp), args, call_id, parent=parent)
        content, failed = _result(sp, call_id, event_results)
        if message is not None:
            content, failed = _text(message["content"]), failed or message.get("status") == "error"
        if content is not None:
            b.result(node, content, failed)
        else:
            # An execute_tool span is a call that ran; results are opt-in, so most have none.
            b.unrecorded(node, failed)
        chain.append((sp, node.id))
        node_of[sp.span_id] = node.id
    for node, spent in zip(b.ep.tool_nodes(), call_tokens(tools, spans)):
        node.tokens = spent
    return b.ep


def _outcome(root: Span | None) -> str:
    if root is None:
        return UNKNOWN
    if root.failed:
        return FAILURE
    return SUCCESS if root.status_code in STATUS_OK else UNKNOWN


def call_tokens(tools: list[Span], spans: list[Span]) -> list[int]:
    """Tokens per tool span (in ``tools``' order): its own usage, else that of the model turns
    that issued it (ended at or before its start, after the previous call's start); the model
    turns after the last call go to the last call."""
    out = [sp.tokens for sp in tools]
    if not tools:
        return out
    starts = [sp.start for sp in tools]
    for model in sorted((sp for sp in spans if sp.is_model and not sp.is_tool and sp.tokens), key=lambda s: (s.end, s.order)):
        k = next((i for i, t in enumerate(starts) if t >= model.end), len(tools) - 1)
        if not tools[k].tokens:
            out[k] += model.tokens
    return out


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    spans = read_spans(path, report)
    if spans is None:
        return
    traces: dict[str, list[Span]] = {}
    for sp in spans:
        traces.setdefault(sp.trace_id, []).append(sp)
    if not any(sp.is_tool for sp in spans):
        report(f"{path}: {len(spans)} spans in {len(traces)} traces but no tool spans "
               "(gen_ai.operation.name = execute_tool); nothing imported")
        return
    for trace_id, group in traces.items():
        ep = build_episode(trace_id, group, path, report, seen)
        if ep is not None:
            yield ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    return each_file(path, SUFFIXES, _iter_file, problems)
