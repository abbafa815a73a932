"""Every fenced block of README.md and docs/*.md runs in the test suite (Sybil collects them).

How each block is taken, by its info string:
- ``bash`` / ``sh``: run with ``bash -e`` in the document's work folder; it must exit 0, or the
  code a line's trailing ``# exit N`` comment names.
- ``console``: ``$ command`` lines run in turn; the lines shown under each must appear in
  what it printed, in order (a ``...`` in a line matches anything; a line ``...`` alone
  skips any number of lines).
- ``python``: executed in the document's namespace, in its work folder.
- ``toml`` / ``json`` / ``jsonl`` / ``yaml`` / ``text`` with ``file=NAME``: written into the work
  folder (so later blocks use it) after the syntax is checked; without ``file=`` the syntax is
  checked only (``text`` and ``output`` blocks are prose).
Each document gets a fresh work folder holding a copy of ``examples/`` (the small files the
docs refer to). ``<!-- skip: next -->`` before a block skips it: used only where running it
would recurse (the test command itself).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from sybil import Example, Region
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
TIMEOUT = 600


def setup(namespace: dict) -> None:
    work = Path(tempfile.mkdtemp(prefix="loopbench-docs-"))
    shutil.copytree(EXAMPLES, work, dirs_exist_ok=True)
    namespace["__work__"] = work
    namespace["__cwd__"] = os.getcwd()


def teardown(namespace: dict) -> None:
    shutil.rmtree(namespace["__work__"], ignore_errors=True)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env.setdefault("COLUMNS", "200")
    return env


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", command], cwd=cwd, env=_env(), capture_output=True,
                          text=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)


_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")


def run_bash(example: Example) -> str | None:
    work = example.namespace["__work__"]
    for line in _logical_lines(example.parsed):
        m = _EXIT.search(line)
        want = int(m.group(1)) if m else 0
        proc = _shell(line, work)
        if proc.returncode != want:
            return (f"`{line}` exited {proc.returncode} (expected {want})\n--- stdout\n{proc.stdout[-3000:]}"
                    f"\n--- stderr\n{proc.stderr[-3000:]}")
    return None


def _logical_lines(source: str) -> list[str]:
    """Commands of a block: backslash continuations joined, blank lines and comment-only lines dropped."""
    out, cur = [], ""
    for raw in source.splitlines():
        if raw.rstrip().endswith("\\"):
            cur += raw.rstrip()[:-1] + " "
            continue
        cur += raw
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur.strip())
        cur = ""
    return out


def _matches(expected: str, actual: str) -> bool:
    if "..." not in expected:
        return expected.strip() == actual.strip()
    pattern = ".*".join(re.escape(part) for part in expected.strip().split("..."))
    return re.fullmatch(pattern, actual.strip()) is not None


def run_console(example: Example) -> str | None:
    work = example.namespace["__work__"]
    blocks: list[tuple[str, list[str]]] = []
    for line in example.parsed.splitlines():
        if line.startswith("$ "):
            blocks.append((line[2:], []))
        elif blocks:
            blocks[-1][1].append(line)
    if not blocks:
        return "a console block without a `$ ` command"
    for command, expected in blocks:
        m = _EXIT.search(command)
        want = int(m.group(1)) if m else 0
        proc = _shell(command, work)
        if proc.returncode != want:
            return f"`{command}` exited {proc.returncode} (expected {want})\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        actual = [ln.rstrip() for ln in (proc.stdout + proc.stderr).splitlines()]
        i = 0
        for want_line in [ln.rstrip() for ln in expected if ln.strip()]:
            if want_line.strip() == "...":
                continue
            while i < len(actual) and not _matches(want_line, actual[i]):
                i += 1
            if i == len(actual):
                return (f"`{command}`: the line {want_line!r} shown in the docs is not in its output (in order):\n"
                        + "\n".join(actual[-60:]))
            i += 1
    return None


def run_python(example: Example) -> str | None:
    ns = example.namespace
    here = os.getcwd()
    os.chdir(ns["__work__"])
    sys.path.insert(0, str(ns["__work__"]))  # the work folder's modules (examples/my_guard.py) import as a user's would
    try:
        code = compile(example.parsed, f"{example.path}:{example.line}", "exec")
        exec(code, ns)  # noqa: S102 — the README's own example, shipped with the project
    finally:
        sys.path.remove(str(ns["__work__"]))
        os.chdir(here)
    return None


def _check_syntax(language: str, text: str) -> None:
    if language == "toml":
        tomllib.loads(text)
    elif language == "json":
        json.loads(text)
    elif language == "jsonl":
        for line in text.splitlines():
            if line.strip():
                json.loads(line)
    elif language == "yaml":
        import yaml

        yaml.safe_load(text)


def data_block(language: str, target: str | None):
    def evaluate(example: Example) -> str | None:
        _check_syntax(language, example.parsed)
        if target:
            path = example.namespace["__work__"] / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(example.parsed, encoding="utf-8")
        return None

    return evaluate


_RUNNERS = {"bash": run_bash, "sh": run_bash, "console": run_console, "python": run_python}
DATA = ("toml", "json", "jsonl", "yaml", "text", "output")


class FencedBlocks:
    """A Sybil parser for every fenced block; an unknown language is an error, so no block
    escapes the test suite unnoticed."""

    def __init__(self) -> None:
        self.lexer = FencedCodeBlockLexer(language=r".*", mapping={"language": "info", "source": "source"})

    def __call__(self, document):
        for region in self.lexer(document):
            info = region.lexemes["info"].split()
            language = info[0] if info else ""
            args = dict(a.split("=", 1) for a in info[1:] if "=" in a)
            region.parsed = str(region.lexemes["source"])
            if language in _RUNNERS:
                region.evaluator = _RUNNERS[language]
            elif language in DATA:
                region.evaluator = data_block(language, args.get("file"))
            else:
                region.evaluator = _unknown(language)
            yield Region(region.start, region.end, region.parsed, region.evaluator)


def _unknown(language: str):
    def evaluate(example: Example) -> str:
        return f"a ```{language or '(no language)'} block: give it a language the docs test knows ({', '.join(sorted(_RUNNERS) + list(DATA))})"

    return evaluate
