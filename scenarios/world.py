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
import random
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from detectors.protocol import Observation, ToolCall

from .lexicon import CONCEPTS, concepts_of


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
        ToolSpec("search", 0.005, "Search the document collection: search(query, limit=3, offset=0)"),
        ToolSpec("read_file", 0.0005, "Read a file: read_file(path)"),
        ToolSpec("list_dir", 0.0002, "List a directory: list_dir(path)"),
        ToolSpec("http_get", 0.002, "Fetch a URL: http_get(url, params={})"),
        ToolSpec("check_status", 0.0005, "Status of a background job: check_status(job_id)"),
        ToolSpec("run_tests", 0.02, "Run the test suite: run_tests(target='tests/')"),
        ToolSpec("write_file", 0.0005, "Write a file: write_file(path, content)"),
        ToolSpec("calc", 0.0001, "Evaluate arithmetic: calc(expression)"),
    )
}

#: Simulated model price per token, for the spend wasted inside loops.
TOKEN_PRICE = 3e-6


def _h(*parts: Any) -> str:
    return hashlib.blake2s("\x1f".join(map(str, parts)).encode(), digest_size=6).hexdigest()


@dataclass(frozen=True, slots=True)
class Document:
    id: str
    title: str
    concepts: frozenset[str]
    body: str


@dataclass(frozen=True, slots=True)
class WorldState:
    """Per-path mutable world, kept immutable: a new one per executed call."""

    tick: int = 0
    written: tuple[tuple[str, str], ...] = ()  # (path, content), latest last
    attempts: tuple[tuple[str, int], ...] = ()  # http attempts per url
    job_started: tuple[tuple[str, int], ...] = ()  # tick at first poll per job

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


def norm_path(path: Any) -> str:
    p = str(path).strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    while "//" in p:
        p = p.replace("//", "/")
    return p.rstrip("/") or "/"


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
class World:
    """A deterministic world built from a seed: documents, files, endpoints and jobs."""

    seed: int
    docs: list[Document] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    flaky: dict[str, int] = field(default_factory=dict)  # url -> transient failures before success
    auth_required: tuple[str, ...] = ("https://api.internal/",)
    jobs: dict[str, int] = field(default_factory=dict)  # job id -> polls until done
    tools: Mapping[str, ToolSpec] = field(default_factory=lambda: dict(TOOLS))

    @classmethod
    def build(cls, seed: int, n_docs: int = 90) -> "World":
        rng = random.Random(seed * 7919 + 17)
        names = sorted(CONCEPTS)
        docs = []
        for i in range(n_docs):
            k = rng.choice((2, 2, 3))
            cs = frozenset(rng.sample(names, k))
            title = " ".join(CONCEPTS[c][0] for c in sorted(cs)).title()
            body = f"{title}: " + "; ".join(
                f"{CONCEPTS[c][rng.randrange(len(CONCEPTS[c]))]} item {rng.randint(10, 999)}" for c in sorted(cs)
            )
            docs.append(Document(f"D{i:03d}", title, cs, body))
        files = {}
        for d in ("src", "docs", "data", "tests"):
            for j in range(8):
                path = f"{d}/{['core', 'util', 'io', 'api', 'model', 'cli', 'db', 'log'][j]}_{d}.{'py' if d in ('src', 'tests') else 'md'}"
                files[path] = f"# {path}\n" + "\n".join(
                    f"line {n}: {rng.choice(names)} {rng.choice(names)} value={rng.randint(0, 9999)}" for n in range(rng.randint(4, 12))
                )
        return cls(seed=seed, docs=docs, files=files)

    # -- helpers for scenario authors (never seen by detectors) ------------------------------
    def search_ids(self, query: str, limit: int = 3, offset: int = 0) -> list[str]:
        return [d.id for d in self._rank(concepts_of(query))[offset:offset + limit]]

    def _rank(self, qc: frozenset[str]) -> list[Document]:
        if not qc:
            return []
        cache = self.__dict__.setdefault("_rank_cache", {})
        hit = cache.get(qc)
        if hit is None:
            hit = cache[qc] = self._rank_uncached(qc)
        return hit

    def _rank_uncached(self, qc: frozenset[str]) -> list[Document]:
        scored = [(len(qc & d.concepts), d) for d in self.docs]
        best = max(s for s, _ in scored)
        if best == 0:
            return []
        # Only documents that match as well as the best one: adding a concept narrows or
        # shifts the result set, rewording keeps it.
        return sorted((d for s, d in scored if s == best), key=lambda d: (-len(d.concepts & qc), d.id))

    def dirs(self) -> list[str]:
        return sorted({p.split("/")[0] for p in self.files})

    # -- execution ------------------------------------------------------------------------
    def execute(self, state: WorldState, call: ToolCall) -> Result:
        args = call.args if isinstance(call.args, Mapping) else {}
        handler = getattr(self, f"_t_{call.tool}", None)
        nxt = replace(state, tick=state.tick + 1)
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

    def _noise(self, state: WorldState, what: str) -> str:
        # Volatile bits real tools print: the same call rarely returns byte-identical text.
        rng = random.Random(f"{self.seed}:{state.tick}:{what}")
        return f"(took {rng.randint(8, 240)} ms, request {rng.getrandbits(32):08x})"

    def _t_search(self, state: WorldState, args: Mapping[str, Any]):
        query = str(args.get("query", args.get("q", "")))
        limit = int(args.get("limit", 3))
        offset = int(args.get("offset", 0))
        if limit < 0 or offset < 0:
            raise ValueError("limit and offset must be non-negative")
        ranked = self._rank(concepts_of(query))
        page = ranked[offset:offset + limit]
        if not page:
            why = "no documents match" if not ranked else f"offset {offset} is past the last result ({len(ranked)})"
            return Observation(f"0 results for {query!r}: {why}. {self._noise(state, 'search')}"), frozenset({f"empty:{sorted(concepts_of(query))}"}), state
        lines = [f"{len(ranked)} results, showing {offset + 1}-{offset + len(page)} {self._noise(state, 'search')}"]
        lines += [f"[{d.id}] {d.title} — {d.body[:90]}" for d in page]
        return Observation("\n".join(lines)), frozenset(f"doc:{d.id}" for d in page), state

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
            return (Observation(f"401 Unauthorized: missing or expired token {self._noise(state, 'http')}", error=True),
                    frozenset({"err:http:401"}), state)
        n = (state.get(state.attempts, url) or 0) + 1
        state = replace(state, attempts=tuple(p for p in state.attempts if p[0] != url) + ((url, n),))
        if n <= self.flaky.get(url, 0):
            return (Observation(f"503 Service Unavailable (attempt {n}); retry after {n}s {self._noise(state, 'http')}", error=True),
                    frozenset({f"transient:{url}:{n}"}), state)
        if "/missing/" in url:
            return Observation(f"404 Not Found: {url}", error=True), frozenset({f"404:{url}"}), state
        body = f"200 OK {url}\n" + f"<html><title>{url.rsplit('/', 1)[-1]}</title> page body {_h(self.seed, url)} </html>"
        return Observation(body + " " + self._noise(state, "http")), frozenset({f"page:{url}"}), state

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
            return Observation(f"job {job}: running, {pct}% complete {self._noise(state, 'status')}"), frozenset({f"status:{job}:{pct}"}), state
        return Observation(f"job {job}: succeeded {self._noise(state, 'status')}"), frozenset({f"status:{job}:done"}), state

    def _t_run_tests(self, state: WorldState, args: Mapping[str, Any]):
        target = norm_path(args.get("target", "tests"))
        fixed = sum(1 for p, _ in state.written if p.startswith("src/"))
        version = _h(state.written)
        failing = max(0, 4 - fixed)
        if failing:
            names = ", ".join(f"test_case_{i}" for i in range(fixed, 4))
            text = f"{target}: {failing} failed, {8 - failing} passed ({names}) {self._noise(state, 'tests')}"
        else:
            text = f"{target}: 8 passed {self._noise(state, 'tests')}"
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
