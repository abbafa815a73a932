"""Import OpenHands evaluation output (``output.jsonl``): one run per line, its ``history``
the run's event stream.

OpenHands' benchmark harness (``evaluation/benchmarks/*/run_infer.py``, CodeActAgent)
writes a line ``{instance_id, instruction, metadata, history, test_result, ...}`` per task.
``history`` holds the events in order: actions (``"action": "run" | "read" | "edit" |
"run_ipython" | "think" | "finish" | "message" | ...``, an integer ``id``) and observations
(``"observation": ...``, ``cause`` = the id of the action they answer). Mapping:

- An action with ``tool_call_metadata`` is the tool call the model made: the tool is
  ``function_name`` and the arguments are the ones the model sent — the call of that
  ``tool_call_id`` in ``model_response.choices[0].message.tool_calls``, parsed like the
  ``openai`` importer does — so an editor call stays ``str_replace_editor`` with its
  ``command`` (view / create / str_replace / insert / undo_edit) and a shell call
  ``execute_bash``, the names tool effects are declared for (``detectors/effects.py``).
  When the response is not kept, the action's own ``args`` stand in, without OpenHands'
  bookkeeping keys (``thought``, ``confirmation_state``, ...). The action's ``thought``,
  when there is one, becomes an ``assistant`` ThinkNode before the call.
- An action without ``tool_call_metadata`` (older outputs, the resolver's) is a call
  named by what it does: ``run`` -> ``execute_bash {command}``, ``run_ipython`` ->
  ``execute_ipython_cell {code}``, ``read`` -> ``str_replace_editor {command: "view",
  path}``, ``edit`` -> ``str_replace_editor`` with the action's edit arguments, and any
  other tool action under its own name with its ``args``.
- ``message`` actions become ThinkNodes (``user`` or ``assistant`` by ``source``), the
  ``system`` action a ``system`` ThinkNode; ``recall`` (OpenHands' own memory lookup),
  state changes and other bookkeeping events are not calls and are left out.
- An observation is the result of the call whose action ``id`` is its ``cause`` (without
  one, of the call with its ``tool_call_id``; an output stripped of event ids pairs results
  with the oldest call still awaiting one). An observation of no action — an ``error``
  OpenHands raised for a tool call it refused before running (an unknown ``command``) — is
  left out with the call it answers, which the output does not record. It is an error when it is an
  ``error`` observation, an editor observation (``read`` / ``edit``) whose text starts
  with ``ERROR:`` (how the editor reports a refused view or edit: ``old_str`` not found or
  not unique, a missing path), or when ``extras.metadata.exit_code`` (older outputs:
  ``extras.exit_code``) is non-zero (-1, "no exit code yet", is not an error). ``turn`` is the action's index in ``history``.

The agent SDK (OpenHands V1, ``OpenHands/benchmarks``) writes the same lines with typed
events (``"kind"``): an ``ActionEvent`` is a call named by its ``tool_name`` with the model's
``tool_call.arguments`` (its ``thought`` before it), an ``ObservationEvent`` the result of
the call with its ``tool_call_id`` (the command's ``output`` or the content; an error when
``error`` is true or the exit code is non-zero), ``AgentErrorEvent`` and
``UserRejectObservation`` failed results, ``MessageEvent`` and ``SystemPromptEvent``
ThinkNodes; state updates and condensations are left out.

Episode ids are ``<file stem>:<instance_id>`` (``<file stem>:<k>``, k the line's index
among the file's non-blank lines, without one). The outcome
is ``success`` / ``failure`` where the line records whether the task was solved —
``report.resolved`` or ``test_result.report.resolved`` (the harness's evaluation written
back), ``resolved`` or the resolver's ``success`` — and ``unknown`` otherwise: an
``output.jsonl`` before evaluation does not say. ``meta`` keeps the model
(``metadata.llm_config.model``, the SDK's ``metadata.llm.model``) and the agent class.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from scenarios.outcome import FAILURE, OUTCOME_KEY, SUCCESS, UNKNOWN
from scenarios.tree import Episode, ToolNode

from ._common import EpisodeBuilder, Report, as_text, each_file, json_records, parse_arguments, unique_id

FORMAT = "openhands"
SUFFIXES = (".jsonl", ".json")

#: Actions that are not tool calls: conversation, OpenHands' own bookkeeping.
_NOT_CALLS = {"message", "system", "recall", "change_agent_state", "null", "condensation", "condensation_request"}
#: Keys OpenHands adds to an action's ``args`` that the model never sent.
_BOOKKEEPING = {"thought", "confirmation_state", "security_risk", "is_input", "blocking", "hidden",
                "keep_prompt", "impl_source", "is_confirmed", "kernel_init_code", "include_extra",
                "translated_ipython_code", "wait_for_response", "image_urls"}


def outcome_of(rec: dict[str, Any]) -> str:
    """``success``/``failure`` where the line says whether the task was solved, else ``unknown``."""
    candidates = [rec.get("report"), (rec.get("test_result") or {}).get("report")
                  if isinstance(rec.get("test_result"), dict) else None]
    for report in candidates:
        if isinstance(report, dict) and isinstance(report.get("resolved"), bool):
            return SUCCESS if report["resolved"] else FAILURE
    for key in ("resolved", "success"):
        if isinstance(rec.get(key), bool):
            return SUCCESS if rec[key] else FAILURE
    return UNKNOWN


def _model_arguments(meta: dict[str, Any]) -> Any:
    """The raw arguments of the call ``meta`` names, from the model response it keeps."""
    try:
        calls = meta["model_response"]["choices"][0]["message"]["tool_calls"]
    except (KeyError, IndexError, TypeError):
        return None
    for tc in calls or []:
        if isinstance(tc, dict) and tc.get("id") == meta.get("tool_call_id"):
            fn = tc.get("function")
            return fn.get("arguments") if isinstance(fn, dict) else None
    return None


def _legacy_call(action: str, args: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The call an action without tool-call metadata stands for."""
    kept = {k: v for k, v in args.items() if k not in _BOOKKEEPING}
    if action == "run":
        return "execute_bash", {"command": args.get("command", "")}
    if action == "run_ipython":
        return "execute_ipython_cell", {"code": args.get("code", "")}
    if action == "read":
        return "str_replace_editor", {"command": "view", "path": args.get("path", "")}
    if action == "edit":
        return "str_replace_editor", {k: v for k, v in kept.items() if v not in (None, "")}
    return action, kept


def _is_error(event: dict[str, Any]) -> bool:
    if event.get("observation") == "error":
        return True
    if event.get("observation") in ("read", "edit") and as_text(event.get("content")).startswith("ERROR:"):
        return True  # the editor (openhands-aci) reports a refused view or edit in the text
    extras = event.get("extras")
    if not isinstance(extras, dict):
        return False
    meta = extras.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else extras.get("exit_code")
    return isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)


def add_history(builder: EpisodeBuilder, history: list[Any], report: Report, where: str) -> None:
    """Append an OpenHands event list to ``builder``."""
    by_action: dict[Any, ToolNode] = {}
    by_call_id: dict[str, ToolNode] = {}
    awaiting: list[ToolNode] = []  # calls without a result yet, oldest first
    for j, ev in enumerate(history):
        here = f"{where}: history[{j}]"
        if not isinstance(ev, dict):
            report(f"{here}: an event must be an object, skipped")
            continue
        if isinstance(ev.get("kind"), str):  # the agent SDK's (V1) typed events
            _add_sdk_event(builder, ev, j, by_call_id, awaiting, report, here)
            continue
        action, observation = ev.get("action"), ev.get("observation")
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        meta = ev.get("tool_call_metadata") if isinstance(ev.get("tool_call_metadata"), dict) else None
        if isinstance(action, str):
            if action == "message":
                builder.message("user" if ev.get("source") == "user" else "assistant", as_text(args.get("content")))
                continue
            if action == "system":
                builder.message("system", as_text(args.get("content")))
                continue
            if action in _NOT_CALLS:
                continue
            thought = args.get("thought")
            if isinstance(thought, str) and thought.strip():
                builder.message("assistant", thought)
            if meta is not None and isinstance(meta.get("function_name"), str):
                tool = meta["function_name"]
                raw = _model_arguments(meta)
                call_args = (parse_arguments(raw, report, f"{here} ({tool})") if raw is not None
                             else _legacy_call(action, args)[1])
                cid = meta.get("tool_call_id")
            else:
                tool, call_args = _legacy_call(action, args)
                cid = None
            node = builder.call(tool, call_args, None if cid in (None, "") else str(cid), turn=j)
            if ev.get("id") is not None:
                by_action[ev["id"]] = node
            if cid not in (None, ""):
                by_call_id[str(cid)] = node
            awaiting.append(node)
            continue
        if isinstance(observation, str):
            if ev.get("cause") is not None:
                node = by_action.get(ev["cause"])
            elif meta is not None and meta.get("tool_call_id") is not None:
                node = by_call_id.get(str(meta["tool_call_id"]))
            elif "id" not in ev:  # an output stripped of ids: results follow their calls in order
                node = awaiting[0] if awaiting and observation not in _NOT_CALLS else None
            else:  # an error OpenHands raised for a call it refused to run (no action event)
                node = None
            at = next((i for i, n in enumerate(awaiting) if n is node), None)
            if at is None:
                continue  # an observation of no call (recall results, state changes) or a second one
            del awaiting[at]
            builder.result(node, as_text(ev.get("content")), _is_error(ev))
            continue
        report(f"{here}: neither an action nor an observation, skipped")


def _sdk_text(obs: dict[str, Any]) -> str:
    """An SDK observation's text: a command's ``output``, content parts, a message."""
    for key in ("output", "content", "message", "text"):
        if obs.get(key) not in (None, "", []):
            return as_text(obs[key])
    return ""


def _sdk_error(obs: dict[str, Any]) -> bool:
    if obs.get("error") is True or obs.get("is_error") is True:
        return True
    meta = obs.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else obs.get("exit_code")
    return isinstance(code, int) and not isinstance(code, bool) and code not in (0, -1)


def _add_sdk_event(builder: EpisodeBuilder, ev: dict[str, Any], j: int, by_call_id: dict[str, ToolNode],
                   awaiting: list[ToolNode], report: Report, here: str) -> None:
    """One event of the agent SDK: ``ActionEvent`` -> a call (``tool_name``, the model's
    ``tool_call.arguments``), ``ObservationEvent`` / ``AgentErrorEvent`` /
    ``UserRejectObservation`` -> the result of the call with its ``tool_call_id``,
    ``MessageEvent`` / ``SystemPromptEvent`` -> ThinkNodes; other kinds are bookkeeping."""
    kind = ev["kind"]
    if kind == "ActionEvent":
        tool = ev.get("tool_name")
        if not isinstance(tool, str) or not tool:
            report(f"{here}: ActionEvent without a tool_name, skipped")
            return
        thought = as_text(ev.get("thought")) or as_text(ev.get("reasoning_content"))
        if thought.strip():
            builder.message("assistant", thought)
        tc = ev.get("tool_call") if isinstance(ev.get("tool_call"), dict) else {}
        if "arguments" in tc:
            args = parse_arguments(tc["arguments"], report, f"{here} ({tool})")
        else:
            action = ev.get("action") if isinstance(ev.get("action"), dict) else {}
            args = {k: v for k, v in action.items() if k != "kind"}
        cid = ev.get("tool_call_id")
        node = builder.call(tool, args, None if cid in (None, "") else str(cid), turn=j)
        if cid not in (None, ""):
            by_call_id[str(cid)] = node
        awaiting.append(node)
    elif kind in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
        node = by_call_id.get(str(ev.get("tool_call_id")))
        at = next((i for i, n in enumerate(awaiting) if n is node), None)
        if at is None:
            return
        del awaiting[at]
        if kind == "ObservationEvent":
            obs = ev.get("observation") if isinstance(ev.get("observation"), dict) else {}
            builder.result(node, _sdk_text(obs), _sdk_error(obs))
        else:
            builder.result(node, as_text(ev.get("error") or ev.get("rejection_reason")), True)
    elif kind == "MessageEvent":
        msg = ev.get("llm_message") if isinstance(ev.get("llm_message"), dict) else {}
        role = msg.get("role") if isinstance(msg.get("role"), str) else ("user" if ev.get("source") == "user" else "assistant")
        builder.message(role, as_text(msg.get("content")))
    elif kind == "SystemPromptEvent":
        builder.message("system", as_text(ev.get("system_prompt", {}).get("text")
                                          if isinstance(ev.get("system_prompt"), dict) else ev.get("system_prompt")))


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    for k, lineno, rec in json_records(path, report):
        where = f"{path}:{lineno}"
        history = rec.get("history") if isinstance(rec, dict) else None
        if not isinstance(history, list):
            report(f"{where}: expected an object with a 'history' list of events, skipped")
            continue
        instance = rec.get("instance_id")
        md = rec.get("metadata") if isinstance(rec.get("metadata"), dict) else {}
        llm = md.get("llm_config", md.get("llm"))  # V0 / the agent SDK
        llm = llm if isinstance(llm, dict) else {}
        extra = {key: val for key, val in (("model", llm.get("model")), ("agent_class", md.get("agent_class")))
                 if isinstance(val, str)}
        wanted = f"{path.stem}:{instance}" if isinstance(instance, str) and instance else f"{path.stem}:{k}"
        builder = EpisodeBuilder(unique_id(seen, wanted), FORMAT, path, line=lineno,
                                 **{OUTCOME_KEY: outcome_of(rec)}, **extra)
        add_history(builder, history, report, where)
        yield builder.ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    """Episodes of an OpenHands ``output.jsonl`` (or a directory of them); problems go to ``problems``."""
    return each_file(path, SUFFIXES, _iter_file, problems)
