"""Every registered detector survives any argument (hypothesis): empty, huge, unicode, float,
nested 10,000 deep, list-valued, non-JSON (sets, bytes, objects, an object whose repr raises),
NaN, ±inf, -0.0, integers past ``int``'s digit limit — and so do the signature helpers.

The embedding detectors run with the bag-of-words ``HashingEncoder``: the property is about
the code around the model, and the real one would make the test minutes long.
"""
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detectors.embedding_model import Embedder, HashingEncoder
from detectors.protocol import Observation, ToolCall, Verdict
from detectors.registry import available, make_detector
from detectors.signature import args_text, canonical_json, exact_key, normalized_key, normalized_signature, ordered_json
from tests.strategies import nasty_args, nasty_values, nested
from sim.play.openloop import score_episode
from scenarios.tree import Episode, ToolNode

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def build(name: str):
    if name.startswith("embedding"):
        return make_detector(name, embedder=Embedder(encode=HashingEncoder(), model_name="fake-bow"))
    return make_detector(name)


def chain(calls) -> Episode:
    ep = Episode("nasty")
    parent = None
    for i, (tool, args) in enumerate(calls):
        ep.add(ToolNode(f"c{i}", parent, ToolCall(tool, args, f"c{i}"), Observation("same result")))
        parent = f"c{i}"
    return ep


@pytest.mark.parametrize("name", available())
def test_no_detector_crashes_on_nasty_arguments(name):
    det = build(name)

    @SETTINGS
    @given(st.lists(st.tuples(st.sampled_from(["search", "read_file"]), nasty_args), min_size=1, max_size=5),
           st.booleans())
    def prop(calls, repeat):
        if repeat:  # repeats are where the signature paths are exercised hardest
            calls = calls + calls
        scores = score_episode(det, chain(calls))  # raises DetectorFailure on any crash or garbage
        assert len(scores) == len(calls)
        assert all(math.isfinite(s.score) and isinstance(s.verdict, Verdict) for s in scores)

    prop()


@pytest.mark.parametrize("name", available())
def test_ten_thousand_levels_deep_in_every_detector(name):
    deep = {"q": nested(10_000), "path": nested(10_000, leaf=1)}
    scores = score_episode(build(name), chain([("search", deep), ("search", deep), ("search", deep)]))
    assert len(scores) == 3


@SETTINGS
@given(nasty_args)
def test_signature_helpers_take_any_value(args):
    for blob in (canonical_json(args), ordered_json(args)):
        assert isinstance(blob, bytes)
    assert canonical_json(args) == canonical_json(args)  # deterministic, even for NaN and objects
    hash(exact_key("t", args))
    hash(normalized_key("t", args))
    assert normalized_signature("t", args).startswith("t::")
    assert isinstance(args_text(args), str)


def test_the_documented_rules_for_odd_values():
    # NaN and infinities are null; bytes are their UTF-8 text; sets are sorted by repr;
    # an unprintable object is named by its type; too deep is cut at 200 levels.
    from tests.strategies import Unprintable

    assert canonical_json({"b": float("nan"), "a": float("-inf")}) == b'{"a":null,"b":null}'
    assert canonical_json({"x": b"\xffab"}) == '{"x":"\ufffdab"}'.encode()
    assert canonical_json({"s": {3, 1, 2}}) == b'{"s":["1","2","3"]}'
    assert canonical_json({"o": Unprintable()}) == b'{"o":"<tests.strategies.Unprintable>"}'
    assert canonical_json(10**5000).startswith(b'"0x')
    assert b"<too deep>" in canonical_json(nested(10_000))
    assert canonical_json({"x": -0.0}) == b'{"x":-0.0}'
