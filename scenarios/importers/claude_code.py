"""Import Claude Code session transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

Claude Code appends every turn of a session to one JSON Lines file. Anthropic documents where
the files are and calls the record format internal; what follows is the shape the files have
had (CLI versions 1.x and 2.x), read the way published readers read it. The same lines, without
``parentUuid``, are what ``claude -p --output-format stream-json`` prints (a ``system``
``init`` line first, a ``result`` line last), and import the same way. Each line has a
``type``; ``user`` and ``assistant`` lines wrap an Anthropic Messages ``message`` and link to
the line before them by ``parentUuid`` -> ``uuid``. Mapping:

- An assistant line's content blocks, in order: ``text`` becomes an ``assistant`` ThinkNode,
  ``tool_use`` (``id``, ``name``, ``input``) a ToolNode named as the model named it (``Read``,
  ``Edit``, ``Bash``, ``mcp__server__tool``...: the names whose effects ``detectors/effects.py``
  declares); ``thinking`` blocks are left out. A message split over several lines (one block
  a line, as the CLI streams it) is read line by line, in the same order.
- A user line's ``tool_result`` blocks are the results of the calls with their
  ``tool_use_id``: the text blocks joined (an image is ``[image]``), an error when
  ``is_error`` is true. Its text is a ``user`` ThinkNode. A call without a result line never
  finished (the session ended or was cut) and gets no result.
- Threading follows ``parentUuid``, not file order: a turn the user rewound to and edited
  starts a branch of the episode's tree from the line it went back to, so the abandoned calls
  and the new ones are two paths, not one run that repeats itself. A line whose parent is not
  in the file (a resumed session) or that starts a new chain continues from the line before it;
  a line without a parent that names a ``logicalParentUuid`` (after a compaction) continues
  from that line.
- ``isSidechain`` lines are a sub-agent's own conversation (the ``Task`` tool): each chain of
  them is an episode of its own, ``<session>:sidechain-<k>``, since one agent's calls are not
  the other's repeats; in stream-json a sub-agent's lines carry the id of the ``Task`` call
  that started it (``parent_tool_use_id``). Newer CLIs write a sub-agent to ``<session>/subagents/*.jsonl``; a
  folder is searched recursively, so those files are episodes too (``tool-results/`` side
  files are not sessions).
- ``summary``, ``system``, ``file-history-snapshot`` and the other bookkeeping lines are not
  turns and are left out (a turn whose parent is one continues from where that line is); a
  line whose ``uuid`` was already read is a duplicate and skipped.

Episode ids are the file stem (the session id). A transcript does not say whether the task
was done: the outcome is ``unknown``. ``meta`` keeps the model (the episode's first assistant
``message.model`` that is not ``<synthetic>``: a sub-agent may run another) and the CLI ``version``; the working directory
(a user's path) is not kept. Each model response's tokens (its ``usage``: the whole prompt,
cached or not, and the output; counted once per ``message.id``, which the CLI repeats on every
line of a split message) go to the first call after it, the final answer's to the run's last
call (``ToolNode.tokens``, as the ``otel`` importer does).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from scenarios.outcome import OUTCOME_KEY, UNKNOWN
from scenarios.tree import Episode, ToolNode

from ._common import EpisodeBuilder, Report, each_file, json_records, parse_arguments, unique_id

FORMAT = "claude-code"
SUFFIXES = (".jsonl",)
#: Side files of a session that are not sessions.
_NOT_SESSIONS = ("tool-results",)


def _result_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, dict) and block.get("type") == "image":
                parts.append("[image]")
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif isinstance(block, str):
                parts.append(block)
        return "\n".join(parts)
    return str(content)


def _message_text(content: Any) -> str:
    """A user line's own text (its tool results apart)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b["text"] for b in content
                         if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str))
    return ""


class _Conversation:
    """One agent's chain of lines (the session's main thread, or one sub-agent's)."""

    def __init__(self, builder: EpisodeBuilder, key: str | None) -> None:
        self.builder = builder
        self.key = key  # None for the session's own agent
        self.last: str | None = None  # the node the next line without a known parent follows
        self.tokens = 0  # model tokens not yet given to a call
        self.model: str | None = None
        self.last_call: ToolNode | None = None

    def spend(self, node: ToolNode) -> None:
        node.tokens += self.tokens
        self.tokens = 0
        self.last_call = node


_SIDECHAIN = "sidechain"


def _agent_key(rec: dict[str, Any]) -> str | None:
    """Whose line this is: ``None`` for the session's own agent; a sub-agent's is keyed by the
    ``Task`` call that started it (stream-json's ``parent_tool_use_id``) or, in a session file,
    marked ``isSidechain`` (its chain then says which sub-agent)."""
    parent_call = rec.get("parent_tool_use_id")
    if isinstance(parent_call, str) and parent_call:
        return parent_call
    return _SIDECHAIN if rec.get("isSidechain") is True else None


def _usage_tokens(usage: Any) -> int:
    """The tokens one model response used: its whole prompt (cached or not) and its output."""
    if not isinstance(usage, dict):
        return 0
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    return sum(v for k in keys if isinstance(v := usage.get(k), int) and not isinstance(v, bool) and v > 0)


def _session(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    stem = path.stem
    main: _Conversation | None = None
    sidechains: list[_Conversation] = []
    by_key: dict[str, _Conversation] = {}  # a stream's sub-agents, by the call that started them
    owner: dict[str, _Conversation] = {}  # line uuid -> the conversation it belongs to
    anchor: dict[str, str | None] = {}  # line uuid -> the last node at or above that line
    calls: dict[str, ToolNode] = {}  # tool_use id -> its call
    counted: set[str] = set()  # message ids whose usage was counted (a message spans lines)
    meta: dict[str, Any] = {OUTCOME_KEY: UNKNOWN}

    for _k, lineno, rec in json_records(path, report):
        where = f"{path}:{lineno}"
        if not isinstance(rec, dict):
            report(f"{where}: a line must be a JSON object, skipped")
            continue
        kind = rec.get("type")
        uuid = rec.get("uuid") if isinstance(rec.get("uuid"), str) else None
        # Bookkeeping lines (system notices, attachments, a compaction boundary) are no turn,
        # but a turn may name one as its parent: those with a uuid pass their place on.
        passthrough = kind not in ("user", "assistant")
        if passthrough and uuid is None:
            continue  # summaries, file-history snapshots
        if uuid is not None and uuid in anchor:
            continue  # the same line written twice
        for version_key in ("version", "claude_code_version"):  # a session line's, stream-json's init
            if isinstance(rec.get(version_key), str):
                meta.setdefault("version", rec[version_key])
        parent = rec.get("parentUuid")
        if parent is None:
            parent = rec.get("logicalParentUuid")  # the chain before a compaction
        parent = parent if isinstance(parent, str) else None

        # Which agent's conversation: a sub-agent's lines form chains of their own.
        key = _agent_key(rec)
        if parent is not None and parent in owner and owner[parent].key == key:
            conv = owner[parent]
        elif key is None:
            if main is None:
                main = _Conversation(EpisodeBuilder("", FORMAT, path), key=None)
            conv = main
        elif key != _SIDECHAIN and key in by_key:
            conv = by_key[key]
        else:
            conv = _Conversation(EpisodeBuilder("", FORMAT, path), key=key)
            sidechains.append(conv)
            if key != _SIDECHAIN:
                by_key[key] = conv
        at = anchor[parent] if parent is not None and parent in anchor and owner.get(parent) is conv else conv.last
        if uuid is not None:
            owner[uuid] = conv
        if passthrough:
            anchor[uuid] = at
            continue

        msg = rec.get("message")
        if not isinstance(msg, dict):
            report(f"{where}: a {kind} line without a 'message' object, skipped")
            if uuid is not None:
                anchor[uuid] = at
            continue
        content = msg.get("content")
        b = conv.builder
        if kind == "assistant":
            model = msg.get("model")
            if isinstance(model, str) and model != "<synthetic>" and conv.model is None:
                conv.model = model
            mid = msg.get("id")
            if not (isinstance(mid, str) and mid in counted):
                conv.tokens += _usage_tokens(msg.get("usage"))
                if isinstance(mid, str):
                    counted.add(mid)
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content}] if isinstance(content, str) else []
            for j, block in enumerate(blocks):
                if not isinstance(block, dict):
                    report(f"{where}: content[{j}] is not an object, skipped")
                    continue
                btype = block.get("type")
                if btype == "text" and isinstance(block.get("text"), str) and block["text"].strip():
                    at = b.message("assistant", block["text"], parent=at).id
                elif btype == "tool_use":
                    name = block.get("name")
                    if not isinstance(name, str) or not name:
                        report(f"{where}: content[{j}]: a tool_use without a name, skipped")
                        continue
                    args = parse_arguments(block.get("input"), report, f"{where}: content[{j}]")
                    node = b.call(name, args, block.get("id") if isinstance(block.get("id"), str) else None,
                                  turn=lineno, parent=at)
                    at = node.id
                    conv.spend(node)
                    if isinstance(block.get("id"), str):
                        calls[block["id"]] = node
        else:
            if isinstance(content, list):
                for j, block in enumerate(content):
                    if not (isinstance(block, dict) and block.get("type") == "tool_result"):
                        continue
                    node = calls.get(block.get("tool_use_id")) if isinstance(block.get("tool_use_id"), str) else None
                    if node is None:
                        report(f"{where}: content[{j}]: a tool_result for no call of this file "
                               f"({block.get('tool_use_id')!r}), skipped")
                        continue
                    if node.observation is not None:
                        report(f"{where}: content[{j}]: a second result for call {block.get('tool_use_id')!r}, skipped")
                        continue
                    b.result(node, _result_text(block.get("content")), error=block.get("is_error") is True)
            text = _message_text(content)
            if text.strip():
                at = b.message("user", text, parent=at).id
        conv.last = at
        if uuid is not None:
            anchor[uuid] = at

    convs = ([main] if main is not None else []) + sidechains
    for k, conv in enumerate(convs):
        ep = conv.builder.ep
        if not ep.nodes:
            continue
        if conv.last_call is not None:  # the final answer's tokens: the run's last call paid for them
            conv.spend(conv.last_call)
        ep.id = unique_id(seen, stem if conv is main else f"{stem}:sidechain-{k - (main is not None) + 1}")
        ep.meta.update(meta)
        if conv.model is not None:
            ep.meta["model"] = conv.model
        yield ep


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    return each_file(path, SUFFIXES, _session, problems, recursive=True, skip_dirs=_NOT_SESSIONS)
