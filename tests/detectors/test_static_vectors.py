"""Static word-piece vectors (``detectors.static_vectors``) and progress_guard on them."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.progress_guard import ProgressGuard
from detectors.protocol import Observation, ToolCall, Verdict, prefetches
from detectors.registry import make_detector
from detectors.static_vectors import StaticEncoder

pytest.importorskip("tokenizers")

ENCODER = StaticEncoder()

# Agent-like text: words, numbers, punctuation, paths, line breaks; and some beyond ASCII.
_TEXT = st.text(alphabet=st.sampled_from(list("abcXYZ019 .,:;!?'\"()[]{}/_-+=*#@$%&|<>~`^\\\t\n\r") + ["é", "ß", "中", "\x0b", "ﬁ"]),
                max_size=80)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_the_word_pieces_are_the_tokenizers(text):
    tokenizer = ENCODER.load()[1]
    assert ENCODER.ids([text]) == [tokenizer.encode(text, add_special_tokens=False).ids]


def test_a_vector_is_the_centred_mean_of_its_pieces_and_does_not_depend_on_its_batch():
    table = ENCODER.load()[0]
    texts = ["Q3 revenue, Europe", "read_file(path='src/app.py')", "", "   "]
    batch = ENCODER(texts)
    for text, row in zip(texts, batch):
        assert np.array_equal(ENCODER([text])[0], row)  # bit for bit: no batch effect
    ids = ENCODER.ids(["Q3 revenue, Europe"])[0]
    assert np.array_equal(batch[0], table[ids].mean(axis=0))
    assert not batch[2].any() and not batch[3].any()  # no word piece: a zero row
    assert abs(float(table.mean(axis=0).mean())) < 1e-6  # the table is centred


def test_rewordings_are_closer_than_other_requests():
    from detectors.embedding_model import normalise

    a, b, c = normalise(ENCODER(["q3 revenue in europe", "europe revenue for q3", "weather forecast for tomorrow"]))
    assert float(a @ b) > 0.8 > float(a @ c)


def _rewording_run(guard):
    state = guard.start()
    decisions = []
    for query, result in (("q3 revenue europe figures", "[D1] Revenue Q3 Europe: 4.1M"),
                          ("some other question entirely", "[D2] Something else"),
                          ("q3 revenue europe figures please", "[D1] Revenue Q3 Europe: 4.1M"),
                          ("figures for q3 revenue in europe", None)):
        call = ToolCall("search", {"query": query})
        decision = guard.check(state, call)
        decisions.append(decision)
        if result is not None:
            state = guard.record(state, call, decision, Observation(result))
    return decisions


def test_progress_guard_on_static_vectors_flags_a_rewording_that_returned_nothing_new(monkeypatch):
    # A cold process-wide static embedder: another test in this worker (docs/detectors.md's
    # example asks the same questions) would otherwise have cached these texts already.
    monkeypatch.setattr("detectors.static_vectors._SHARED", None)
    guard = ProgressGuard(semantic_vectors="static")
    decisions = _rewording_run(guard)
    assert [d.verdict for d in decisions[:3]] == [Verdict.ALLOW] * 3
    assert decisions[3].verdict is Verdict.NUDGE
    assert decisions[3].events[0][1]["layer"] == "semantic"
    # Counted as the model's encodings are: texts encoded, lookups and hits.
    assert guard.model_calls >= 3 and 0 < guard.cache_hits < guard.cache_lookups
    assert guard.semantic_checks >= 2


def test_on_static_vectors_the_guard_is_no_model_backed_detector():
    static = make_detector("progress_guard", semantic_vectors="static")
    assert not static.wants_prefetch and not prefetches(static)
    assert static.prefetch([ToolCall("search", {"query": "q3 revenue europe"})]) == 0
    assert prefetches(make_detector("progress_guard"))
    assert not prefetches(make_detector("progress_guard", semantic=False))


def test_a_clone_onto_other_vectors_does_not_keep_the_embedder():
    from detectors.embedding_model import Embedder, HashingEncoder

    fake = Embedder(encode=HashingEncoder(), model_name="fake")
    guard = ProgressGuard(embedder=fake)
    assert guard.clone(patience=4).embedder is fake
    assert guard.clone(semantic_vectors="static").embedder is None


def test_an_unknown_kind_of_vectors_is_refused():
    from detectors.params import ParamError

    with pytest.raises(ParamError, match="semantic_vectors"):
        make_detector("progress_guard", semantic_vectors="word2vec")


def test_static_vectors_import_no_model_library():
    code = ("import sys\nfrom detectors.progress_guard import ProgressGuard\n"
            "from detectors.protocol import Observation, ToolCall\n"
            "g = ProgressGuard(semantic_vectors='static')\ns = g.start()\n"
            "for q in ('q3 revenue europe', 'europe q3 revenue'):\n"
            "    c = ToolCall('search', {'query': q})\n"
            "    s = g.record(s, c, g.check(s, c), Observation('[D1] the same page'))\n"
            "assert g.model_calls == 2, g.model_calls\n"
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
