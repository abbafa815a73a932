"""Text variation: paraphrases, cosmetic variants and refinements of search queries.

Paraphrases keep a query's concept set (other synonyms, word order, filler, casing,
number format); refinements change it while reading just as close, and are accepted
only when the world says they retrieve something new.
"""
from __future__ import annotations

import random
from typing import Iterable

from .lexicon import CONCEPTS, FILLER, concepts_of

_TEMPLATES = (
    "{a}",
    "{a} {f}",
    "{f} {a}",
    "{f} {a} {f2}",
    "{a} {f} {f2}",
)


def render(concepts: Iterable[str], rng: random.Random, filler: bool = True) -> str:
    """One surface form of a concept set: random synonyms, order and filler words."""
    cs = sorted(concepts)  # a set's order depends on PYTHONHASHSEED; sort before the seeded shuffle
    rng.shuffle(cs)
    words = [rng.choice(CONCEPTS[c]) for c in cs]
    core = f" {rng.choice(('', 'for', 'in', 'of', 'and'))} ".join(words).replace("  ", " ")
    if not filler:
        return core
    tmpl = rng.choice(_TEMPLATES)
    return tmpl.format(a=core, f=rng.choice(FILLER), f2=rng.choice(FILLER)).strip()


def paraphrase(text: str, rng: random.Random, avoid: Iterable[str] = (), tries: int = 30) -> str:
    """A rewording with the same concepts, different from every string in ``avoid``."""
    cs = concepts_of(text)
    seen = {a.strip().lower() for a in avoid} | {text.strip().lower()}
    out = text
    for _ in range(tries):
        out = render(cs, rng)
        if rng.random() < 0.3:
            out = out.capitalize() if rng.random() < 0.5 else out.title()
        if out.strip().lower() not in seen and concepts_of(out) == cs:
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


def refine(text: str, rng: random.Random, candidates: Iterable[str]) -> list[str]:
    """Refinements of ``text``: one concept added or swapped, rendered like a paraphrase.

    Returns candidates in a random order; the caller keeps those the world rewards.
    """
    cs = set(concepts_of(text))
    pool = [c for c in candidates if c not in cs]
    rng.shuffle(pool)
    out = []
    for extra in pool[:12]:
        if len(cs) > 1 and rng.random() < 0.4:
            drop = rng.choice(sorted(cs))
            new = (cs - {drop}) | {extra}
        else:
            new = cs | {extra}
        out.append(render(new, rng))
    return out
