"""Fuzzing the trace reader and the importers: random bytes and random records, only clean problems.

Whatever the input, reading it returns episodes and one-line problems naming the file and
line; nothing raises, and every episode read is scoreable.
"""
import json
import os
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from detectors.exact import ExactDetector
from scenarios.importers import FORMATS, import_file
from sim.play.openloop import score_episode
from scenarios.trace import KINDS, loads_trace

FUZZ = settings(max_examples=100, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FIELDS = ("episode", "kind", "tool", "args", "call_id", "node", "parent", "content", "error", "label", "cost", "role",
          "plan", "step", "turn", "seed", "meta", "family", "message", "nudge")
scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.integers(), st.floats(allow_nan=False),
                    st.text(max_size=8), st.sampled_from(["e", "f", "c0", "n0", "n1", "search", "assistant"]),
                    st.sampled_from(KINDS))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.sampled_from(FIELDS), inner, max_size=3)),
                      max_leaves=10)
records = st.one_of(
    st.fixed_dictionaries({"episode": st.sampled_from(["e", "f"]), "kind": st.sampled_from(KINDS)},
                          optional={k: values for k in FIELDS[2:]}),
    st.dictionaries(st.sampled_from(FIELDS), values, max_size=6),
    values,
)


@st.composite
def trace_bytes(draw) -> bytes:
    """Records as JSON lines, some damaged: cut short, a NaN spliced in, raw garbage, deep nesting."""
    lines = []
    for r in draw(st.lists(records, max_size=12)):
        line = json.dumps(r).encode("utf-8", "surrogatepass")  # big ints and lone surrogates too
        damage = draw(st.integers(0, 9))
        if damage == 0:
            line = line[: draw(st.integers(0, len(line)))]
        elif damage == 1:
            line = line.replace(b"null", b"NaN", 1)
        elif damage == 2:
            line = draw(st.binary(max_size=30))
        elif damage == 3:
            d = draw(st.sampled_from([150, 250, 5000]))
            line = line[:-1] + b',"args":{"x":' + b"[" * d + b"]" * d + b"}}" if line.startswith(b"{") else line
        lines.append(line)
    return b"\n".join(lines) + draw(st.sampled_from([b"", b"\n", b"\r\n"]))


def _clean(problems, name):
    for p in problems:
        assert "\n" not in p and len(p) < 500, p
        assert p.startswith(f"{name}:"), p


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes_never_crash_the_reader(data):
    res = loads_trace(data, name="fuzz.jsonl")
    _clean(res.problems, "fuzz.jsonl")


@FUZZ
@given(trace_bytes())
def test_random_records_give_clean_problems_and_scoreable_episodes(data):
    res = loads_trace(data, name="fuzz.jsonl")
    _clean(res.problems, "fuzz.jsonl")
    assert res.skipped <= res.records + 1  # each skipped record is counted once (+1: an empty file)
    for ep in res.episodes:
        score_episode(ExactDetector(), ep)  # a DetectorFailure here means the reader built a broken tree


@FUZZ
@given(st.sampled_from(sorted(FORMATS)), st.one_of(st.binary(max_size=300), trace_bytes(),
                                                   st.lists(records, max_size=3).map(lambda r: json.dumps(r).encode())))
def test_random_input_never_crashes_an_importer(fmt, data):
    fd, path = tempfile.mkstemp(suffix=".json")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        episodes, problems = import_file(fmt, path)
        _clean(problems, path)
        for ep in episodes:
            score_episode(ExactDetector(), ep)
    finally:
        os.unlink(path)
