"""Import ReAct text logs as written by the Reflexion HotpotQA runs.

Layout: ``BEGIN TRIAL n`` headers, ``BEGIN CORRECT|INCORRECT|HALTED AGENTS`` sections,
and per agent a ``Question:`` (possibly followed by ``Reflections:`` and ``- ...``
lines), then ``Thought i:`` / ``Action i: Tool[arg]`` / ``Observation i:`` lines, and
a closing ``Correct answer:`` line. A line that starts none of these continues the
text before it (Wikipedia paragraphs spill over several lines).

Mapping:

- the question with its reflections is one ``user`` ThinkNode (that is the prompt the
  agent saw); each thought is an ``assistant`` ThinkNode;
- ``Search[x]`` -> ``search {"query": x}``, ``Lookup[x]`` -> ``lookup {"keyword": x}``,
  ``Finish[x]`` -> ``finish {"answer": x}`` (the names of the arguments of the upstream
  agent's tools); any other ``Name[x]`` -> ``name {"argument": x}``; an action that is
  not ``Name[...]`` -> ``action {"_raw": text}`` with a problem noted. ``turn`` is the
  step number ``i``;
- the observation is the call's result. It is an error only for ``Invalid Action``
  (the harness refused the call); ``Could not find [x]. Similar: [...]`` is the search
  tool's ordinary not-found answer and is not flagged.
- ``Correct answer:`` is the benchmark's answer and is not imported; the section is
  kept as ``meta["section"]`` (correct / incorrect / halted) with ``meta["trial"]``, and
  gives the run's ``meta["outcome"]``: ``success`` for CORRECT, ``failure`` for INCORRECT
  and HALTED (the agent ran out of steps), ``unknown`` outside any section.

Episode ids are ``<file stem>:trial<n>:<section>:<k>``, k counting agents within the
section from 0. Agents with no steps (Reflexion's stubs for already-solved questions)
are imported as episodes with only their question.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from detectors.protocol import Message, Observation
from scenarios.outcome import OUTCOME_KEY, SECTION_OUTCOMES, UNKNOWN
from scenarios.tree import Episode, ThinkNode, ToolNode

from ._common import EpisodeBuilder, Report, each_file, unique_id

FORMAT = "react-log"
SUFFIXES = (".txt", ".log")

_TRIAL = re.compile(r"^BEGIN TRIAL (\d+)\s*$")
_SECTION = re.compile(r"^-+ BEGIN (CORRECT|INCORRECT|HALTED) AGENTS -+\s*$")
_STEP = re.compile(r"^(Thought|Action|Observation) (\d+): ?(.*)$", re.S)
_ACTION = re.compile(r"^([A-Za-z_]\w*)\[(.*)\]\s*$", re.S)
#: Upstream action name -> (our tool name, argument name).
ACTIONS = {"Search": ("search", "query"), "Lookup": ("lookup", "keyword"), "Finish": ("finish", "answer")}


def parse_action(text: str) -> tuple[str, dict[str, str]] | None:
    m = _ACTION.match(text.strip())
    if m is None:
        return None
    name, arg = m.groups()
    tool, key = ACTIONS.get(name, (name.lower(), "argument"))
    return tool, {key: arg}


class _Agent:
    """The agent block being read, and the node its continuation lines extend."""

    def __init__(self, builder: EpisodeBuilder, question: str) -> None:
        self.builder = builder
        self.text_node: ThinkNode | ToolNode = builder.message("user", question)
        self.open_call: ToolNode | None = None

    def extend(self, line: str) -> bool:
        """Append a continuation line; False if it follows an action (nothing to extend)."""
        node = self.text_node
        if isinstance(node, ThinkNode):
            node.message = Message(node.message.role, node.message.content + "\n" + line)
        elif node.observation is not None:
            obs = node.observation
            node.observation = Observation(obs.content + "\n" + line, obs.error)
        else:
            return not line.strip()
        return True

    def finish(self) -> Episode:
        # Trailing blank lines belong to the layout, not to the last text.
        for node in self.builder.ep.nodes:
            if isinstance(node, ThinkNode):
                node.message = Message(node.message.role, node.message.content.rstrip("\n"))
            elif node.observation is not None:
                node.observation = Observation(node.observation.content.rstrip("\n"), node.observation.error)
        return self.builder.ep


def _iter_file(path: Path, report: Report, seen: set[str]) -> Iterator[Episode]:
    trial: int | None = None
    section: str | None = None
    index = 0
    agent: _Agent | None = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.rstrip("\r\n")
            where = f"{path}:{lineno}"
            if m := _TRIAL.match(line):
                if agent:
                    yield agent.finish()
                agent, trial, section = None, int(m.group(1)), None
                continue
            if m := _SECTION.match(line):
                if agent:
                    yield agent.finish()
                agent, section, index = None, m.group(1).lower(), 0
                continue
            if line.startswith("Question:"):
                if agent:
                    yield agent.finish()
                name = f"trial{trial}:{section}:{index}" if trial is not None and section else f"agent{index}"
                index += 1
                meta = {k: v for k, v in (("trial", trial), ("section", section)) if v is not None}
                meta[OUTCOME_KEY] = SECTION_OUTCOMES.get(section or "", UNKNOWN)
                builder = EpisodeBuilder(unique_id(seen, f"{path.stem}:{name}"), FORMAT, path, line=lineno, **meta)
                agent = _Agent(builder, line[len("Question:"):].strip())
                continue
            if agent is None:
                continue  # trial summaries, separators and blank lines between blocks
            if line.startswith("Correct answer:"):
                yield agent.finish()
                agent = None
                continue
            m = _STEP.match(line)
            if m is None:
                if not agent.extend(line):
                    report(f"{where}: text between an action and its observation, ignored")
                continue
            kind, step, text = m.group(1), int(m.group(2)), m.group(3)
            if kind == "Thought":
                agent.text_node = agent.builder.message("assistant", text)
            elif kind == "Action":
                parsed = parse_action(text)
                if parsed is None:
                    report(f"{where}: action {text!r} is not of the form Name[argument]; kept as {{'_raw': text}}")
                    parsed = ("action", {"_raw": text})
                if agent.open_call is not None:
                    report(f"{where}: Action {step} follows an action without an observation")
                agent.open_call = agent.text_node = agent.builder.call(*parsed, turn=step)
            else:
                if agent.open_call is None:
                    report(f"{where}: Observation {step} has no action before it, skipped")
                    continue
                agent.builder.result(agent.open_call, text, text.startswith("Invalid Action"))
                agent.text_node, agent.open_call = agent.open_call, None
    if agent:
        yield agent.finish()


def iter_episodes(path: str | Path, problems: list[str] | None = None) -> Iterator[Episode]:
    """Episodes of a ReAct text log (or a directory of them); problems go to ``problems``."""
    return each_file(path, SUFFIXES, _iter_file, problems)
