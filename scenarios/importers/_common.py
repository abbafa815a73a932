"""Shared plumbing for the importers: building a linear Episode, files and problem reports.

Every importer turns one source record into one chain of ThinkNodes and ToolNodes in the
order the source logged them, and reports a malformed record as a one-line problem
naming the file and line or record instead of raising.
"""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from detectors.protocol import Message, Observation, ToolCall, unrecorded
from scenarios.outcome import FAILURE, MISTAKE_KEY, OUTCOME_KEY, UNKNOWN, call_at_step, history_step
from scenarios.trace import TraceError, iter_lines, loads_json
from scenarios.tree import Episode, ThinkNode, ToolNode

#: A whole-file JSON document larger than this is refused, to keep memory bounded.
MAX_FILE_BYTES = 256 * 1024 * 1024

#: Where an importer sends its one-line problem reports.
Report = Callable[[str], None]


class ImportProblemWarning(UserWarning):
    """A malformed source record, reported when the caller did not collect problems."""


def reporter(problems: list[str] | None) -> Report:
    if problems is not None:
        return problems.append
    # Nobody is collecting: a warning keeps the problem visible instead of dropping it.
    return lambda text: warnings.warn(text, ImportProblemWarning, stacklevel=3)


class EpisodeBuilder:
    """Appends nodes to one linear episode and keeps its call ids unique.

    Source formats may reuse a call id inside one conversation; the trace format pairs a
    result with the oldest open call of that id, so a reused id is written as
    ``<id>~<k>`` (k = 2, 3, ...) to make every call's result unambiguous on re-reading.
    """

    def __init__(self, episode_id: str, fmt: str, source: Path, **meta: Any) -> None:
        self.ep = Episode(episode_id, family="replay", meta={"source_format": fmt, "source_file": source.name, **meta})
        self._last: str | None = None
        self._call_ids: dict[str, int] = {}

    def _next_id(self) -> str:
        return f"n{len(self.ep.nodes)}"

    def message(self, role: str, content: str, parent: str | None | type[Ellipsis] = ...) -> ThinkNode:
        """Append a message; ``parent`` as for :meth:`call`."""
        node = ThinkNode(self._next_id(), self._last if parent is ... else parent, Message(role, content))
        self.ep.add(node)
        self._last = node.id
        return node

    def call(
        self,
        tool: str,
        args: dict[str, Any],
        call_id: str | None = None,
        turn: int | None = None,
        parent: str | None | type[Ellipsis] = ...,
    ) -> ToolNode:
        """Append a call; ``parent`` defaults to the last node (a chain), or names any earlier node."""
        nid = self._next_id()
        cid = str(call_id) if call_id not in (None, "") else nid
        seen = self._call_ids.get(cid, 0) + 1
        self._call_ids[cid] = seen
        if seen > 1:
            cid = f"{cid}~{seen}"
        node = ToolNode(nid, self._last if parent is ... else parent, ToolCall(tool, args, cid, None, turn), None)
        self.ep.add(node)
        self._last = node.id
        return node

    @staticmethod
    def result(node: ToolNode, content: str, error: bool = False) -> None:
        node.observation = Observation(content, error)

    @staticmethod
    def unrecorded(node: ToolNode, error: bool = False) -> None:
        """The call ran, but the source kept no result (``error``: it is known to have failed).

        A call left without either never ran; detectors then do not see it at all.
        """
        node.observation = unrecorded(error)


def unique_id(seen: set[str], wanted: str) -> str:
    """``wanted``, or ``wanted#2``, ``wanted#3``... if an earlier episode took it."""
    eid, k = wanted, 1
    while eid in seen:
        k += 1
        eid = f"{wanted}#{k}"
    seen.add(eid)
    return eid


def as_text(content: Any) -> str:
    """Message content as text: strings as they are, OpenAI content parts joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        texts = [p["text"] for p in content if isinstance(p.get("text"), str)]
        if len(texts) == len(content):
            return "".join(texts)
    return orjson.dumps(content, default=repr).decode()


def parse_arguments(raw: Any, report: Report, where: str) -> dict[str, Any]:
    """Tool arguments as an object; text that is not a JSON object becomes ``{"_raw": text}``."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            val = loads_json(raw)
        except orjson.JSONDecodeError:
            report(f"{where}: arguments are not valid JSON, kept as {{'_raw': text}}")
            return {"_raw": raw}
        if isinstance(val, dict):
            return val
        report(f"{where}: arguments are JSON but not an object, kept as {{'_raw': text}}")
        return {"_raw": raw}
    report(f"{where}: arguments must be a JSON string or object, got {type(raw).__name__}; kept as {{'_raw': text}}")
    return {"_raw": orjson.dumps(raw, default=repr).decode()}


def natural_key(path: Path) -> list:
    # 2.json before 10.json, as the corpora number their files.
    return [int(tok) if tok.isdigit() else tok for tok in re.split(r"(\d+)", path.name)]


def source_files(path: str | Path, suffixes: tuple[str, ...], recursive: bool = False,
                 skip_dirs: tuple[str, ...] = ()) -> list[Path]:
    """The file itself, or a directory's files with one of ``suffixes`` in natural order;
    ``recursive`` also reads its sub-folders (but none named in ``skip_dirs``), folder by
    folder, for formats that nest one run per folder."""
    path = Path(path)
    if not path.exists():
        raise TraceError(f"{path}: no such file or directory")
    if not path.is_dir():
        return [path]
    if not recursive:
        return sorted((p for p in path.iterdir() if p.is_file() and p.name.endswith(suffixes)), key=natural_key)
    found = [p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes)
             and not set(p.relative_to(path).parts[:-1]) & set(skip_dirs)]
    return sorted(found, key=lambda p: [*map(str, p.relative_to(path).parts[:-1]), *natural_key(p)])


def each_file(
    path: str | Path,
    suffixes: tuple[str, ...],
    iter_file: Callable[[Path, Report, set[str]], Iterable[Episode]],
    problems: list[str] | None,
    recursive: bool = False,
    skip_dirs: tuple[str, ...] = (),
) -> Iterator[Episode]:
    """Run ``iter_file`` over a file or a directory (:func:`source_files`), keeping episode
    ids unique across files."""
    report = reporter(problems)
    seen: set[str] = set()
    for file in source_files(path, suffixes, recursive, skip_dirs):
        try:
            yield from iter_file(file, report, seen)
        except OSError as exc:
            report(f"{file}: cannot read ({exc.strerror or exc}), skipped")


def load_json(path: Path, report: Report) -> Any:
    """A whole-file JSON document, or ``None`` (with a problem) if it does not parse."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        report(f"{path}: {size} bytes is over the {MAX_FILE_BYTES}-byte limit for a whole-file JSON document, skipped")
        return None
    try:
        return loads_json(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        report(f"{path}: not valid JSON ({str(exc).split(':')[0]}), skipped")
        return None


def history_run(path: Path, report: Report, seen: set[str], fmt: str) -> tuple[EpisodeBuilder, list[Any], int | None] | None:
    """Start the episode of a Who&When log file: its builder, its ``history`` list and the
    history index of the annotated mistake (``None`` when the log has none).

    ``question_ID`` goes to ``meta``, and so does the run's outcome: Who&When collects failed
    runs, each annotated with the step that made it fail, so a log with a ``mistake_step`` is
    a ``failure`` (``unknown`` without one). :func:`blame_call` turns the step into the index
    of a tool call; the annotations' text (agent, reason, answer) stays behind.
    """
    data = load_json(path, report)
    if data is None:
        return None
    history = data.get("history") if isinstance(data, dict) else None
    if not isinstance(history, list):
        report(f"{path}: expected an object with a 'history' list, skipped")
        return None
    qid = data.get("question_ID")
    meta = {"question_ID": qid} if isinstance(qid, str) else {}
    mistake = history_step(data.get("mistake_step"))
    meta[OUTCOME_KEY] = FAILURE if mistake is not None else UNKNOWN
    return EpisodeBuilder(unique_id(seen, path.stem), fmt, path, **meta), history, mistake


def blame_call(ep: Episode, mistake: int | None) -> None:
    """Record the annotated mistake (a history index) as ``meta["mistake_step"]``: the first
    tool call made at or after that message (calls keep their message index as ``turn``)."""
    if mistake is None:
        return
    k = call_at_step((n.call.turn for n in ep.tool_nodes()), mistake)
    if k is not None:
        ep.meta[MISTAKE_KEY] = k


def json_records(path: Path, report: Report) -> Iterator[tuple[int, int, Any]]:
    """``(k, line number, record)`` for each line of a JSON Lines file that parses; ``k`` is
    the line's index among the non-blank lines, so a malformed line (reported, skipped)
    never renumbers the others."""
    index = 0
    for lineno, raw in iter_lines(path):
        where = f"{path}:{lineno}"
        if raw is None:
            report(f"{where}: line too long, skipped")
            index += 1
            continue
        if not raw.strip():
            continue
        k, index = index, index + 1
        try:
            rec = loads_json(raw)
        except orjson.JSONDecodeError as exc:
            report(f"{where}: not valid JSON ({str(exc).split(':')[0]}), skipped")
            continue
        yield k, lineno, rec
