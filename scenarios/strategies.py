"""Hypothesis strategies that generate episodes, for property tests of detectors and scorers.

``episodes()`` draws trees (or chains) of tool calls from a small vocabulary so that
repeats, reorderings and sibling duplicates are common; labels are drawn too when
asked, so the scorer can be tested on arbitrary outcomes.
"""
from __future__ import annotations

from hypothesis import strategies as st

from detectors.protocol import Message, Observation, ToolCall

from sim.tree import Episode, Label, ThinkNode, ToolNode

TOOLS = ("search", "read_file", "http_get", "calc")
_KEYS = ("q", "path", "limit", "url", "opts")

scalars = st.one_of(st.integers(-3, 3), st.sampled_from(["a", "B", " a ", "x y", "é", ""]), st.booleans(), st.none(),
                    st.floats(allow_nan=False, allow_infinity=False, width=32))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                            st.dictionaries(st.sampled_from(_KEYS), inner, max_size=3)),
                           max_leaves=6)
args_strategy = st.dictionaries(st.sampled_from(_KEYS), json_values, max_size=3)
calls = st.builds(lambda t, a: ToolCall(t, a), st.sampled_from(TOOLS), args_strategy)
observations = st.builds(Observation, st.sampled_from(["same", "other", "Error: 401", "x 1", "x 2"]), st.booleans())


@st.composite
def episodes(draw, max_calls: int = 14, branching: bool = True, labelled: bool = False, messages: bool = True) -> Episode:
    """A random episode: each call's parent is a random earlier node (or the previous one for a chain)."""
    n = draw(st.integers(1, max_calls))
    ep = Episode("hyp", family="hypothesis")
    ids: list[str] = []
    for i in range(n):
        parent = None
        if ids:
            parent = ids[draw(st.integers(0, len(ids) - 1))] if branching and draw(st.booleans()) else ids[-1]
        if messages and draw(st.integers(0, 5)) == 0:
            nid = f"m{i}"
            ep.add(ThinkNode(nid, parent, Message("assistant", draw(st.sampled_from(["thinking", "again"])))))
            ids.append(nid)
            parent = nid
        call = draw(calls)
        nid = f"c{i}"
        label = Label(draw(st.booleans()), "stale") if labelled else None
        if label is not None and not label.loop:
            label = Label(False, None)
        ep.add(ToolNode(nid, parent, ToolCall(call.tool, call.args, nid), draw(observations), label))
        ids.append(nid)
    return ep


# -- nasty arguments: what a real harness may hand a guard, for the robustness properties ----------
class Unprintable:
    """An argument value whose ``repr`` and ``str`` raise."""

    def __repr__(self) -> str:
        raise RuntimeError("no repr")

    __str__ = __repr__


def nested(depth: int, leaf: object = "leaf") -> object:
    """``leaf`` inside ``depth`` alternating lists and one-key objects."""
    value = leaf
    for i in range(depth):
        value = {"k": value} if i % 2 else [value]
    return value


#: Built once: deep values and huge texts are too costly to draw afresh.
_BIG = ("x" * 200_000, "word " * 40_000, 10**5000, -(2**200), nested(300), nested(10_000))
nasty_scalars = st.one_of(
    st.text(max_size=20), st.sampled_from(["", "   ", "\ud800 lone", "a\x00b", "日本語 🚀", "/etc/passwd"]),
    st.integers(), st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([-0.0, float("nan"), float("inf")]),
    st.booleans(), st.none(), st.binary(max_size=12), st.builds(Unprintable), st.builds(object),
    st.frozensets(st.integers(-5, 5), max_size=3), st.sets(st.text(max_size=3), max_size=3),
    st.sampled_from(range(len(_BIG))).map(_BIG.__getitem__),  # by index: hypothesis cannot repr them
)
nasty_values = st.recursive(
    nasty_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.text(max_size=4), st.integers(-3, 3)), inner, max_size=3),
    ),
    max_leaves=8,
)
#: Tool arguments: mostly objects, sometimes (as a broken harness sends them) anything at all.
nasty_args = st.one_of(st.dictionaries(st.sampled_from(_KEYS + ("query", "content")), nasty_values, max_size=4),
                       st.dictionaries(st.one_of(st.text(max_size=3), st.integers()), nasty_values, max_size=3),
                       nasty_values)
