"""Import Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl``.

Codex (OpenAI's coding-agent CLI) appends each session to one JSON Lines file, every line
``{"timestamp", "type", "payload"}``. Two logs interleave: ``response_item`` lines are the
items the model exchanged (the Responses API's), ``event_msg`` lines what the terminal showed.
The shapes below are those of Codex's own serialisation (``codex-rs/protocol``), as published
readers document them. Mapping:

- ``response_item`` ``function_call`` (``name``, ``arguments`` as a JSON string, ``call_id``) is
  a ToolNode named as the model named it: ``shell`` with its argv ``command``, ``exec_command``,
  ``update_plan``, an MCP tool... (``detectors/effects.py`` declares ``shell``,
  ``shell_command``, ``exec_command`` and ``apply_patch``); ``custom_tool_call`` (``apply_patch`` and other free-form tools) a ToolNode
  with its text as ``input``; ``local_shell_call`` (its ``action.command``) a ``shell`` call.
- A call's result: the ``event_msg`` ``exec_command_end`` of its ``call_id`` when there is one
  (``aggregated_output``, an error when ``exit_code`` is not 0), else its
  ``function_call_output`` / ``custom_tool_call_output`` (the output text; JSON output
  ``{"output", "metadata": {"exit_code"}}`` is unwrapped, and an "Exit code: N" or "Process
  exited with code N" line heading a text is read too). The two are the same result told twice: one is kept.
- ``message`` items: ``user`` and ``assistant`` text become ThinkNodes, but the harness's own
  context blocks (``<environment_context>``, ``<user_instructions>``, ...) and ``developer`` /
  ``system`` messages do not; ``reasoning`` items are left out, and so are server-side web
  searches (no result comes back as an item).
- ``event_msg`` ``token_count`` (``info.last_token_usage``: input, cached input included, and
  output tokens) goes to the next call, the last one's to the run's last call
  (``ToolNode.tokens``).

A folder is searched recursively (the dated tree). Episode ids are the file stem. ``meta``
keeps the model (``turn_context``) and ``cli_version``; a rollout does not say whether the
task was done, so the outcome is ``unknown`` (``--outcomes`` grades runs of a benchmark).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from scenarios.outcome import OUTCOME_KEY, UNKNOWN
from scenarios.trace import loads_json
from scenarios.tree import Episode, ToolNode

from ._common import EpisodeBuilder, Report, each_file, json_records, parse_arguments, unique_id

FORMAT = "codex"
SUFFIXES = (".jsonl",)
_SCAFFOLD = re.compile(r"\s*<(environment_context|user_instructions|permissions instructions|user_shell_command"
                       r"|turn_aborted|INSTRUCTIONS)\b")
# The status lines heading a shell's text output: "Exit code: N" (``shell``), "Process exited
# with code N" (the unified ``exec_command``, after its "Chunk ID" and "Wall time" lines).
_EXIT_LINE = re.compile(r"^(?:Exit code:|Process exited with code)\s*(-?\d+)\s*$", re.M)


def _output(raw: Any) -> tuple[str, bool]:
    """A ``*_output`` item's text and whether it reports a failure."""
    if isinstance(raw, dict):  # some versions keep the structure
        data = raw
    elif isinstance(raw, str):
        data = None
        if raw.lstrip().startswith("{"):
            try:
                parsed = loads_json(raw)
            except ValueError:
                parsed = None
            data = parsed if isinstance(parsed, dict) and "output" in parsed else None
        if data is None:
            head = "\n".join(raw.split("\n", 5)[:5]).split("\nOutput:", 1)[0]
            m = _EXIT_LINE.search(head)
            return raw, m is not None and m.group(1) != "0"
    else:
        return "" if raw is None else str(raw), False
    text = data.get("output")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    code = meta.get("exit_code")
    failed = isinstance(code, int) and not isinstance(code, bool) and code != 0
    return (text if isinstance(text, str) else "" if text is None else str(text)), failed


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def _rollout(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    meta: dict[str, Any] = {OUTCOME_KEY: UNKNOWN}
    b = EpisodeBuilder(unique_id(seen, path.stem), FORMAT, path)
    calls: dict[str, ToolNode] = {}
    canonical: set[str] = set()  # call ids whose exec_command_end was read
    pending = 0  # tokens not yet given to a call
    last_call: ToolNode | None = None

    for _k, lineno, rec in json_records(path, report):
        where = f"{path}:{lineno}"
        if not isinstance(rec, dict) or not isinstance(rec.get("payload"), dict):
            report(f"{where}: expected {{\"type\": ..., \"payload\": {{...}}}}, skipped")
            continue
        kind, item = rec.get("type"), rec["payload"]
        itype = item.get("type")
        if kind == "session_meta":
            if isinstance(item.get("cli_version"), str):
                meta.setdefault("cli_version", item["cli_version"])
        elif kind == "turn_context":
            if isinstance(item.get("model"), str):
                meta.setdefault("model", item["model"])
        elif kind == "event_msg" and itype == "exec_command_end":
            cid = item.get("call_id")
            node = calls.get(cid) if isinstance(cid, str) else None
            if node is None:
                continue  # a command the user ran, or one whose call the file does not hold
            out = item.get("aggregated_output")
            if not isinstance(out, str):
                out = "".join(x for x in (item.get("stdout"), item.get("stderr")) if isinstance(x, str))
            code = item.get("exit_code")
            b.result(node, out, error=isinstance(code, int) and not isinstance(code, bool) and code != 0)
            canonical.add(cid)
        elif kind == "event_msg" and itype == "token_count":
            info = item.get("info") if isinstance(item.get("info"), dict) else {}
            usage = info.get("last_token_usage") if isinstance(info.get("last_token_usage"), dict) else {}
            pending += sum(v for k in ("input_tokens", "output_tokens")
                           if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and v > 0)
        elif kind == "response_item":
            if itype in ("function_call", "custom_tool_call", "local_shell_call"):
                cid = item.get("call_id") if isinstance(item.get("call_id"), str) else None
                if itype == "local_shell_call":
                    action = item.get("action") if isinstance(item.get("action"), dict) else {}
                    name, args = "shell", {"command": action.get("command")}
                else:
                    name = item.get("name")
                    if not isinstance(name, str) or not name:
                        report(f"{where}: a {itype} without a name, skipped")
                        continue
                    args = (parse_arguments(item.get("arguments"), report, where) if itype == "function_call"
                            else {"input": item.get("input") if isinstance(item.get("input"), str) else ""})
                node = b.call(name, args, cid, turn=lineno)
                node.tokens += pending
                pending, last_call = 0, node
                if cid is not None:
                    calls[cid] = node
            elif itype in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
                cid = item.get("call_id")
                node = calls.get(cid) if isinstance(cid, str) else None
                if node is None:
                    report(f"{where}: an output for no call of this file ({cid!r}), skipped")
                    continue
                if cid in canonical or node.observation is not None:
                    continue  # the same result, told by exec_command_end
                text, failed = _output(item.get("output"))
                b.result(node, text, error=failed)
            elif itype == "message" and item.get("role") in ("user", "assistant"):
                text = _text(item.get("content"))
                if text.strip() and not (item["role"] == "user" and _SCAFFOLD.match(text)):
                    b.message(item["role"], text)
    if last_call is not None:
        last_call.tokens += pending  # the final answer's tokens
    b.ep.meta.update(meta)
    if b.ep.nodes:
        yield b.ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    return each_file(path, SUFFIXES, _rollout, problems, recursive=True)
