"""The result analysis progress_guard memoises: its fast patterns match what the readable
ones specify, and a remembered analysis (of a result or of a call) is the fresh one."""
import random
import re

import pytest

from detectors import result_news
from detectors.callmemo import ArgsMemo, args_key
from detectors.pathmap import PathCounts
from detectors.progress_guard import ProgressGuard
from detectors.protocol import Observation, ToolCall
from detectors.result_news import ITEM, VOLATILE, ResultText, mask_volatile, read_result, what_is_new

# Characters the patterns care about, with the non-ASCII ones re.I folds onto ASCII letters.
ALPHABET = "0123456789abcdefpidmsunecoTZtz ABCDEFPIDMSUNECO-:.+=_/'\"[], \nſİıµμΜ²٣x"
# ASCII text takes other paths (a translate-and-split tokeniser, a line-by-line mask): also
# tested on its own, with long texts of many lines.
ASCII_ALPHABET = "0123456789abcdefpidmsunecoTZtz ABCDEFPIDMSUNECO-:.+=_/'\"[], \n\n\t\x00\x7f!#x"
# ... and text whose other characters are all separators (dashes, curly quotes, no-break
# and line-separator spaces, a combining mark), which takes the ASCII paths too.
SEPARATED_ALPHABET = ASCII_ALPHABET + "—’“\u00a0\u2028\u0301…"
SAMPLES = [
    "took 171 ms, request 81f7d64c", "2024-05-01T10:20:30.5+02:00 done", "pid=4242 exited after 3.5 secs",
    "id 123e4567-e89b-12d3-a456-426614174000", "deadbeef and deadbeef-cafe", "12 µs 7 μs 3 ſ 4 Seconds",
    "PİD 77", "pıd:9", "abcdef12", "10 results, showing 1-3", "Could not find x. Similar: ['A b', 'C']",
]


def _spec_mask(text: str) -> str:
    def repl(m: re.Match) -> str:
        t = m.group(0)
        return t if re.fullmatch(r"[0-9a-fA-F]+", t) and (t.isdigit() or t.isalpha()) else "~"

    if not any(ch.isdigit() for ch in text[:2000]) and len(text) <= 2000:
        return text
    return VOLATILE.sub(repl, text)


def _random_texts(n: int, seed: int = 7, alphabet: str = ALPHABET):
    rnd = random.Random(seed)
    for i in range(n):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 60)))
        yield text * 50 if i % 200 == 0 else text  # past the 2,000-character shortcut now and then


@pytest.mark.parametrize("text", SAMPLES)
def test_the_fast_mask_is_the_specified_one_on_known_shapes(text):
    assert mask_volatile(text) == _spec_mask(text)


def test_the_fast_mask_is_the_specified_one_on_random_text():
    for text in (list(_random_texts(20_000)) + list(_random_texts(20_000, seed=11, alphabet=ASCII_ALPHABET))
                 + list(_random_texts(20_000, seed=12, alphabet=SEPARATED_ALPHABET))):
        assert mask_volatile(text) == _spec_mask(text), text


def test_items_and_words_are_the_specified_ones():
    words = re.compile(r"[^\W_](?:[\w.\-/]*[^\W_])?")
    for text in (list(_random_texts(5_000, seed=3)) + list(_random_texts(5_000, seed=4, alphabet=ASCII_ALPHABET))
                 + list(_random_texts(5_000, seed=5, alphabet=SEPARATED_ALPHABET)) + SAMPLES):
        r = ResultText(text)
        assert r.tokens == tuple(words.findall(text.lower()))
        assert r.items == {(result_news.ITEM_TAG, result_news.norm_text(m.group(2))) for m in ITEM.finditer(text)}, text


def test_masked_text_and_its_news():
    r = read_result("10 results (took 171 ms, request 81f7d64c): ['Alpha', 'Beta'] 2024")
    assert r.masked == "10 results (took ~, request ~): ['Alpha', 'Beta'] 2024"
    assert r.items == {("\x01item", "alpha"), ("\x01item", "beta")}
    assert "2024" in r.numbers and "alpha" not in r.numbers
    assert read_result("10 results (took 9 ms, request 0a0b0c0d): ['Alpha', 'Beta'] 2024") is r  # one analysis
    seen = PathCounts().with_all(["alpha", "10"])
    fresh, words, new_items, new_tokens = what_is_new(seen, r, frozenset({"2024"}), frozenset({"beta"}))
    # The word "beta" is new; the item Beta is the call's own text, "2024" its own number.
    assert fresh == {"results", "took", "request", "beta", ("\x01item", "alpha")}
    assert "2024" not in words and new_items == 1 and new_tokens == 5
    assert read_result("Nothing found.").not_found


def test_the_result_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(result_news, "_memo", type(result_news._memo)())
    monkeypatch.setattr(result_news, "_raw_memo", type(result_news._raw_memo)())
    for i in range(result_news._MEMO_ENTRIES + 50):
        read_result(f"result {i} took {i} ms")
    assert len(result_news._memo) == len(result_news._raw_memo) == result_news._MEMO_ENTRIES
    long = "x" * (result_news._MEMO_MAX_CHARS + 1)
    read_result(long)
    assert long not in result_news._memo and long not in result_news._raw_memo
    # The same result with another duration is one masked text: one analysis for both.
    assert read_result("result 7 took 3 ms") is read_result("result 7 took 9 ms")
    assert read_result("result 7 took 3 ms").masked == "result 7 took ~"


class Color:
    def __str__(self):
        return "red"


@pytest.mark.parametrize("args", [
    {"x": float("nan")}, {"x": Color()}, {1: "a"}, {"x": 2**70}, {"x": "\ud800"}, {"x": "y" * 5000},
    {"x": type("S", (str,), {})("a")},
])
def test_arguments_json_could_conflate_have_no_key(args):
    assert args_key(args) is None


def test_equal_arguments_share_a_key_in_any_key_order():
    assert args_key({"a": 1, "b": [1, "x"]}) == args_key({"b": (1, "x"), "a": 1})
    assert args_key({"a": 1}) != args_key({"a": 1.0}) != args_key({"a": True})
    assert args_key({"a": None}) != args_key({"a": "null"})


def test_args_memo_computes_each_distinct_call_once_and_forgets_the_oldest():
    seen = []
    memo = ArgsMemo(lambda c: seen.append(c.args) or len(seen), entries=2)
    assert memo(ToolCall("t", {"a": 1})) == memo(ToolCall("t", {"a": 1})) == 1
    assert memo(ToolCall("u", {"a": 1})) == 2  # another tool, another call
    memo(ToolCall("t", {"a": 2}))
    assert memo(ToolCall("t", {"a": 1})) == 4  # forgotten: two entries at most
    assert memo(ToolCall("t", {"a": float("nan")})) == 5 and memo(ToolCall("t", {"a": float("nan")})) == 6


def test_the_guard_decides_the_same_with_its_memos_cold_or_warm():
    """A path replayed by a fresh guard (empty call memo) and by one that has seen every call
    and result before gives the same decisions and scores."""
    steps = [("search", {"query": "q3 revenue"}, "3 results (took 12 ms) [D1] Revenue"),
             ("read_file", {"path": "a.py"}, "x = 1"),
             ("search", {"query": "Q3  revenue"}, "3 results (took 15 ms) [D1] Revenue"),
             ("read_file", {"path": "./a.py"}, "x = 1"),
             ("http_get", {"url": "https://x.test/1"}, "503 unavailable, retry")]

    def replay(guard):
        state, out = guard.start(), []
        for tool, args, result in steps:
            call = ToolCall(tool, dict(args))
            d = guard.check(state, call)
            out.append((d.verdict, d.score, d.reason))
            state = guard.record(state, call, d, Observation(result, error=result.startswith("503")))
        return out

    warm = ProgressGuard(semantic=False)
    first = replay(warm)
    assert replay(warm) == first == replay(ProgressGuard(semantic=False))
    assert any(v.value != "allow" for v, _, _ in first)


def test_lines_are_keyed_without_their_line_number_gutter():
    from detectors.result_news import LINE_TAG, read_result

    def keys(text):
        return {k[1] for k in read_result(text).lines if k[0] == LINE_TAG}

    line = "    if data: body = encode(data)"
    expected = {"if data: body = encode(data)"}
    # nl -ba, an editor's view, Claude Code's Read, grep -n, a SWE-agent 0.x window: one line
    for shown in (f"    12\t{line}", f"    12→{line}", f"12:{line}", f"src/models.py:12:{line}", f"12:{line}"):
        assert keys(shown) == expected, shown
    assert keys("x\n}\n  )\n") == set()  # lines of fewer than two words are no news of their own
    assert keys("Return The Value") == {"return the value"}  # case-folded
    assert keys("a  b\tc") == {"a b c"}  # whitespace collapsed
    assert keys("2024 total 7 files") == {"2024 total 7 files"}  # a number that is no gutter stays
