"""What a tool result says, read once per distinct text: masked, fingerprinted, tokenised.

``progress_guard`` asks of every result whether it told the agent anything new. Most of
that question depends on the result's text alone (its volatile parts masked, its word
tokens, its listed items, whether it says nothing was found); only the comparison with
what the path has seen is per call. The per-text part is memoised here: results repeat
across the paths of a tree and across episodes (a file read again, a search that differs
only in its request id and duration, both masked before the text is looked up).

The memos are bounded FIFOs keyed by the text and by the masked text, shared by every
detector in the process; each holds only pure functions of its key, so a hit returns
exactly what a fresh analysis would and no verdict depends on what they hold.
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
# (a word character) is consumed; a hex id's digits are ASCII ones, as in ``[0-9a-f]`` (an
# earlier fast pattern took any Unicode digit there). Quantifiers that a match could never need to give back
# (the next token cannot match what they hold) are possessive, so a run of digits that is
# not a duration fails once instead of once per digit. Without ``re.I`` the classes are fast
# ones; the letters' case variants are spelled out, with the non-ASCII characters ``re.I``
# folds onto them (``ſ`` for s, ``İ`` and ``ı`` for i, ``Μ``/``μ`` for µ).
# tests/detectors/test_result_news.py checks the two agree.
_VOLATILE_FAST = re.compile(
    r"\d(?:\d{3}-\d\d-\d\d[Tt ]\d\d:\d\d[\d:.]*+(?:[Zz]|[+-]\d\d:?\d\d)?"
    r"|(?<!\w.)(?:(?<=[0-9])[0-9a-fA-F]{7,}+(?:-[0-9a-fA-F]{4,12}+){0,4}\b"
    r"|\d*+(?:\.\d+)? ?(?:[mM]|[uU]|[µμΜ]|[nN])?[sSſ]\b"
    r"|\d*+(?:\.\d+)? ?[sSſ][eE][cC](?:[sSſ]|[oO][nN][dD][sSſ])?\b))"
    r"|[a-fA-F](?<!\w.)[0-9a-fA-F]{7,}+(?:-[0-9a-fA-F]{4,12}+){0,4}\b"
    r"|[pP](?<!\w.)[iIİı][dD][ =:]\d+"
)
_HEX_ONLY = re.compile(r"[0-9a-fA-F]+")

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
#: Marks a line of text among the tokens a path has seen.
LINE_TAG = "\x01line"
# What a line of a file or a search hit carries before its text: a line-number gutter
# (``nl``/``cat -n`` and an editor's view "  12<tab>", Claude Code's ``Read`` "  12→", a
# SWE-agent 0.x window "12:") or a grep hit's "path:12:".
_GUTTER_START = frozenset(" \t0123456789")
_GUTTER = re.compile(r"^\s*(?:[^\s:]+:)?\d+(?:\t|→|:)")

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


# ASCII characters outside ``[\w.\-/]`` (the ones ``WORDS`` never crosses) mapped to a space.
_ASCII = frozenset(map(chr, range(128)))
_WORD_RUNS = bytes(c if chr(c).isalnum() or chr(c) in "_.-/" else 32 for c in range(128)) + bytes([32] * 128)


def _ascii_stand_in(text: str, sep: str) -> str | None:
    """``text`` with each non-ASCII character replaced by ``sep``, when every one of them is
    a separator to the patterns here (not a letter or digit, so neither ``\\w`` nor ``\\d`` nor
    a letter ``re.I`` folds onto ASCII): then the ASCII paths see the same matches at the
    same places. ``None`` when one is a letter or digit (``é``, ``µ``)."""
    for ch in set(text).difference(_ASCII):
        if ch.isalnum():
            return None
        text = text.replace(ch, sep)
    return text


def words_of(text: str) -> tuple[str, ...]:
    """``WORDS.findall(text)``, without the pattern when it can: a token is a maximal run of
    letters, digits and ``_ . - /`` less the ``_ . - /`` at its ends (the pattern starts and
    ends a token on a letter or digit and takes the longest such span), so for ASCII text (or
    text whose other characters are all separators, such as dashes and curly quotes) a
    translate, a split and a strip give the same tokens several times faster."""
    if not text.isascii():
        plain = _ascii_stand_in(text, " ")
        if plain is None:
            return tuple(WORDS.findall(text))
        text = plain
    runs = text.encode("ascii").translate(_WORD_RUNS).decode("ascii").split()
    return tuple([t for t in [run.strip("_.-/") for run in runs] if t])


def _keep_plain_hex(m: re.Match) -> str:
    t = m.group(0)
    if _HEX_ONLY.fullmatch(t) and (t.isdigit() or t.isalpha()):
        return t  # a plain number or word that happens to be hex-shaped
    return "~"


# For ASCII text, what every match of ``VOLATILE`` needs, tested with ``bytes.translate`` and
# substring searches (C speed, no regex): in ``_DIGIT_CLASSES`` (a digit is ``0``, an ``s`` is
# ``s``, the first letter of a unit ``m``/``u``/``n`` is ``m``) a timestamp holds ``0000-`` and a
# duration ``0s``, ``0 s``, ``0m`` or ``0 m``; in ``_HEX_CLASSES`` a hex id holds eight ``h``; a
# pid holds ``pid``. A text with none of them has nothing to mask.
_DIGIT_CLASSES = bytes((ord("0") if ch.isdigit() else ord("s") if ch in "sS" else ord("m") if ch in "mMuUnN"
                        else ord(ch) if ch in " -\n" else ord(".")) for ch in map(chr, range(256)))
_HEX_CLASSES = bytes(ord("h") if chr(c) in "0123456789abcdefABCDEF" else ord(".") for c in range(256))


def _may_be_volatile(raw: bytes, classes: bytes) -> bool:
    """False when ASCII ``raw`` (with its ``_DIGIT_CLASSES``) certainly has no match of ``VOLATILE``."""
    return (b"0s" in classes or b"0m" in classes or b"0 s" in classes or b"0 m" in classes or b"0000-" in classes
            or b"hhhhhhhh" in raw.translate(_HEX_CLASSES) or b"pid" in raw.lower())


def mask_volatile(text: str) -> str:
    """Durations, timestamps, uuids, pids and hex ids replaced by ``~``: they change on every
    call without telling the agent anything. Plain numbers and words are kept. A text of at
    most 2,000 characters without a digit is kept whole (a hex word without digits is a word)."""
    plain = text if text.isascii() else _ascii_stand_in(text, "\x00")
    if plain is None:  # letters or digits beyond ASCII: the pattern itself
        if len(text) <= 2000 and not any(ch.isdigit() for ch in text):
            return text
        return _VOLATILE_FAST.sub(_keep_plain_hex, text)
    raw = plain.encode("ascii")
    classes = raw.translate(_DIGIT_CLASSES)
    if (b"0" not in classes and len(text) <= 2000) or not _may_be_volatile(raw, classes):
        return text
    if b"\n" not in raw:
        return _VOLATILE_FAST.sub(_keep_plain_hex, text)
    # No match spans a line, and a line's first and last characters meet a newline as they
    # would the text's ends (a non-word character): masking line by line is masking the
    # text, and only the lines that may hold a match go through the pattern. The stand-in
    # has the original's characters at the same places, so its lines are the original's.
    return "\n".join([_VOLATILE_FAST.sub(_keep_plain_hex, line) if _may_be_volatile(line_raw, line_classes) else line
                      for line, line_raw, line_classes in zip(text.split("\n"), raw.split(b"\n"), classes.split(b"\n"))])


def fingerprint(text: str) -> int:
    return xxhash.xxh3_64_intdigest(text.encode("utf-8", "surrogatepass"))


class ResultText:
    """One masked result text, analysed.

    ``tokens``: its word tokens (lower-cased) in order; ``words``: the distinct ones;
    ``numbers``: those of ``words`` that are bare numbers, dates or ranges; ``items``: its
    listed items as ``(ITEM_TAG, normalised text)`` keys; ``not_found``: it opens by saying
    nothing was found; ``fingerprint``: a hash of the masked text.
    """

    __slots__ = ("masked", "fingerprint", "tokens", "words", "numbers", "items", "not_found", "_lines")

    def __init__(self, masked: str):
        self.masked = masked
        self.fingerprint = fingerprint(masked)
        self.tokens: tuple[str, ...] = words_of(masked.lower())
        self.words = frozenset(self.tokens)
        # A number starts with a digit: most words are skipped without the pattern.
        self.numbers = frozenset(t for t in self.words if t[0].isdecimal() and _NUMERIC.fullmatch(t))
        self.items = frozenset((ITEM_TAG, norm_text(body)) for _, body in _ITEM_FAST.findall(masked)) \
            if ("[" in masked or ", " in masked) else frozenset()
        self.not_found = bool(NOT_FOUND.match(masked[:200]))
        self._lines: frozenset | None = None

    @property
    def lines(self) -> frozenset:
        """Its lines of two words or more, as ``(LINE_TAG, text)`` keys: the line without a
        line-number gutter, case-folded, whitespace collapsed (made when first asked for)."""
        if self._lines is None:
            keys = set()
            for line in self.masked.lower().split("\n"):
                if line[:1] in _GUTTER_START or ":" in line[:120]:
                    line = _GUTTER.sub("", line, count=1)
                parts = line.split()
                if len(parts) >= 2:
                    keys.add((LINE_TAG, " ".join(parts)))
            self._lines = frozenset(keys)
        return self._lines


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
    hit = _raw_memo.get(text) if len(text) <= _MEMO_MAX_CHARS else None  # a longer text is never kept
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
