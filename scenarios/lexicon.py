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
# Every form names exactly one concept (tests/scenarios/test_text.py checks it), so a
# lookup from wording to meaning is never ambiguous; forms span synonyms, abbreviations,
# number formats ("2024" / "fy24" / "fiscal 2024") and period notations ("q3" / "jul-sep").
CONCEPTS: dict[str, tuple[str, ...]] = {
    # periods
    "q1": ("q1", "first quarter", "first-quarter", "1st quarter", "jan-mar", "january to march", "qtr 1", "quarter one", "1q"),
    "q2": ("q2", "second quarter", "second-quarter", "2nd quarter", "apr-jun", "april to june", "qtr 2", "quarter two", "2q"),
    "q3": ("q3", "third quarter", "third-quarter", "3rd quarter", "jul-sep", "july to september", "qtr 3", "quarter three", "3q"),
    "q4": ("q4", "fourth quarter", "fourth-quarter", "4th quarter", "oct-dec", "october to december", "qtr 4", "quarter four", "4q"),
    "h1": ("h1", "first half", "first-half", "1st half", "jan-jun", "january to june"),
    "h2": ("h2", "second half", "second-half", "2nd half", "jul-dec", "july to december"),
    "y2022": ("2022", "fy2022", "fy22", "fiscal 2022", "year 2022", "fiscal year 2022", "cy2022"),
    "y2023": ("2023", "fy2023", "fy23", "fiscal 2023", "year 2023", "fiscal year 2023", "cy2023"),
    "y2024": ("2024", "fy2024", "fy24", "fiscal 2024", "year 2024", "fiscal year 2024", "cy2024"),
    "y2025": ("2025", "fy2025", "fy25", "fiscal 2025", "year 2025", "fiscal year 2025", "cy2025"),
    # finance
    "revenue": ("revenue", "sales", "turnover", "top line", "income from sales", "revenues", "gross sales"),
    "margin": ("margin", "gross margin", "profitability", "markup", "margins", "profit margin"),
    "costs": ("costs", "expenses", "spending", "expenditure", "outlays", "opex", "cost base"),
    "forecast": ("forecast", "projection", "outlook", "guidance", "prediction", "projections", "estimates"),
    "headcount": ("headcount", "staff numbers", "number of employees", "workforce size", "employee count", "fte count"),
    "churn": ("churn", "attrition", "customer loss", "cancellations", "churn rate"),
    "payroll": ("payroll", "salaries", "wages", "compensation", "pay run"),
    "tax": ("tax", "taxes", "vat", "sales tax", "tax filing"),
    "audit": ("audit", "audit trail", "compliance review", "auditing", "inspection"),
    "budget": ("budget", "budgets", "allocation", "spending plan", "budget plan"),
    "invoice": ("invoice", "invoices", "bill", "billing statement", "receivable"),
    # regions
    "emea": ("emea", "europe", "european region", "europe and middle east", "eu region", "europe-middle east-africa"),
    "apac": ("apac", "asia pacific", "asia-pacific", "asian markets", "asia region", "asia"),
    "americas": ("americas", "north america", "us and canada", "american region", "latam and na", "the us"),
    # products
    "widget": ("widget", "widgets", "widget line", "widget product", "widget range"),
    "gadget": ("gadget", "gadgets", "gadget line", "gadget product", "gadget range"),
    "cloud": ("cloud", "cloud service", "hosted platform", "saas offering", "cloud platform", "saas"),
    "mobile": ("mobile app", "phone app", "ios app", "android app", "mobile client", "smartphone app"),
    "dashboard": ("dashboard", "dashboards", "admin panel", "control panel", "status board"),
    # engineering
    "login": ("login", "sign-in", "sign in", "authentication", "logon", "log-in", "signing in"),
    "timeout": ("timeout", "time-out", "timed out", "request timeout", "timeouts", "deadline exceeded"),
    "database": ("database", "db", "datastore", "sql store", "postgres", "databases"),
    "cache": ("cache", "caching layer", "memo store", "cache layer", "caching", "redis"),
    "latency": ("latency", "response time", "slowness", "lag", "response times", "p99"),
    "crash": ("crash", "segfault", "hard failure", "abort", "crashes", "core dump"),
    "memory": ("memory", "ram", "heap", "memory usage", "memory leak", "oom"),
    "deploy": ("deploy", "deployment", "rollout", "release", "deployments", "shipping a build"),
    "config": ("config", "configuration", "settings", "options file", "yaml config", "configs"),
    "migration": ("migration", "schema change", "data migration", "migrating", "migrations"),
    "api": ("api", "endpoint", "rest interface", "web api", "endpoints", "apis"),
    "test": ("test", "tests", "test suite", "unit tests", "testing", "test run"),
    "bug": ("bug", "defect", "issue", "regression", "bugs", "issues"),
    "container": ("container", "docker", "containers", "docker image", "container image"),
    "kubernetes": ("kubernetes", "k8s", "kube cluster", "pods", "helm chart"),
    "logging": ("logging", "logs", "log files", "log output", "syslog"),
    "monitoring": ("monitoring", "alerting", "alerts", "observability", "health checks"),
    "outage": ("outage", "incident", "downtime", "service disruption", "incidents", "postmortem"),
    "dns": ("dns", "name resolution", "domain records", "nameserver", "dns records"),
    "certificate": ("certificate", "tls cert", "ssl certificate", "certs", "x509"),
    "queue": ("queue", "message queue", "job queue", "kafka", "backlog of jobs"),
    "permissions": ("permissions", "access control", "acl", "rbac", "user roles"),
    "encryption": ("encryption", "encrypting", "at-rest encryption", "cipher", "key management"),
    "password": ("password reset", "forgotten password", "reset password", "credential reset", "password recovery"),
    "ratelimit": ("rate limit", "rate limiting", "throttling", "quota", "429 errors"),
    # topics
    "policy": ("policy", "rules", "guidelines", "regulation", "policies", "terms"),
    "refund": ("refund", "reimbursement", "money back", "repayment", "refunds", "chargeback"),
    "shipping": ("shipping", "delivery", "dispatch", "freight", "shipment", "deliveries"),
    "pricing": ("pricing", "prices", "price list", "rates", "price points", "tariff"),
    "security": ("security", "vulnerability", "exploit", "cve", "vulnerabilities", "security hole"),
    "backup": ("backup", "backups", "snapshot", "restore point", "snapshots", "disaster recovery"),
    "onboarding": ("onboarding", "new hire setup", "induction", "orientation", "first-day setup"),
    "benchmark": ("benchmark", "performance test", "perf numbers", "speed test", "benchmarks", "load test"),
    "energy": ("energy", "power use", "electricity", "power consumption", "energy usage"),
    "climate": ("climate", "emissions", "carbon footprint", "co2 output", "greenhouse gases", "net zero"),
    "customers": ("customers", "clients", "customer base", "accounts", "user base"),
    "marketing": ("marketing", "campaign", "campaigns", "advertising", "promotion"),
    "inventory": ("inventory", "stock levels", "warehouse stock", "stockpile", "on-hand units"),
    "supplier": ("supplier", "vendor", "suppliers", "vendors", "supply partner"),
    "contract": ("contract", "agreement", "contracts", "msa", "service agreement"),
    "hiring": ("hiring", "recruiting", "recruitment", "job openings", "open roles"),
    "training": ("training", "courses", "workshops", "learning program", "upskilling"),
    "survey": ("survey", "questionnaire", "poll results", "feedback form", "nps"),
}

#: Words that carry no concept: added or dropped freely by paraphrases.
FILLER: tuple[str, ...] = (
    "the", "for", "of", "about", "on", "in", "a", "an", "and", "please", "info", "information",
    "details", "figures", "numbers", "data", "report", "summary", "latest", "current", "overview",
    "find", "show", "me", "what", "is", "are", "our", "look", "up", "get", "give", "with", "to",
    "all", "any", "breakdown", "stats", "statistics", "notes", "docs", "documents", "records",
    "trend", "trends", "analysis", "status", "update", "recent", "total", "overall", "key", "main",
    "can", "you", "i", "need", "want", "check", "search", "lookup", "pull", "fetch", "list", "by",
    "regarding", "re", "vs", "compare", "related", "exact", "official", "internal", "full",
)

_PHRASES: dict[str, list[tuple[tuple[str, ...], str]]] = {}
for _concept, _forms in CONCEPTS.items():
    for _form in _forms:
        _words = tuple(_form.split())
        _PHRASES.setdefault(_words[0], []).append((_words, _concept))
for _cands in _PHRASES.values():
    _cands.sort(key=lambda p: -len(p[0]))  # longest phrase first
_TOKEN = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def segments(text: str) -> list[tuple[str | None, str]]:
    """Split text into ``(concept, phrase)`` segments; filler words get concept ``None``.

    Phrases are matched longest first, so "fiscal year 2024" is one segment.
    """
    toks = tokens(text)
    out: list[tuple[str | None, str]] = []
    i, n = 0, len(toks)
    while i < n:
        for phrase, concept in _PHRASES.get(toks[i], ()):
            k = len(phrase)
            if tuple(toks[i:i + k]) == phrase:
                out.append((concept, " ".join(phrase)))
                i += k
                break
        else:
            out.append((None, toks[i]))
            i += 1
    return out


@lru_cache(maxsize=1 << 16)
def concepts_of(text: str) -> frozenset[str]:
    """The concepts a piece of text names (longest phrase first; filler ignored)."""
    return frozenset(c for c, _ in segments(text) if c is not None)


def canonical_query(concepts: frozenset[str] | set[str]) -> str:
    return " ".join(CONCEPTS[c][0] for c in sorted(concepts))


def surface_forms() -> list[tuple[str, str]]:
    """Every (surface form, concept) pair of the lexicon."""
    return [(form, c) for c, forms in CONCEPTS.items() for form in forms]
