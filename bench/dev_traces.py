"""The hand-labelled dev traces (../shared/corpora/real-labels/dev.json) as episodes.

Each labelled trace is found by ``calls_sha1`` — the hash of its call list — among the
episodes the importers make of the corpus files, never by position. τ-bench, ReAct and
go through their importers as they are; the Who&When rules of ``dev.json`` name tools
and merge calls otherwise than our importers, so those two sources are rebuilt here
from the rules. Results are
checked against ``result_sha1``: a trace whose results differ is reported, not used.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from detectors.protocol import Observation, ToolCall
from scenarios.importers import import_file
from sim.tree import Episode, ToolNode

SOURCE_FORMATS = {
    "tau-bench-airline-gpt4o": "tau-bench",
    "reflexion-react-hotpotqa": "react-log",
}
_FENCED = re.compile(r"```([^\n`]*)\n(.*?)```", re.S)

_DELEGATE = re.compile(r"^Orchestrator \(-> (.+)\)$")
_WEB = [(re.compile(p, re.S), tool, names) for p, tool, names in (
    (r"^I typed '(.*?)' into the browser address bar\.", "visit_url", ("url",)),
    (r"^I typed '(.*?)' into the browser search bar\.", "web_search", ("query",)),
    (r"^I typed '(.*?)' into '(.*?)'\.(?=\s|$)", "type", ("text", "field")),
    (r"^I clicked the browser back button\.", "back", ()),
    (r"^I clicked the control\.", "click", ("target",)),
    (r"^I clicked '(.*?)'\.(?=\s|$)", "click", ("target",)),
    (r"^I scrolled (up|down) one page in the browser\.", "scroll", ("direction",)),
    (r"^I input '(.*?)'\.(?=\s|$)", "input", ("text",)),
)]


def calls_sha1(ep: Episode) -> str:
    calls = [[n.call.tool, n.call.args] for n in ep.tool_nodes()]
    return hashlib.sha1(json.dumps(calls, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _result_sha1(ep: Episode) -> list[str | None]:
    return [None if n.observation is None else hashlib.sha1(n.observation.content.encode()).hexdigest()
            for n in ep.tool_nodes()]


def magentic_episode(path: Path) -> Episode:
    """One Hand-Crafted log as the dev.json rules read it: delegations and browser actions."""
    history = json.loads(path.read_text())["history"]
    ep = Episode(path.stem, family="who-and-when/Hand-Crafted")
    parent = None
    for j, msg in enumerate(history):
        role, content = msg.get("role", ""), msg.get("content", "")
        call: tuple[str, dict[str, Any], str | None] | None = None
        m = _DELEGATE.match(role)
        if m:
            agent = m.group(1)
            reply = None
            for later in history[j + 1:]:
                if _DELEGATE.match(later.get("role", "")):
                    break
                if later.get("role") == agent:
                    reply = later.get("content", "")
                    break
            call = (agent, {"instruction": content}, reply)
        elif role == "WebSurfer":
            for pat, tool, names in _WEB:
                mm = pat.match(content)
                if mm:
                    args = {n: mm.group(i + 1) for i, n in enumerate(names)} if mm.groups() else {n: "" for n in names}
                    call = (tool, args, content[mm.end():].lstrip("\n"))
                    break
        if call is not None:
            nid = f"c{len(ep.nodes)}"
            obs = None if call[2] is None else Observation(call[2], False)
            ep.add(ToolNode(nid, parent, ToolCall(call[0], call[1], nid), obs))
            parent = nid
    return ep


def captain_episode(path: Path) -> Episode:
    """One Algorithm-Generated log as the dev.json rules read it: executed code blocks."""
    history = json.loads(path.read_text())["history"]
    ep = Episode(path.stem, family="who-and-when/Algorithm-Generated")
    parent = None
    for j, msg in enumerate(history[:-1]):
        blocks = _FENCED.findall(msg.get("content") or "")
        if msg.get("name") == "Computer_terminal" or not blocks or history[j + 1].get("name") != "Computer_terminal":
            continue
        lang = blocks[0][0].strip().lower()
        code = "\n\n".join(body.strip("\n") for _, body in blocks)
        nid = f"c{len(ep.nodes)}"
        ep.add(ToolNode(nid, parent, ToolCall(f"exec.{lang}" if lang else "exec", {"code": code}, nid),
                        Observation(history[j + 1].get("content") or "", False)))
        parent = nid
    return ep


def load_dev(labels_path: Path, corpus_root: Path) -> tuple[list[tuple[dict, Episode]], list[str]]:
    """(label record, episode) for every dev trace found, and a line per trace that was not."""
    dev = json.loads(labels_path.read_text())
    by_sha: dict[str, Episode] = {}
    for source, fmt in SOURCE_FORMATS.items():
        for f in dev["sources"][source]["files"] if isinstance(dev["sources"][source]["files"], list) \
                else [source]:
            episodes, _ = import_file(fmt, corpus_root / f)
            for ep in episodes:
                by_sha.setdefault(calls_sha1(ep), ep)
    for folder, convert in (("Hand-Crafted", magentic_episode), ("Algorithm-Generated", captain_episode)):
        for f in sorted((corpus_root / "who-and-when" / folder).glob("*.json")):
            ep = convert(f)
            by_sha.setdefault(calls_sha1(ep), ep)
    found, missing = [], []
    for t in dev["traces"]:
        ep = by_sha.get(t["calls_sha1"])
        if ep is None and t["n_calls"] == 0:
            ep = Episode(f"{t['source']}:{t['trace_key']}", family=t["source"])
        if ep is None:
            missing.append(f"{t['source']} {t['trace_key']}: no episode with calls_sha1 {t['calls_sha1']}")
        elif t["result_sha1"] and _result_sha1(ep) != t["result_sha1"]:
            missing.append(f"{t['source']} {t['trace_key']}: results differ from result_sha1")
        else:
            found.append((t, ep))
    return found, missing
