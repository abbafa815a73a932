"""The world: deterministic stub tools with realistic results, prices and hidden facts.

Every result carries a set of *facts* (hidden from detectors). A call gains
information exactly when its facts are not all known on its path already; that, not
the wording of the call, is what makes it redundant. Tool state that changes
(written files, polled jobs, flaky endpoints) lives in an immutable ``WorldState``
per path, so sibling branches never see each other's effects.
"""
from __future__ import annotations

import ast
import hashlib
import operator
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from detectors.protocol import Observation, ToolCall

from .lexicon import CONCEPTS, concepts_of
from .editor import run_editor, run_shell
from .shell import run_command
from .webtools import WebTools
from .worldtools import MoreTools, norm_path


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool in the registry. ``max_repeats`` is the harness author's per-tool override."""

    name: str
    price: float  # USD per call
    description: str
    max_repeats: int | None = None


TOOLS: dict[str, ToolSpec] = {
    t.name: t
    for t in (
        ToolSpec("search", 0.005, "Search the document collection: search(query, limit=3, offset=0 or page=1)"),
        ToolSpec("read_file", 0.0005, "Read a file: read_file(path)"),
        ToolSpec("list_dir", 0.0002, "List a directory: list_dir(path)"),
        ToolSpec("http_get", 0.002, "Fetch a URL: http_get(url, params={})"),
        ToolSpec("check_status", 0.0005, "Status of a background job: check_status(job_id)"),
        ToolSpec("run_tests", 0.02, "Run the test suite: run_tests(target='tests/')"),
        ToolSpec("write_file", 0.0005, "Write a file: write_file(path, content)"),
        ToolSpec("calc", 0.0001, "Evaluate arithmetic: calc(expression)"),
        ToolSpec("get_record", 0.0005, "Read a booking record: get_record(record_id)"),
        ToolSpec("update_record", 0.001, "Change one field of a record; answers with the record: update_record(record_id, field, value)"),
        ToolSpec("cancel_record", 0.001, "Cancel a record; answers with the record: cancel_record(record_id)"),
        ToolSpec("wiki_search", 0.001, "Look an entity up in the encyclopedia: wiki_search(entity)"),
        ToolSpec("run_code", 0.002, "Run a Python snippet: run_code(code)"),
        ToolSpec("open_url", 0.002, "Open a page in the browser: open_url(url)"),
        ToolSpec("scroll", 0.001, "Scroll the open page one screen: scroll(direction='down')"),
        ToolSpec("delegate", 0.01, "Ask a sub-agent to do something: delegate(agent, instruction)"),
        ToolSpec("bash", 0.002, "Run a shell command: bash(command)"),
        # Magentic-One's WebSurfer actions (scenarios.webtools)
        ToolSpec("visit_url", 0.002, "Type an address into the browser's address bar: visit_url(url)"),
        ToolSpec("click", 0.002, "Click a link of the open page by its text: click(target)"),
        ToolSpec("web_search", 0.005, "Search the web: web_search(query)"),
        ToolSpec("WebSurfer", 0.01, "Ask the web agent to do something in the browser: WebSurfer(instruction)"),
        # the multi-tool coding agent's editor and shell (scenarios.editor)
        ToolSpec("str_replace_editor", 0.0005, "View, create and edit files: str_replace_editor(command, path, ...)"),
        ToolSpec("execute_bash", 0.002, "Run a command in the repository: execute_bash(command)"),
    )
}

#: Simulated model price per token, for the spend wasted inside loops.
TOKEN_PRICE = 3e-6


def _h(*parts: Any) -> str:
    return hashlib.blake2s("\x1f".join(map(str, parts)).encode(), digest_size=6).hexdigest()


_NAMES = sorted(CONCEPTS)
_PATHS = tuple(f"{d}/{stem}_{d}.{'py' if d in ('src', 'tests') else 'md'}"
               for d in ("src", "docs", "data", "tests")
               for stem in ("core", "util", "io", "api", "model", "cli", "db", "log"))


def _bytes(*parts: Any) -> bytes:
    """64 deterministic pseudo-random bytes keyed by ``parts``."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=64).digest()


@dataclass(frozen=True, slots=True)
class Document:
    """A document of the collection; its text is rendered only when a search shows it."""

    id: str
    concepts: frozenset[str]
    key: bytes  # the keyed random bytes its wording is drawn from

    @property
    def title(self) -> str:
        return " ".join(CONCEPTS[c][0] for c in sorted(self.concepts)).title()

    @property
    def body(self) -> str:
        r = self.key
        return f"{self.title}: " + "; ".join(
            f"{CONCEPTS[c][r[40 + n] % len(CONCEPTS[c])]} item {10 + (r[50 + 2 * n] << 8 | r[51 + 2 * n]) % 990}"
            for n, c in enumerate(sorted(self.concepts))
        )


class _Files(Mapping[str, str]):
    """The virtual file system's original contents, each rendered on first read."""

    def __init__(self, seed: int, paths: tuple[str, ...]):
        self._seed, self._paths, self._cache = seed, paths, {}
        self._set = frozenset(paths)

    def __getitem__(self, path: str) -> str:
        hit = self._cache.get(path)
        if hit is None:
            if path not in self._set:
                raise KeyError(path)
            names = _NAMES
            nn = len(names)
            r = _bytes(self._seed, "file", path)
            hit = self._cache[path] = f"# {path}\n" + "\n".join(
                f"line {n}: {names[r[1 + 4 * n] % nn]} {names[r[2 + 4 * n] % nn]} value={(r[3 + 4 * n] << 8 | r[4 + 4 * n]) % 10000}"
                for n in range(4 + r[0] % 9)
            )
        return hit

    def get(self, path, default=None):
        return self[path] if path in self._set else default

    def __contains__(self, path) -> bool:
        return path in self._set

    def __iter__(self):
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


@dataclass(frozen=True, slots=True)
class WorldState:
    """Per-path mutable world, kept immutable: a new one per executed call."""

    tick: int = 0
    written: tuple[tuple[str, str], ...] = ()  # (path, content), latest last
    attempts: tuple[tuple[str, int], ...] = ()  # http attempts per url
    job_started: tuple[tuple[str, int], ...] = ()  # tick at first poll per job
    records: tuple[tuple[str, str, Any], ...] = ()  # (record id, field, value), latest last
    browser: tuple[str, int] = ("", 0)  # open page and screen
    delegated: tuple[tuple[str, str], ...] = ()  # (agent, request) answered already

    def file(self, path: str) -> str | None:
        for p, content in reversed(self.written):
            if p == path:
                return content
        return None

    def get(self, pairs: tuple[tuple[str, int], ...], key: str) -> int | None:
        for k, v in pairs:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True)
class Result:
    observation: Observation
    facts: frozenset[str]
    state: WorldState
    price: float
    tokens: int


_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
        ast.Pow: operator.pow, ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Mod: operator.mod}


def safe_arith(expr: str) -> float:
    """Evaluate +, -, *, /, %, ** over numbers; nothing else is ever executed."""
    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError("unsupported expression")
    if len(expr) > 200:
        raise ValueError("expression too long")
    return ev(ast.parse(expr.replace("^", "**"), mode="eval"))


@dataclass
class World(MoreTools, WebTools):
    """A deterministic world built from a seed: documents, files, endpoints and jobs."""

    seed: int
    docs: list[Document] = field(default_factory=list)
    files: Mapping[str, str] = field(default_factory=dict)
    flaky: dict[str, int] = field(default_factory=dict)  # url -> transient failures before success
    auth_required: tuple[str, ...] = ("https://api.internal/",)
    jobs: dict[str, int] = field(default_factory=dict)  # job id -> polls until done
    tools: Mapping[str, ToolSpec] = field(default_factory=lambda: dict(TOOLS))
    # Search results per concept set, and each document's result line; the documents
    # never change after build().
    _ranked: dict[frozenset[str], list[Document]] = field(default_factory=dict, repr=False, compare=False)
    _lines: dict[str, str] = field(default_factory=dict, repr=False, compare=False)
    _by_concept: dict[str, list[Document]] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def build(cls, seed: int, n_docs: int = 140) -> "World":
        """The world of ``seed``. Content comes from one keyed hash per document and file
        and is rendered lazily: a suite builds a world per episode, tens of thousands."""
        names = _NAMES
        nn = len(names)
        docs = []
        stream = hashlib.shake_256(f"{seed}\x1fdocs".encode()).digest(64 * n_docs)
        for i in range(n_docs):
            r = stream[64 * i: 64 * i + 64]
            k = (2, 2, 3)[r[0] % 3]
            picked: list[str] = []
            j = 1
            while len(picked) < k:
                c = names[(r[j] << 8 | r[j + 1]) % nn]
                j += 2
                if c not in picked:
                    picked.append(c)
            docs.append(Document(f"D{i:03d}", frozenset(picked), r))
        return cls(seed=seed, docs=docs, files=_Files(seed, _PATHS))

    # -- helpers for scenario authors (never seen by detectors) ------------------------------
    def search_ids(self, query: str, limit: int = 3, offset: int = 0) -> list[str]:
        return [d.id for d in self._rank(concepts_of(query))[offset:offset + limit]]

    def _rank(self, qc: frozenset[str]) -> list[Document]:
        hit = self._ranked.get(qc)
        if hit is not None:
            return hit
        ranked: list[Document] = []
        if qc:
            index = self._by_concept
            if not index:
                for d in self.docs:
                    for c in d.concepts:
                        index.setdefault(c, []).append(d)
            hits: dict[str, int] = {}
            docs: dict[str, Document] = {}
            for c in qc:
                for d in index.get(c, ()):
                    hits[d.id] = hits.get(d.id, 0) + 1
                    docs[d.id] = d
            if hits:
                # Only documents that match as well as the best one: adding a concept
                # narrows or shifts the result set, rewording keeps it.
                best = max(hits.values())
                ranked = [docs[i] for i in sorted(i for i, n in hits.items() if n == best)]
        self._ranked[qc] = ranked
        return ranked

    def _doc_line(self, d: Document) -> str:
        line = self._lines.get(d.id)
        if line is None:
            line = self._lines[d.id] = f"[{d.id}] {d.title} — {d.body[:90]}"
        return line

    def dirs(self) -> list[str]:
        return sorted({p.split("/")[0] for p in self.files})

    # -- execution ------------------------------------------------------------------------
    def execute(self, state: WorldState, call: ToolCall) -> Result:
        args = call.args
        if not isinstance(args, dict):
            args = args if isinstance(args, Mapping) else {}
        handler = getattr(self, f"_t_{call.tool}", None)
        nxt = WorldState(state.tick + 1, state.written, state.attempts, state.job_started, state.records, state.browser,
                         state.delegated)
        if handler is None:
            obs = Observation(f"Error: unknown tool {call.tool!r}", error=True)
            facts = frozenset({f"err:unknown_tool:{call.tool}"})
        else:
            try:
                obs, facts, nxt = handler(nxt, args)
            except (KeyError, TypeError, ValueError) as exc:
                obs = Observation(f"Error: invalid arguments for {call.tool}: {exc}", error=True)
                facts = frozenset({f"err:args:{call.tool}:{_h(exc)}"})
        spec = self.tools.get(call.tool)
        text = obs.content if isinstance(obs.content, str) else str(obs.content)
        tokens = (len(text) + len(str(args))) // 4 + 20
        return Result(obs, facts, nxt, spec.price if spec else 0.0, tokens)

    def noise(self, state: WorldState, what: str) -> str:
        # Volatile bits real tools print: the same call rarely returns byte-identical text.
        r = _bytes(self.seed, state.tick, what)
        return f"(took {8 + r[0] % 233} ms, request {r[1:5].hex()})"

    def _t_bash(self, state: WorldState, args: Mapping[str, Any]):
        # The shell's commands are parsed by fixed rules (scenarios.shell), never executed.
        return run_command(self, state, str(args["command"]))

    def _t_str_replace_editor(self, state: WorldState, args: Mapping[str, Any]):
        return run_editor(self, state, args)

    def _t_execute_bash(self, state: WorldState, args: Mapping[str, Any]):
        return run_shell(self, state, args)

    def _t_search(self, state: WorldState, args: Mapping[str, Any]):
        query = str(args.get("query", args.get("q", "")))
        limit = int(args.get("limit", 3))
        # Numbered pages (page=1, 2, ...) are offsets counted in pages.
        offset = (int(args["page"]) - 1) * limit if "page" in args else int(args.get("offset", 0))
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must be non-negative")
        ranked = self._rank(concepts_of(query))
        page = ranked[offset:offset + limit]
        if not page:
            why = ("no documents match" if not ranked else f"page {args['page']} is past the last page" if "page" in args
                   else f"offset {offset} is past the last result ({len(ranked)})")
            empty = ",".join(sorted(concepts_of(query)))
            return Observation(f"0 results for {query!r}: {why}. {self.noise(state, 'search')}"), frozenset({f"empty:{empty}"}), state
        lines = [f"{len(ranked)} results, showing {offset + 1}-{offset + len(page)} {self.noise(state, 'search')}"]
        lines += [self._doc_line(d) for d in page]
        return Observation("\n".join(lines)), frozenset(f"doc:{d.id}" for d in page), state

    def _page_text(self, url: str) -> str:
        """A page's prose: a few sentences drawn from the lexicon, fixed per world and URL."""
        digest = hashlib.blake2s(f"{self.seed}\x1f{url}".encode(), digest_size=16).digest()
        words = []
        for i in range(0, 12, 3):
            concept = _NAMES[int.from_bytes(digest[i:i + 2], "big") % len(_NAMES)]
            forms = CONCEPTS[concept]
            words.append(f"{forms[digest[i + 2] % len(forms)]} {int.from_bytes(digest[i:i + 3], 'big') % 9973}")
        return "; ".join(words) + "."

    def _t_read_file(self, state: WorldState, args: Mapping[str, Any]):
        path = norm_path(args["path"])
        content = state.file(path)
        if content is None:
            content = self.files.get(path)
        if content is None:
            return Observation(f"Error: No such file or directory: {path}", error=True), frozenset({f"missing:{path}"}), state
        return Observation(content), frozenset({f"file:{path}:{_h(content)}"}), state

    def _t_list_dir(self, state: WorldState, args: Mapping[str, Any]):
        path = norm_path(args.get("path", "."))
        names = sorted({p for p in self.files if p.startswith(path + "/")} | {p for p, _ in state.written if p.startswith(path + "/")})
        if not names:
            return Observation(f"Error: No such directory: {path}", error=True), frozenset({f"missing:{path}/"}), state
        listing = "\n".join(n.split("/", 1)[1] for n in names)
        return Observation(listing), frozenset({f"dir:{path}:{_h(listing)}"}), state

    def _t_http_get(self, state: WorldState, args: Mapping[str, Any]):
        url = str(args["url"]).strip()
        if any(url.startswith(p) for p in self.auth_required):
            # The problem is the token, not the URL: every such call teaches the same thing.
            return (Observation(f"401 Unauthorized: missing or expired token {self.noise(state, 'http')}", error=True),
                    frozenset({"err:http:401"}), state)
        n = (state.get(state.attempts, url) or 0) + 1
        state = replace(state, attempts=tuple(p for p in state.attempts if p[0] != url) + ((url, n),))
        if n <= self.flaky.get(url, 0):
            return (Observation(f"503 Service Unavailable (attempt {n}); retry after {n}s {self.noise(state, 'http')}", error=True),
                    frozenset({f"transient:{url}:{n}"}), state)
        if "/missing/" in url:
            return Observation(f"404 Not Found: {url}", error=True), frozenset({f"404:{url}"}), state
        body = f"200 OK {url}\n<html><title>{url.rsplit('/', 1)[-1]}</title><p>{self._page_text(url)}</p></html>"
        return Observation(body + " " + self.noise(state, "http")), frozenset({f"page:{url}"}), state

    def _t_check_status(self, state: WorldState, args: Mapping[str, Any]):
        job = str(args["job_id"]).strip()
        started = state.get(state.job_started, job)
        if started is None:
            started = state.tick
            state = replace(state, job_started=state.job_started + ((job, started),))
        polls_needed = self.jobs.get(job, 3)
        elapsed = state.tick - started
        if elapsed < polls_needed:
            pct = int(100 * (elapsed + 1) / (polls_needed + 1))
            return Observation(f"job {job}: running, {pct}% complete {self.noise(state, 'status')}"), frozenset({f"status:{job}:{pct}"}), state
        return Observation(f"job {job}: succeeded {self.noise(state, 'status')}"), frozenset({f"status:{job}:done"}), state

    def _t_run_tests(self, state: WorldState, args: Mapping[str, Any]):
        target = norm_path(args.get("target", "tests"))
        fixed = sum(1 for p, _ in state.written if p.startswith("src/"))
        version = _h(state.written)
        failing = max(0, 4 - fixed)
        if failing:
            names = ", ".join(f"test_case_{i}" for i in range(fixed, 4))
            text = f"{target}: {failing} failed, {8 - failing} passed ({names}) {self.noise(state, 'tests')}"
        else:
            text = f"{target}: 8 passed {self.noise(state, 'tests')}"
        return Observation(text, error=bool(failing)), frozenset({f"tests:{target}:{version}"}), state

    def _t_write_file(self, state: WorldState, args: Mapping[str, Any]):
        path = norm_path(args["path"])
        content = str(args.get("content", ""))
        if (state.file(path) or self.files.get(path)) == content:
            return Observation(f"wrote {len(content)} bytes to {path} (unchanged)"), frozenset({f"write:{path}:{_h(content)}"}), state
        state = replace(state, written=state.written + ((path, content),))
        return Observation(f"wrote {len(content)} bytes to {path}"), frozenset({f"write:{path}:{_h(content)}"}), state

    def _t_calc(self, state: WorldState, args: Mapping[str, Any]):
        expr = str(args["expression"])
        try:
            value = safe_arith(expr)
        except (ValueError, SyntaxError, ZeroDivisionError, OverflowError) as exc:
            return Observation(f"Error: cannot evaluate {expr!r}: {exc}", error=True), frozenset({f"calcerr:{_h(expr)}"}), state
        return Observation(f"{expr} = {value:g}"), frozenset({f"calc:{value:g}"}), state
