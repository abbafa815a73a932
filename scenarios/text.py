"""Text variation: paraphrases, cosmetic variants and refinements of search queries.

Paraphrases keep a query's concept set (another synonym or number format, another word
order, filler added or dropped, other casing); refinements change it (one concept added
or swapped) by edits of the same size, so a refinement reads as close to its original
as a paraphrase does. Only the world tells them apart: a refinement is accepted only
when it retrieves something new.
"""
from __future__ import annotations

import random
import re
from typing import Iterable

from .lexicon import CONCEPTS, FILLER, concepts_of, segments, tokens

_TEMPLATES = (
    "{a}",
    "{a} {f}",
    "{f} {a}",
    "{f} {a} {f2}",
    "{a} {f} {f2}",
    "{f} {f2} {a}",
    "what is the {a}",
    "{f} on {a}",
    "{a} {f} please",
)
_CONNECTORS = ("", "", "for", "in", "of", "and", "by", "/", "-", "vs", "with")
# Forms written in capitals in the wild: quarters, fiscal years, acronyms.
_UPPER = re.compile(r"\b(q[1-4]|h[12]|[1-4]q|fy\d\d(?:\d\d)?|cy\d{4}|emea|apac|api|apis|db|cve|dns|vat|acl|rbac|msa|nps|oom|"
                    r"saas|tls|ssl|sql|fte|k8s|p99|eu|us|latam|na|ios|co2)\b")


def _cased(text: str, rng: random.Random) -> str:
    r = rng.random()
    if r < 0.45:
        return text
    if r < 0.7:
        return _UPPER.sub(lambda m: m.group(0).upper(), text)
    if r < 0.82:
        return text[:1].upper() + text[1:]
    if r < 0.92:
        return text.title()
    return _UPPER.sub(lambda m: m.group(0).upper(), text[:1].upper() + text[1:])


def _render_once(cs: list[str], rng: random.Random, filler: bool) -> str:
    rng.shuffle(cs)
    words = [rng.choice(CONCEPTS[c]) for c in cs]
    core = ""
    for i, w in enumerate(words):
        core = w if i == 0 else f"{core} {rng.choice(_CONNECTORS)} {w}"
    core = " ".join(core.split())
    if not filler:
        return core
    tmpl = rng.choice(_TEMPLATES)
    return " ".join(tmpl.format(a=core, f=rng.choice(FILLER), f2=rng.choice(FILLER)).split())


def render(concepts: Iterable[str], rng: random.Random, filler: bool = True) -> str:
    """One surface form of a concept set: random synonyms, order, connectors and filler.

    The result always means exactly ``concepts`` (two adjacent forms can read as a third
    concept, e.g. "sales" + "tax"; such draws are redrawn).
    """
    cs = sorted(concepts)
    want = frozenset(cs)
    out = ""
    for _ in range(20):
        out = _render_once(list(cs), rng, filler)
        if concepts_of(out) == want:
            return out
    return " and ".join(CONCEPTS[c][0] for c in cs)


def _join(segs: list[tuple[str | None, str]]) -> str:
    return " ".join(s for _, s in segs)


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _edit_synonym(segs, rng):
    idx = [i for i, (c, _) in enumerate(segs) if c is not None]
    i = rng.choice(idx)
    c, form = segs[i]
    options = [f for f in CONCEPTS[c] if f != form]
    segs[i] = (c, rng.choice(options))


def _edit_move(segs, rng):
    idx = [i for i, (c, _) in enumerate(segs) if c is not None]
    seg = segs.pop(rng.choice(idx))
    segs.insert(rng.randrange(len(segs) + 1), seg)


def _edit_add_filler(segs, rng):
    segs.insert(rng.randrange(len(segs) + 1), (None, rng.choice(FILLER)))


def _edit_drop_filler(segs, rng):
    idx = [i for i, (c, _) in enumerate(segs) if c is None]
    if idx:
        segs.pop(rng.choice(idx))
    else:
        _edit_add_filler(segs, rng)


_PARA_EDITS = (_edit_synonym, _edit_synonym, _edit_move, _edit_add_filler, _edit_drop_filler)


def _edited(text: str, rng: random.Random, n_edits: int) -> list[tuple[str | None, str]]:
    segs = segments(text)
    for _ in range(n_edits):
        rng.choice(_PARA_EDITS)(segs, rng)
    return segs


def paraphrase(text: str, rng: random.Random, avoid: Iterable[str] = (), tries: int = 40) -> str:
    """A rewording with the same concepts that differs from ``text`` and every string in
    ``avoid`` by more than case and whitespace.

    Mostly a few local edits of the original (a synonym or number format, a moved
    phrase, filler added or dropped), otherwise a fresh rendering; then a casing style.
    """
    cs = concepts_of(text)
    seen = {_norm(a) for a in avoid} | {_norm(text)}
    out = text
    for _ in range(tries):
        if cs and rng.random() < 0.65:
            out = _join(_edited(text, rng, rng.choice((1, 2, 2, 3))))
        else:
            out = render(cs, rng)
        out = _cased(out, rng)
        if _norm(out) not in seen and concepts_of(out) == cs:
            return out
    return out


_CASES = (str.lower, str.upper, str.title, str.capitalize, lambda t: t[:1].lower() + t[1:].upper())
_SPACES = (lambda t: t, lambda t: f"  {t}  ", lambda t: f"{t} ", lambda t: f"{t}\n", lambda t: f"\t{t}",
           lambda t: t.replace(" ", "  "))


def cosmetic_variants(text: str, rng: random.Random, n: int) -> list[str]:
    """``n`` variants of ``text`` differing only in case and whitespace, none equal to it.

    All distinct combinations are used before any repeats, so an exact-match detector
    only sees an identical string again late in a long loop.
    """
    combos = {sp(case(text)) for case in _CASES for sp in _SPACES} - {text}
    pool = sorted(combos)
    rng.shuffle(pool)
    return [pool[i % len(pool)] for i in range(n)]


def refine(text: str, rng: random.Random, candidates: Iterable[str], n: int = 12) -> list[str]:
    """Up to ``n`` refinements of ``text``: one concept added or swapped for another.

    Each is an edit of the original of the same size as a paraphrase's (the new
    concept's phrase inserted or put in place of an old one, often plus one paraphrase
    edit) or, a third of the time, a fresh rendering, so wording similarity cannot tell
    a refinement from a paraphrase. Returned in a random order; the caller keeps those
    the world rewards.
    """
    cs = concepts_of(text)
    pool = [c for c in candidates if c not in cs]
    rng.shuffle(pool)
    out = []
    for extra in pool[: n * 2]:
        if len(out) >= n:
            break
        segs = segments(text)
        concept_idx = [i for i, (c, _) in enumerate(segs) if c is not None]
        seg = (extra, rng.choice(CONCEPTS[extra]))
        if len(cs) > 1 and rng.random() < 0.4:
            segs[rng.choice(concept_idx)] = seg  # swap one concept for another
        else:
            segs.insert(rng.randrange(len(segs) + 1), seg)
        if rng.random() < 0.6:
            rng.choice(_PARA_EDITS)(segs, rng)
        new = concepts_of(_join(segs))
        cand = _join(segs) if rng.random() < 0.65 else render(new, rng)
        cand = _cased(cand, rng)
        if concepts_of(cand) == new and new != cs and _norm(cand) != _norm(text):
            out.append(cand)
    return out


def jaccard(a: str, b: str) -> float:
    """Token Jaccard similarity of two texts (lower-cased word tokens)."""
    ta, tb = set(tokens(a)), set(tokens(b))
    if not ta and not tb:
        return 1.0
    return len(ta & tb) / len(ta | tb)
