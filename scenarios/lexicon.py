"""The vocabulary the world and the agents share: concepts and their surface forms.

A search query means a *set of concepts*. The world's search engine maps text back to
concepts through this lexicon, so a paraphrase (other synonyms, other word order, added
filler, other casing or number format) retrieves exactly what the original did, and a
refinement (one concept more or different) retrieves something else. That is what
lets labels follow from the world rather than from the wording of a call.
"""
from __future__ import annotations

import re
from functools import lru_cache

# concept -> surface forms (first is canonical). Multi-word forms are matched as phrases.
CONCEPTS: dict[str, tuple[str, ...]] = {
    # periods
    "q1": ("q1", "first quarter", "first-quarter", "1st quarter", "jan-mar"),
    "q2": ("q2", "second quarter", "second-quarter", "2nd quarter", "apr-jun"),
    "q3": ("q3", "third quarter", "third-quarter", "3rd quarter", "jul-sep"),
    "q4": ("q4", "fourth quarter", "fourth-quarter", "4th quarter", "oct-dec"),
    "y2023": ("2023", "fy2023", "fy23", "fiscal 2023", "year 2023"),
    "y2024": ("2024", "fy2024", "fy24", "fiscal 2024", "year 2024"),
    # finance
    "revenue": ("revenue", "sales", "turnover", "top line", "income from sales"),
    "margin": ("margin", "gross margin", "profitability", "markup"),
    "costs": ("costs", "expenses", "spending", "expenditure", "outlays"),
    "forecast": ("forecast", "projection", "outlook", "guidance", "prediction"),
    "headcount": ("headcount", "staff numbers", "number of employees", "workforce size"),
    # regions
    "emea": ("emea", "europe", "european region", "europe and middle east"),
    "apac": ("apac", "asia pacific", "asia-pacific", "asian markets"),
    "americas": ("americas", "north america", "us and canada", "american region"),
    # products
    "widget": ("widget", "widgets", "widget line", "widget product"),
    "gadget": ("gadget", "gadgets", "gadget line", "gadget product"),
    "cloud": ("cloud", "cloud service", "hosted platform", "saas offering"),
    # engineering
    "login": ("login", "sign-in", "sign in", "authentication", "logon"),
    "timeout": ("timeout", "time-out", "timed out", "request timeout"),
    "database": ("database", "db", "datastore", "sql store"),
    "cache": ("cache", "caching layer", "memo store", "cache layer"),
    "latency": ("latency", "response time", "slowness", "lag"),
    "crash": ("crash", "segfault", "hard failure", "abort"),
    "memory": ("memory", "ram", "heap", "memory usage"),
    "deploy": ("deploy", "deployment", "rollout", "release"),
    "config": ("config", "configuration", "settings", "options file"),
    "migration": ("migration", "schema change", "data migration", "migrating"),
    "api": ("api", "endpoint", "rest interface", "web api"),
    "test": ("test", "tests", "test suite", "unit tests"),
    "bug": ("bug", "defect", "issue", "regression"),
    # topics
    "policy": ("policy", "rules", "guidelines", "regulation"),
    "refund": ("refund", "reimbursement", "money back", "repayment"),
    "shipping": ("shipping", "delivery", "dispatch", "freight"),
    "pricing": ("pricing", "prices", "price list", "rates"),
    "security": ("security", "vulnerability", "exploit", "cve"),
    "backup": ("backup", "backups", "snapshot", "restore point"),
    "onboarding": ("onboarding", "new hire setup", "induction", "orientation"),
    "benchmark": ("benchmark", "performance test", "perf numbers", "speed test"),
    "energy": ("energy", "power use", "electricity", "power consumption"),
    "climate": ("climate", "emissions", "carbon footprint", "co2 output"),
}

#: Words that carry no concept: added or dropped freely by paraphrases.
FILLER: tuple[str, ...] = (
    "the", "for", "of", "about", "on", "in", "a", "an", "and", "please", "info", "information",
    "details", "figures", "numbers", "data", "report", "summary", "latest", "current", "overview",
    "find", "show", "me", "what", "is", "are", "our", "look", "up", "get", "give", "with", "to",
)

_TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def _phrase_index() -> dict[str, list[tuple[tuple[str, ...], str]]]:
    # First token -> (phrase, concept), longest phrase first, so matching is one dict
    # lookup per token instead of a scan over every surface form.
    index: dict[str, list[tuple[tuple[str, ...], str]]] = {}
    for concept, forms in CONCEPTS.items():
        for form in forms:
            words = tuple(_TOKEN.findall(form.lower()))
            index.setdefault(words[0], []).append((words, concept))
    for entries in index.values():
        entries.sort(key=lambda e: -len(e[0]))
    return index


_INDEX = _phrase_index()


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


@lru_cache(maxsize=65536)
def concepts_of(text: str) -> frozenset[str]:
    """The concepts a piece of text names (longest phrase first; filler ignored)."""
    toks = tokens(text)
    found: set[str] = set()
    i, n = 0, len(toks)
    while i < n:
        for phrase, concept in _INDEX.get(toks[i], ()):
            k = len(phrase)
            if tuple(toks[i:i + k]) == phrase:
                found.add(concept)
                i += k
                break
        else:
            i += 1
    return frozenset(found)


def canonical_query(concepts: frozenset[str] | set[str]) -> str:
    return " ".join(CONCEPTS[c][0] for c in sorted(concepts))
