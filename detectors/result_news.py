"""What a tool result says, read once per distinct text: masked, fingerprinted, tokenised.

``progress_guard`` asks of every result whether it told the agent anything new. Most of
that question depends on the result's text alone (its volatile parts masked, its word
tokens, its listed items, whether it says nothing was found); only the comparison with
what the path has seen is per call. The per-text part is memoised here: results repeat
across the paths of a tree and across episodes (a file read again, a search that differs
only in its request id and duration, both masked before the text is looked up).

The memos are bounded FIFOs keyed by the text and by the masked text, shared by every
detector in the process; it holds only pure functions of its key, so a hit returns exactly what a fresh
analysis would and no verdict depends on what it holds.
"""
from __future__ import annotations

import re
import unicodedata
from collections import OrderedDict

import xxhash

from .pathmap import PathCounts

# What the volatile mask matches (the specification; ``_VOLATILE_FAST`` below is the
# same pattern arranged for speed). Case-insensitive.
VOLATILE = re.compile(
    r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d[\d:.]*(?:Z|[+-]\d\d:?\d\d)?"  # timestamps
    r"|\b[0-9a-f]{8,}(?:-[0-9a-f]{4,12}){0,4}\b"  # hex ids and uuids
    r"|\b\d+(?:\.\d+)? ?(?:ms|us|µs|ns|s|sec|secs|seconds)\b"  # durations
    r"|\bpid[ =:]\d+",
    re.I,
)
# ``VOLATILE``, matching the same spans, about three times as fast. Every match starts with a
# digit, a hex letter or a ``p``, so the pattern is three branches on that first character
# (the regex engine then skips every other character without trying a branch there): a
# hex letter can only open a hex id, a ``p`` only a pid, a digit any of the four others, in
# ``VOLATILE``'s order. ``\b`` before the first character is ``(?<!\w.)`` once that character
# (a word character) is consumed. Quantifiers that a match could never need to give back
# (the next token cannot match what they hold) are possessive, so a run of digits that is
# not a duration fails once instead of once per digit. Without ``re.I`` the classes are fast
# ones; the letters' case variants are spelled out, with the non-ASCII characters ``re.I``
# folds onto them (``ſ`` for s, ``İ`` and ``ı`` for i, ``Μ``/``μ`` for µ).
# tests/detectors/test_result_news.py checks the two agree.
_VOLATILE_FAST = re.compile(
    r"\d(?:\d{3}-\d\d-\d\d[Tt ]\d\d:\d\d[\d:.]*+(?:[Zz]|[+-]\d\d:?\d\d)?"
    r"|(?<!\w.)(?:[\da-fA-F]{7,}+(?:-[\da-fA-F]{4,12}+){0,4}\b"
    r"|\d*+(?:\.\d+)? ?(?:[mM]|[uU]|[µμΜ]|[nN])?[sSſ]\b"
    r"|\d*+(?:\.\d+)? ?[sSſ][eE][cC](?:[sSſ]|[oO][nN][dD][sSſ])?\b))"
    r"|[a-fA-F](?<!\w.)[\da-fA-F]{7,}+(?:-[\da-fA-F]{4,12}+){0,4}\b"
    r"|[pP](?<!\w.)[iIİı][dD][ =:]\d+"
)
_HEX_ONLY = re.compile(r"[0-9a-fA-F]+")
_ASCII_DIGIT = re.compile(r"[0-9]")  # str.isdigit() on ASCII text

# A token keeps its inner punctuation, so file names, dates and decimals stay distinct
# ("api_tests.py" is not "api" + "tests" + "py").
WORDS = re.compile(r"[^\W_](?:[\w.\-/]*[^\W_])?")
# Items of a listed result (``Similar: ['A', 'B']``, a JSON array of names): a new item is
# news even when each of its words has been seen ("The Shallows" after "The Shallows (book)").
ITEM = re.compile(r"""(?:(?<=\[)|(?<=, ))(['"])([^'"\n]{1,150}?)\1(?=\s*[,\]])""")
# ``ITEM`` with the "[" or ", " before the quote consumed instead of looked behind at, so
# the engine skips to those characters; the matches are the same (the characters before
# an item's quote never belong to the item before it, which ends with its quote).
_ITEM_FAST = re.compile(r"""(?:\[|, )(['"])([^'"\n]{1,150}?)\1(?=\s*[,\]])""")
# A result that says nothing was found tells only what its listed items add.
NOT_FOUND = re.compile(r"\s*(no results?\b|not found\b|could not find\b|couldn't find\b|nothing (was )?found\b"
                       r"|no (matches|match|entries|items|records)\b|0 results\b|\[\]\s*$|none\s*$|null\s*$)", re.I)
_NUMERIC = re.compile(r"[\d.\-/]+")
_SPACE = re.compile(r"\s+")

#: Marks a listed item among the tokens a path has seen.
ITEM_TAG = "\x01item"

_MEMO_ENTRIES = 2048  # distinct masked texts remembered (FIFO)
_MEMO_MAX_CHARS = 4096  # longer texts are analysed afresh each time, not kept


def norm_text(text: str) -> str:
    """Text NFKC-case-folded with whitespace collapsed; a path or URL without ``./``,
    doubled or trailing slashes."""
    if text.isascii():
        text = " ".join(text.lower().split())  # the common case, without unicode tables
    else:
        text = _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()
    if "/" in text and " " not in text:  # a path or URL
        while text.startswith("./"):
            text = text[2:]
        while "//" in text.replace("://", ""):
            text = text.replace("://", "\x00").replace("//", "/").replace("\x00", "://")
        text = text.rstrip("/") or "/"
    return text


def _keep_plain_hex(m: re.Match) -> str:
    t = m.group(0)
    if _HEX_ONLY.fullmatch(t) and (t.isdigit() or t.isalpha()):
        return t  # a plain number or word that happens to be hex-shaped
    return "~"


def mask_volatile(text: str) -> str:
    """Durations, timestamps, uuids, pids and hex ids replaced by ``~``: they change on every
    call without telling the agent anything. Plain numbers and words are kept."""
    if len(text) <= 2000 and not (_ASCII_DIGIT.search(text) if text.isascii() else any(ch.isdigit() for ch in text)):
        return text  # nothing volatile without digits
    return _VOLATILE_FAST.sub(_keep_plain_hex, text)


def fingerprint(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))


class ResultText:
    """One masked result text, analysed.

    ``tokens``: its word tokens (lower-cased) in order; ``words``: the distinct ones;
    ``numbers``: those of ``words`` that are bare numbers, dates or ranges; ``items``: its
    listed items as ``(ITEM_TAG, normalised text)`` keys; ``not_found``: it opens by saying
    nothing was found; ``fingerprint``: a hash of the masked text.
    """

    __slots__ = ("masked", "fingerprint", "tokens", "words", "numbers", "items", "not_found")

    def __init__(self, masked: str):
        self.masked = masked
        self.fingerprint = fingerprint(masked)
        self.tokens: tuple[str, ...] = tuple(WORDS.findall(masked.lower()))
        self.words = frozenset(self.tokens)
        self.numbers = frozenset(t for t in self.words if _NUMERIC.fullmatch(t))
        self.items = frozenset((ITEM_TAG, norm_text(body)) for _, body in _ITEM_FAST.findall(masked)) \
            if ("[" in masked or ", " in masked) else frozenset()
        self.not_found = bool(NOT_FOUND.match(masked[:200]))


_memo: OrderedDict[str, ResultText] = OrderedDict()  # by masked text
# By the text as it came: an exact repeat (a loop's own result, most often) skips the mask too.
_raw_memo: OrderedDict[str, ResultText] = OrderedDict()


def _remember(memo: OrderedDict, key: str, value: ResultText) -> None:
    if len(key) <= _MEMO_MAX_CHARS:
        if len(memo) >= _MEMO_ENTRIES:
            memo.popitem(last=False)  # the oldest entry
        memo[key] = value


def read_result(text: str) -> ResultText:
    """``text`` (a tool's result) masked and analysed; memoised by the text and by the masked text."""
    hit = _raw_memo.get(text)
    if hit is not None:
        return hit
    masked = mask_volatile(text)
    out = _memo.get(masked)
    if out is None:
        out = ResultText(masked)
        _remember(_memo, masked, out)
    _remember(_raw_memo, text, out)
    return out


def what_is_new(seen: PathCounts, news: ResultText, echoes: frozenset, echoed_texts: frozenset
                ) -> tuple[set, frozenset, int, int]:
    """What ``news`` adds to the keys a path has ``seen``, leaving out what the call itself
    said: the numbers in ``echoes`` and the listed items among ``echoed_texts``.

    Returns ``(fresh, words, new_items, new_tokens)``: the keys not seen before (a new set),
    the result's distinct words less the echoes, how many of the fresh keys are items, and
    how many are items or words other than bare numbers (new counters in a long output are
    not news).
    """
    words = news.words - echoes if echoes else news.words
    items = news.items
    if items and echoed_texts:
        items = frozenset(i for i in items if i[1] not in echoed_texts)
    fresh = seen.missing(words | items if items else words)
    new_items = len(fresh.intersection(items)) if items else 0
    new_tokens = len(fresh) - len(fresh.intersection(news.numbers)) if news.numbers else len(fresh)
    return fresh, words, new_items, new_tokens
