"""Hindsight labelling of unlabelled traces, following the rubric of the real-trace labels.

A call is **redundant** when it re-issues an earlier call on its path and its result adds
nothing the earlier results had not already returned. Unlike a detector, the labeller
reads the judged call's own result (hindsight). The rules, all general:

- *re-issue*: a shell line made only of commands that earlier lines ran after their last
  write, nothing written since (``stale``: the check a patching line ran, run again alone);
  or the same tool, and the arguments are equal (``stale``), equal after cosmetic
  normalisation — case, quoting, whitespace, code comments — (``cosmetic``), reworded
  natural-language text with the same content words (``paraphrased``; never for code:
  changed code is a re-test; never for a write that went through after another write: two
  ``sed -i`` lines in other words are two changes), or equal but for one nudged value that is not an
  identifier (``drift``; another id, item or route is another call — so is a text that
  quotes other names than the earlier one: "check 'A'" then "check 'B'" is fan-out);
- *adds nothing*: the result is identical to the re-issued call's result, or every word
  of it (less the words of the call's own arguments, which results echo; numbers count
  whole) already appeared in earlier results — strictly in its opening words, with a
  small share of new words allowed further on in long results. A result that names where
  it is (a line with a URL: a browser's page and viewport) brings news when that place is
  new, and on a known place a larger share of new words is screen noise (OCR, banners) —
  unless the result reports an action never taken before (a new control clicked), whose
  effect those words are.
  An action that its delegation's reply already reported (the orchestrator's instruction,
  then the sub-agent's own call) is judged against what was known before the delegation.
  A call with no recorded result adds nothing when the call it repeats got one (a
  request already fulfilled);
- not loops: a retry after an error that now succeeds, polling that sees changed state,
  paging that reveals new text — all bring new words — and a call after a successful
  write, which changed the world;
- ``no_progress``: three different calls in a row that fail and whose errors bring
  nothing new; the third is the onset (another id, item or route that returns nothing is
  fan-out, not this);
- a call whose result is empty by design (a ``think`` note) asks the world nothing and is
  never judged; ``cycle``: a repeat of the call before last, alternating with another.

The onset of a path is its first redundant call; every call gets a label. How long the
loop lasts follows from the same per-call verdicts (:mod:`scenarios.severity`): the
redundant calls in a row from the onset, and whether they reach the path's end. The
thresholds below were set on the dev half of the hand labels (``bench/bench_label.py``);
the held-out half checks them. A trace
whose labels a person confirmed or corrected (``meta["label_source"] == "human"``, set
when a review decision is imported) keeps them: a second run never overwrites them.
"""
from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any, Iterable, Iterator

from detectors.commands import Command, line_commands, run_after_writes, shell_line
from detectors.effects import Effects, effect_of
from detectors.file_views import shown_lines, view_of, written_files
from detectors.protocol import ToolCall, result_known
from scenarios import realsuite
from scenarios.outcome import UNKNOWN, run_outcome
from scenarios.severity import SEVERITY_KEY, Severity, severity, severity_meta
from scenarios.tree import Episode, Label, ToolNode

RUBRIC_VERSION = 1
#: Meta keys of a trace whose labels came from a person.
SOURCE_KEY, DECISION_KEY = "label_source", "label_decision"
HUMAN = "human"
LABELLER = "labeller"

#: Two texts with at least this share of common content words say the same (paraphrase).
PARAPHRASE_JACCARD = 0.5
#: ... and for texts of at least ``LONG_TEXT_WORDS`` content words (instructions to an agent).
LONG_PARAPHRASE_JACCARD, LONG_TEXT_WORDS = 0.35, 10
#: A string argument is "nudged" (drift) when at least this much of it stays (difflib ratio).
NUDGE_RATIO = 0.6
#: Code is "nudged" when at most this many lines change, in code of at least so many lines.
CODE_NUDGE_LINES, CODE_MIN_LINES = 2, 4
#: A long result may bring this share of new words and still count as nothing new.
NOISE_SHARE = 0.1
#: On a page already seen (same URL line), this share of new words is screen noise (OCR).
PLACE_NOISE_SHARE = 0.15
#: ... but only if it is long: shorter results must bring no new phrase at all.
NOISE_MIN_WORDS = 60
#: The opening words of a result say where the agent is (page and position, record):
#: any new phrase there is news.
HEAD_WORDS = 60
#: A tool whose name holds one of these verbs changes the world when it succeeds.
WRITE_VERBS = frozenset(
    "book cancel update create write send delete remove modify set post put transfer exchange pay "
    "submit save insert add upload edit move rename apply purchase order reserve".split()
)
_STOP = frozenset(
    "a an the of to in on for and or is are was be by with at from as that this it its what which who "
    "how when where do does did please can you i me my your".split()
)
# Numbers stay whole ("5.0", "06:00:00"): a new figure is news even if its digits are not.
_WORD = re.compile(r"\d+(?:[.:,/-]\d+)*|\w+", re.UNICODE)
#: A code-like value mixing letters and digits (K1NW8N, certificate_4856383); dates and
#: numbers are values, not names.
_IDENT = re.compile(r"^(?=.*\d)(?=.*[A-Za-z])[A-Za-z0-9_\-.]{4,}$")
_ID_KEY = re.compile(r"(^|[_\-])(id|ids)$|[a-z](Id|Ids|ID)$", re.I)
_COMMENT = re.compile(r"(?m)\s*(#|//).*$")


#: The thresholds above that a calibration may choose (``bench/bench_label.py --loco`` picks
#: them on the other corpora): name -> shipped value.
THRESHOLDS = ("PARAPHRASE_JACCARD", "LONG_PARAPHRASE_JACCARD", "NUDGE_RATIO", "NOISE_SHARE", "PLACE_NOISE_SHARE",
              "NOISE_MIN_WORDS", "HEAD_WORDS")


@contextmanager
def thresholds(**values: float) -> Iterator[None]:
    """Label with other values of :data:`THRESHOLDS` inside the block (a calibration's
    candidates); the shipped values come back after it."""
    unknown = set(values) - set(THRESHOLDS)
    if unknown:
        raise ValueError(f"not a labeller threshold: {', '.join(sorted(unknown))}")
    module = sys.modules[__name__]
    saved = {k: getattr(module, k) for k in values}
    try:
        for k, v in values.items():
            setattr(module, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(module, k, v)


# -- text helpers --------------------------------------------------------------------------
@lru_cache(maxsize=8192)
def words(text: str) -> tuple[str, ...]:
    # Cached: every call's result is read again by each later call of its path.
    return tuple(_WORD.findall(text.lower()))


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in words(text) if w not in _STOP)


def cosmetic(text: str) -> str:
    """Text less what does not change its meaning: case, quotes, punctuation, spacing."""
    return " ".join(words(text.replace("'", "").replace('"', "")))


def code_cosmetic(text: str) -> str:
    """Code less comments, quote style and spacing: what remains is the computation."""
    return re.sub(r"\s+", " ", _COMMENT.sub("", text).replace("'", '"')).strip()


def looks_like_code(text: str) -> bool:
    return "\n" in text.strip() and bool(re.search(r"[=(){}\[\];]", text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def text_similarity(x: str, y: str) -> float:
    """How alike two argument texts are in content: shared content words (Jaccard), scaled
    so that ``PARAPHRASE_JACCARD`` is the bar for short texts and ``LONG_PARAPHRASE_JACCARD``
    for long ones (a reworded instruction keeps a smaller share of its words than a query)."""
    a, b = content_words(x), content_words(y)
    sim = jaccard(a, b)
    if min(len(a), len(b)) >= LONG_TEXT_WORDS and sim >= LONG_PARAPHRASE_JACCARD:
        return max(sim, PARAPHRASE_JACCARD)
    return sim


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """A JSON value as ``path -> scalar``, so nested arguments compare leaf by leaf."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(leaves(v, f"{prefix}.{k}"))
        return out or {prefix: {}}
    if isinstance(value, list):
        out = {}
        for i, v in enumerate(value):
            out.update(leaves(v, f"{prefix}[{i}]"))
        return out or {prefix: []}
    return {prefix: value}


def calls_sha1(ep: Episode) -> str:
    """The hash real-trace labels are matched by (the one in :mod:`scenarios.realsuite`)."""
    return realsuite.calls_sha1(n.call for n in ep.tool_nodes())


# -- judging one call ----------------------------------------------------------------------
@dataclass
class Evidence:
    """Why a call was judged redundant (or nearly so)."""

    call: int  # index of the judged call among the episode's tool calls
    repeats: int | None  # the earlier call it re-issues
    kind: str
    similarity: float  # of the arguments, 1.0 = identical
    new_in_result: list[str]  # words of its result that no earlier result had (a sample)
    new_share: float  # their share of the result's words
    note: str = ""


def _note_to_self(node: ToolNode) -> bool:
    """A call that returns nothing by design (a ``think`` tool): it asks the world nothing."""
    return node.observation is not None and not node.observation.error and node.observation.content == ""


#: A tool whose name starts with one of these reads, whatever it reads (``get_order``: "order"
#: is one of the write verbs, but here it is the thing read).
READ_VERBS = frozenset("get list search find fetch read view lookup show query describe count".split())


def is_write(call: ToolCall) -> bool:
    """Whether ``call`` changes the world: its tool's declared effect (``detectors.effects``: an
    editor's ``str_replace``, a shell ``sed -i``) where the tool is declared, else its name — a
    write verb, unless the name starts with a read verb."""
    effect = effect_of(call)
    if effect is not None:
        return effect.writes
    words = [w for w in re.split(r"[^a-z]+", call.tool.lower()) if w]
    return bool(words) and words[0] not in READ_VERBS and bool(set(words) & WRITE_VERBS)


def _identifier(path: str, value: Any) -> bool:
    """Whether a leaf names *what* the call is about: another id there is another call.

    Only top-level arguments count: an id inside a larger structure (one flight of a
    booking's flights) is one parameter among many, and changing it is a nudge.
    """
    if path.count(".") > 1 or "[" in path:
        return False
    key = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return bool(_ID_KEY.search(key)) or (
        isinstance(value, str) and bool(_IDENT.match(value)) and not value.replace(".", "").isdigit()
    )


_QUOTED = re.compile(r"(?<!\w)['\"\u2018\u201c]([^'\"\u2018\u2019\u201c\u201d\n]+?)['\"\u2019\u201d](?!\w)")


def quoted_items(text: str) -> frozenset[str]:
    """The names a text quotes ("check 'Casino Royale'"): the items it is about."""
    return frozenset(filter(None, (cosmetic(m) for m in _QUOTED.findall(text))))


def other_items(x: str, y: str) -> bool:
    """Whether two texts quote names and share none: the same request about another item
    is fan-out, however alike the rest of the wording. A name inside a longer one (a page
    by its short title) is the same item."""
    a, b = quoted_items(x), quoted_items(y)
    return bool(a) and bool(b) and not any(f" {p} " in f" {q} " or f" {q} " in f" {p} " for p in a for q in b)


def args_match(a: dict[str, Any], b: dict[str, Any]) -> tuple[str, float] | None:
    """How call ``b``'s arguments re-issue ``a``'s: (kind, similarity), or ``None``."""
    if a == b:
        return "stale", 1.0
    la, lb = leaves(a), leaves(b)
    if la.keys() != lb.keys():
        return None
    differing = [k for k in la if la[k] != lb[k]]
    kinds: list[str] = []
    sims: list[float] = []
    for k in differing:
        x, y = la[k], lb[k]
        if isinstance(x, str) and isinstance(y, str):
            if looks_like_code(x) or looks_like_code(y):
                if code_cosmetic(x) == code_cosmetic(y):
                    kinds.append("cosmetic")
                    sims.append(1.0)
                    continue
                if len(differing) == 1 and _code_nudge(x, y):
                    kinds.append("drift")
                    sims.append(0.9)
                    continue
                return None
            if cosmetic(x) == cosmetic(y):
                kinds.append("cosmetic")
                sims.append(1.0)
                continue
            if _identifier(k, x) or _identifier(k, y) or other_items(x, y):
                return None
            sim = text_similarity(x, y)
            if sim >= PARAPHRASE_JACCARD:
                kinds.append("paraphrased")
                sims.append(sim)
                continue
        if len(differing) == 1 and not _identifier(k, x) and _nudge(x, y):
            return _drift(k, x, y, la)
        return None
    kind = next((k for k in ("paraphrased", "drift") if k in kinds), "cosmetic")
    return kind, min(sims) if sims else 1.0


def _nudge(x: Any, y: Any) -> bool:
    """Whether ``y`` is ``x`` nudged: another number, or a string with a small edit (a date, a count)."""
    if isinstance(x, (int, float)) and isinstance(y, (int, float)) and not isinstance(x, bool):
        return True
    if isinstance(x, str) and isinstance(y, str) and max(len(x), len(y)) <= 200:  # a value, not a text
        return SequenceMatcher(None, x, y, autojunk=False).ratio() >= NUDGE_RATIO
    return False


def _code_nudge(x: str, y: str) -> bool:
    """Code that differs in at most ``CODE_NUDGE_LINES`` lines (comments and spacing aside)
    of at least ``CODE_MIN_LINES``: one parameter changed, the computation kept."""
    a = [code_cosmetic(line) for line in x.splitlines() if code_cosmetic(line)]
    b = [code_cosmetic(line) for line in y.splitlines() if code_cosmetic(line)]
    if min(len(a), len(b)) < CODE_MIN_LINES:
        return False
    sm = SequenceMatcher(None, a, b, autojunk=False)
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in sm.get_opcodes() if tag != "equal")
    return changed <= CODE_NUDGE_LINES


def _drift(key: str, x: Any, y: Any, all_leaves: dict[str, Any]) -> tuple[str, float] | None:
    # One nudged value among several that stay: similarity is the share that stayed.
    if len(all_leaves) < 2 and not isinstance(x, (int, float)):
        return None
    return "drift", round(1 - 1 / max(len(all_leaves), 2), 3)


def _result_text(node: ToolNode) -> str | None:
    return None if node.observation is None else node.observation.content


def _arg_words(node: ToolNode) -> frozenset[str]:
    """Words a result may echo from its call ("could not find <query>"); code is run, not echoed."""
    return frozenset(w for v in leaves(node.call.args).values()
                     if isinstance(v, str) and not looks_like_code(v) for w in words(v))


#: Results compare as sets of word n-grams: a new phrase ("positioned 40% down") is news
#: even when each of its words was seen before.
SHINGLE = 1


def shingles(seq: tuple[str, ...] | list[str]) -> set[tuple[str, ...]]:
    if len(seq) < SHINGLE:
        return {tuple(seq)} if seq else set()
    return set(zip(*(seq[i:] for i in range(SHINGLE))))


_URL_LINE = re.compile(r"^.*https?://.*$", re.M)


@lru_cache(maxsize=8192)
def locations(text: str) -> frozenset[tuple[str, ...]]:
    """The lines of a result that name a URL, whole: where a browsing agent is (page,
    viewport position). Reaching one not seen before is news, whatever the page text."""
    return frozenset(("@location", " ".join(words(line))) for line in _URL_LINE.findall(text))


def result_shingles(node: ToolNode) -> set[tuple[str, ...]]:
    text = _result_text(node)
    return set() if text is None else shingles(words(text)) | locations(text)


@dataclass(frozen=True)
class Novelty:
    """What a result brought that its path had not seen."""

    head_new: bool  # a new phrase in its opening words: where it is (page, position, record)
    share: float  # share of new phrases in the rest
    size: int  # phrases in the rest
    sample: tuple[str, ...]  # words of the new phrases
    placed: bool = False  # the result names where it is (a URL line)


NOTHING = Novelty(False, 0.0, 0, ())


def novelty(node: ToolNode, seen: set[tuple[str, ...]]) -> Novelty:
    """What ``node``'s result adds to ``seen`` (the phrases of earlier results), less its own arguments' echo."""
    text = _result_text(node)
    if text is None:
        return NOTHING
    echo = _arg_words(node)
    seq = words(text)
    head, rest = shingles(seq[:HEAD_WORDS]), shingles(seq[HEAD_WORDS - SHINGLE + 1:]) if len(seq) > HEAD_WORDS else set()
    # A phrase that echoes the call's own arguments ("could not find <query>") is not news.
    new_head = [sh for sh in head if sh not in seen and not echo.intersection(sh)]
    new_rest = [sh for sh in rest if sh not in seen and not echo.intersection(sh)]
    sample = tuple(sorted({w for sh in new_head + new_rest for w in sh})[:12])
    places = locations(text)
    if places:
        # A browsing result says where it is in its URL lines: the place is its head, and
        # the page text (OCR, banners) is content, compared with more tolerance.
        body = head | rest
        new_body = [sh for sh in body if sh not in seen and not echo.intersection(sh)]
        return Novelty(any(loc not in seen for loc in places), len(new_body) / len(body) if body else 0.0,
                       len(body), sample, placed=True)
    return Novelty(bool(new_head), len(new_rest) / len(rest) if rest else 0.0, len(rest), sample)


def adds_nothing(nv: Novelty, new_action: bool = False) -> bool:
    """Nothing new up front, and at most a little noise (UI changes, OCR) in a long rest.

    A known place re-rendered differs by more (OCR, banners) than other results, unless
    the result reports an action never taken before (``new_action``): what changed on
    the page then is that action's effect, and only the common allowance holds.
    """
    if nv.head_new:
        return False
    noise = PLACE_NOISE_SHARE if nv.placed and not new_action else NOISE_SHARE
    return nv.share == 0.0 or (nv.size >= NOISE_MIN_WORDS and nv.share <= noise)


def reports_cause(prev: ToolNode, node: ToolNode) -> bool:
    """Whether ``prev`` is a delegation whose reply already reports ``node``, the action it
    caused (an orchestrator's instruction, then the sub-agent's own tool call): then the
    two are one event, and ``node`` is judged against what was known before ``prev``."""
    a, b = _result_text(prev), _result_text(node)
    return (a is not None and b is not None and prev.call.tool != node.call.tool
            and len(b.strip()) >= 20 and b.strip() in a)


def reports_new_action(path: list[ToolNode], j: int) -> bool:
    """Whether ``path[j]`` is a delegation whose reply reports the next call, an action
    that re-issues no earlier call of the path (a control never clicked, a field never filled)."""
    if j + 1 >= len(path) or not reports_cause(path[j], path[j + 1]):
        return False
    act = path[j + 1].call
    return not any(e.call.tool == act.tool and args_match(e.call.args, act.args) for e in path[:j])


_EFFECTS = Effects()


def _wrote(node: ToolNode) -> bool:
    """The call changed the world: a refused edit wrote nothing; a shell line that writes and
    then fails did write (``cat > f.py <<EOF … && python f.py`` reports the script's failure)."""
    return (node.observation is not None and is_write(node.call)
            and (not node.observation.error or _EFFECTS.is_shell(node.call.tool)))


class _ShownLines:
    """The lines of each file the path's views showed since that file was last written: a view
    that shows only such lines re-issues an earlier view with a parameter nudged and adds
    nothing (the rubric's drift), whatever words its lines hold."""

    def __init__(self) -> None:
        self.lines: dict[str, set[int]] = {}
        self.by: dict[str, int] = {}  # path -> the last view of it

    def observe(self, node: ToolNode, j: int) -> tuple[int, str] | None:
        """Take in path call ``j``; (the earlier view, a note) when it showed nothing but lines
        already shown."""
        if _wrote(node):
            files = written_files(node.call, _EFFECTS)
            if files is None:
                self.lines.clear()  # a write whose files are not known: every file may have changed
            for path in files or ():
                self.lines.pop(path, None)
            return None
        view = view_of(node.call, _EFFECTS)
        if view is None or not result_known(node.observation) or node.observation.error:
            return None
        numbers = shown_lines(view, str(node.observation.content))
        if not numbers:
            return None
        known = self.lines.setdefault(view.path, set())
        earlier = self.by.get(view.path)
        self.by[view.path] = j
        if earlier is not None and known.issuperset(numbers):
            return earlier, f"lines {min(numbers)}-{max(numbers)} of {view.path} shown already"
        known.update(numbers)
        return None


def _commands(node: ToolNode) -> tuple[Command, ...] | None:
    """The commands of a shell tool's line, None for other calls."""
    line = shell_line(node.call.args) if _EFFECTS.is_shell(node.call.tool) else None
    return line_commands(line) if line is not None else None


class _RanCommands:
    """The commands the path's shell lines ran after their line's last write, since the last
    write anywhere: a line made only of them re-issues them (a check run again alone after the
    line that patched and ran it), whatever other text the earlier lines held."""

    def __init__(self) -> None:
        self.at: dict[str, int] = {}  # command key -> the last path call that ran it

    def reissued(self, commands: tuple[Command, ...] | None) -> int | None:
        """The latest earlier call whose ``commands`` (a line's) re-runs, when it runs nothing else."""
        if not commands or any(c.writes for c in commands):
            return None
        found = [self.at.get(c.key) for c in commands if not c.idle]
        return max(found) if found and None not in found else None

    def observe(self, node: ToolNode, j: int, commands: tuple[Command, ...] | None) -> None:
        if _wrote(node) or (commands and any(c.moves for c in commands)):
            self.at.clear()  # the world, or the directory a lasting shell reads, may have changed
        if commands and result_known(node.observation) and not node.observation.error:
            self.at.update((c.key, j) for c in run_after_writes(commands))


def judge_path(path: list[ToolNode], index: dict[str, int]) -> dict[str, Evidence | None]:
    """node id -> the evidence that it is redundant (``None`` = not redundant), for one path."""
    out: dict[str, Evidence | None] = {}
    shown = _ShownLines()
    ran = _RanCommands()
    seen: set[tuple[str, ...]] = set()
    seen_before_prev: set[tuple[str, ...]] = set()
    barren_run = 0  # consecutive calls whose results brought nothing
    last_write = -1
    for j, node in enumerate(path):
        nv = novelty(node, seen_before_prev if j and reports_cause(path[j - 1], node) else seen)
        known = result_known(node.observation)
        nothing = known and adds_nothing(nv, reports_new_action(path, j))
        ev = None
        if _note_to_self(node):
            out[node.id] = None
            continue
        for i in range(j - 1, -1, -1):
            earlier = path[i]
            if earlier.call.tool != node.call.tool or i < last_write:
                continue
            m = args_match(earlier.call.args, node.call.args)
            if m is None:
                continue
            kind, sim = m
            if kind == "paraphrased" and known and not node.observation.error and _wrote(node) and _wrote(earlier):
                continue  # two writes in other words are two changes (a request with no reply is judged below)
            same_result = _result_text(earlier) is not None and _result_text(earlier) == _result_text(node)
            # No result to judge: redundant only as a re-issue of a request that got one (fulfilled).
            unrecorded = not known and result_known(earlier.observation)
            if not (same_result or nothing or unrecorded):
                continue
            if earlier.observation is not None and earlier.observation.error and known and not node.observation.error:
                continue  # a retry that succeeded
            if kind == "stale" and i == j - 2 and j + 1 < len(path) and \
                    path[j + 1].call.tool == path[j - 1].call.tool and path[j + 1].call.args == path[j - 1].call.args:
                kind = "cycle"
            note = "identical result" if same_result else ("no result recorded" if unrecorded else "no new words")
            ev = Evidence(index[node.id], index[earlier.id], kind, sim, list(nv.sample), round(nv.share, 4), note)
            break
        commands = _commands(node)  # parsed once for both: judged, then remembered
        rerun = ran.reissued(commands) if ev is None and nothing else None
        if rerun is not None:
            ev = Evidence(index[node.id], index[path[rerun].id], "stale", 1.0, list(nv.sample), round(nv.share, 4),
                          "its commands already ran, with nothing written since")
        ran.observe(node, j, commands)
        again = shown.observe(node, j)
        if ev is None and again is not None:
            ev = Evidence(index[node.id], index[path[again[0]].id], "drift", 1.0, [], 0.0, again[1])
        if ev is None and nothing and node.observation.error:
            barren_run += 1
            if barren_run >= 3:
                ev = Evidence(index[node.id], None, "no_progress", 0.0, [], 0.0, "third call in a row with nothing new")
        elif ev is None:
            barren_run = 0
        out[node.id] = ev
        seen_before_prev = set(seen)
        if node.observation is not None:
            seen.update(result_shingles(node))
            if _wrote(node):
                last_write = j
    return out


# -- whole traces ----------------------------------------------------------------------------
@dataclass
class Proposal:
    """The labeller's proposal for one trace, as the review file lists it."""

    episode: str
    calls_sha1: str
    n_calls: int
    loops: bool
    onset: int | None
    kind: str | None
    confidence: float
    source: str
    evidence: list[dict[str, Any]]
    calls: list[dict[str, Any]] = field(default_factory=list)  # for the review page
    decision: str | None = None  # a person's: accepted / corrected / clean / ambiguous
    # The loop's severity in hindsight (SPEC §11), None on a clean trace.
    persistence: int | None = None
    to_end: bool | None = None
    severity: str | None = None
    outcome: str = UNKNOWN  # how the run ended, as its meta records it

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _confidence(ev: Evidence | None, near: Evidence | None) -> float:
    """How sure the proposal is: high for an identical re-issue, lower near thresholds."""
    if ev is not None:
        base = {"stale": 0.95, "cycle": 0.9, "cosmetic": 0.85, "drift": 0.65, "paraphrased": 0.6,
                "no_progress": 0.5}.get(ev.kind, 0.5)
        if ev.note == "no result recorded":
            base -= 0.2
        elif ev.note == "no new words" and ev.new_share > 0:
            base -= 0.1
        return round(max(base, 0.05), 3)
    if near is not None:
        return round(0.55 + 0.4 * min(near.new_share * 5, 1.0), 3)
    return 0.95


def _near_miss(path: list[ToolNode], index: dict[str, int]) -> Evidence | None:
    """The clean path's closest call to a loop: a re-issue whose result did bring something."""
    best: Evidence | None = None
    seen: set[tuple[str, ...]] = set()
    for j, node in enumerate(path):
        nv = novelty(node, seen)
        for i in range(j):
            m = args_match(path[i].call.args, node.call.args) if path[i].call.tool == node.call.tool else None
            if m is not None:
                if best is None or nv.share < best.new_share:
                    best = Evidence(index[node.id], index[path[i].id], "near", m[1], list(nv.sample), round(nv.share, 4),
                                    "re-issue whose result brought new words")
                break
        if node.observation is not None:
            seen.update(result_shingles(node))
    return best


def _call_rows(ep: Episode, limit: int = 4000) -> list[dict[str, Any]]:
    rows = []
    for n in ep.tool_nodes():
        content = _result_text(n)
        rows.append({
            "tool": n.call.tool,
            "args": json.dumps(n.call.args, ensure_ascii=False, sort_keys=True)[:limit],
            "result": None if content is None else content[:limit],
            "error": bool(n.observation and n.observation.error),
        })
    return rows


def onset_path(ep: Episode, onset: int) -> list[ToolNode]:
    """The tool calls of the first root-to-leaf path through call ``onset`` (its only path when linear)."""
    target = ep.tool_nodes()[onset].id
    for leaf_path in ep.paths():
        calls = [n for n in leaf_path if isinstance(n, ToolNode)]
        if any(n.id == target for n in calls):
            return calls
    raise ValueError(f"episode {ep.id}: call {onset} is on no path")


def loop_severity(path: list[ToolNode], redundant: set[str], onset_id: str) -> Severity:
    """The severity of the loop starting at ``onset_id`` on ``path``, given the ids of the calls
    judged redundant (the onset counts as redundant: it is where the loop was located).
    A note to self (a ``think`` call) is skipped.

    An action that its delegation's reply already reported is one event with the delegation
    (:func:`reports_cause`): it lasts the loop or ends it as the delegation does. Judged
    alone it may look new (another control clicked) while its result, already in the
    reply, brought nothing.
    """
    flags: list[bool | None] = [n.id in redundant or n.id == onset_id for n in path]
    for j, node in enumerate(path):
        if node.id == onset_id:
            continue
        if _note_to_self(node):
            flags[j] = None  # asks the world nothing: neither news nor a repeat
        elif j and reports_cause(path[j - 1], node):
            flags[j] = flags[j - 1]
    return severity(flags, next(i for i, n in enumerate(path) if n.id == onset_id))


def hindsight_severity(ep: Episode, onset: int) -> Severity:
    """The severity of ``ep``'s loop from call ``onset`` (an index among its tool calls, such as
    a hand label's onset), from the labeller's verdicts on the calls of its path."""
    path = onset_path(ep, onset)
    verdicts = judge_path(path, ep.call_index())
    return loop_severity(path, {nid for nid, ev in verdicts.items() if ev is not None}, ep.tool_nodes()[onset].id)


def propose(ep: Episode) -> tuple[dict[str, Label], Proposal]:
    """Labels for every call of ``ep`` and the trace's proposal (onset, evidence, confidence)."""
    index = ep.call_index()
    tools = ep.tool_nodes()
    verdicts: dict[str, Evidence | None] = {}
    near: Evidence | None = None
    for leaf_path in ep.paths():
        path = [n for n in leaf_path if isinstance(n, ToolNode)]
        for nid, ev in judge_path(path, index).items():
            if verdicts.get(nid) is None:
                verdicts[nid] = ev
        if not any(verdicts.get(n.id) for n in path):
            cand = _near_miss(path, index)
            if cand is not None and (near is None or cand.new_share < near.new_share):
                near = cand
    labels = {n.id: Label(verdicts.get(n.id) is not None, verdicts[n.id].kind if verdicts.get(n.id) else None)
              for n in tools}
    first = next((verdicts[n.id] for n in tools if verdicts.get(n.id) is not None), None)
    evidence = [asdict(first)] if first is not None else ([asdict(near)] if near is not None else [])
    sev = None
    if first is not None:
        sev = loop_severity(onset_path(ep, first.call), {nid for nid, ev in verdicts.items() if ev is not None},
                            tools[first.call].id)
    proposal = Proposal(
        episode=ep.id, calls_sha1=calls_sha1(ep), n_calls=len(tools), loops=first is not None,
        onset=None if first is None else first.call, kind=None if first is None else first.kind,
        confidence=_confidence(first, near), source=LABELLER, evidence=evidence, calls=_call_rows(ep),
        **_severity_fields(sev), outcome=run_outcome(ep.meta),
    )
    return labels, proposal


def _severity_fields(sev: Severity | None) -> dict[str, Any]:
    if sev is None:
        return {}
    return severity_meta(sev)


def human_proposal(ep: Episode) -> Proposal:
    """A trace a person decided, as the review file lists it (confidence 1)."""
    tools = ep.tool_nodes()
    onset = realsuite.label_onset(ep)
    decision = ep.meta.get(DECISION_KEY)
    sev = None
    if onset is not None:
        recorded = ep.meta.get(SEVERITY_KEY)
        if isinstance(recorded, dict) and recorded.get("source") == HUMAN:
            sev = Severity(recorded["persistence"], recorded["to_end"])  # as the person confirmed it
        else:
            # A person located the onset; the calls after it carry the labeller's verdicts.
            path = onset_path(ep, onset)
            sev = loop_severity(path, {n.id for n in path if n.label is not None and n.label.loop}, tools[onset].id)
    return Proposal(
        episode=ep.id, calls_sha1=calls_sha1(ep), n_calls=len(tools), loops=onset is not None, onset=onset,
        kind=None if onset is None else tools[onset].label.kind, confidence=1.0, source=HUMAN, evidence=[],
        calls=_call_rows(ep), decision=decision if isinstance(decision, str) else None, **_severity_fields(sev),
        outcome=run_outcome(ep.meta),
    )


def is_human(ep: Episode) -> bool:
    return ep.meta.get(SOURCE_KEY) == HUMAN


def label_episodes(episodes: Iterable[Episode]) -> tuple[list[Episode], list[Proposal]]:
    """Label every call of every episode in place, except where a person decided; proposals in order."""
    done, proposals = [], []
    for ep in episodes:
        if is_human(ep):
            proposals.append(human_proposal(ep))
        else:
            labels, proposal = propose(ep)
            for n in ep.tool_nodes():
                n.label = labels[n.id]
            ep.meta[SOURCE_KEY] = LABELLER
            # The trace carries the proposed severity, which the scorer reads (scenarios.severity).
            ep.meta.pop(SEVERITY_KEY, None)
            if proposal.severity is not None and ep.is_linear():
                ep.meta[SEVERITY_KEY] = severity_meta(Severity(proposal.persistence, proposal.to_end), LABELLER)
            proposals.append(proposal)
        done.append(ep)
    return done, proposals
