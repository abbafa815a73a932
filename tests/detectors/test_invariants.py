"""Protocol invariants every built-in detector must keep (SPEC §2), as properties."""
import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from detectors.registry import available, make_detector
from tests.strategies import episodes
from sim.play.openloop import score_episode
from scenarios.tree import Episode, ThinkNode, ToolNode

from detectors.protocol import ToolCall

# The embedding detectors load a model; their invariants are tested with a fake embedder elsewhere.
NAMES = [n for n in available() if not n.startswith("embedding")]


def reorder(value):
    if isinstance(value, dict):
        return {k: reorder(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reorder(v) for v in value]
    return value


def with_args(ep: Episode, f) -> Episode:
    out = Episode(ep.id, ep.family)
    for n in ep.nodes:
        if isinstance(n, ToolNode):
            c = n.call
            out.add(ToolNode(n.id, n.parent, ToolCall(c.tool, f(c.args), c.call_id), n.observation, n.label))
        else:
            out.add(ThinkNode(n.id, n.parent, n.message))
    return out


@pytest.mark.parametrize("name", NAMES)
@given(ep=episodes())
def test_key_order_never_changes_a_score(name, ep):
    det = make_detector(name)
    a = [(s.score, s.verdict) for s in score_episode(det, ep)]
    b = [(s.score, s.verdict) for s in score_episode(make_detector(name), with_args(ep, reorder))]
    assert a == b


@pytest.mark.parametrize("name", NAMES)
@given(ep=episodes(), cut=st.integers(0, 20))
def test_no_look_ahead(name, ep, cut):
    """A call's score never changes when later calls arrive."""
    det = make_detector(name)
    full = score_episode(det, ep)
    prefix = Episode(ep.id, ep.family, nodes=ep.nodes[:cut])
    part = score_episode(make_detector(name), prefix)
    assert [(s.node_id, s.score, s.verdict) for s in part] == [(s.node_id, s.score, s.verdict) for s in full[: len(part)]]


@pytest.mark.parametrize("name", NAMES)
@given(ep=episodes())
def test_check_and_record_never_mutate_the_state(name, ep):
    det = make_detector(name)
    state = det.start()
    for n in ep.nodes:
        if not isinstance(n, ToolNode):
            continue
        before = copy.deepcopy(state)
        d = det.check(state, n.call)
        assert state == before
        new = det.record(state, n.call, d, n.observation)
        assert state == before
        state = new


@pytest.mark.parametrize("name", [n for n in NAMES if make_detector(n).scope == "path"])
@given(ep=episodes(branching=False), extra=episodes(branching=False))
def test_sibling_branches_are_independent(name, ep, extra):
    """Grafting a sibling branch under the root never changes the scores of the original path."""
    base = score_episode(make_detector(name), ep)
    grafted = Episode(ep.id, ep.family, nodes=list(ep.nodes))
    first = ep.nodes[0].id
    for n in extra.nodes:
        parent = ep.nodes[0].parent if n.parent is None else f"x{n.parent}"
        node = copy.copy(n)
        node.id, node.parent = f"x{n.id}", parent
        grafted.add(node)
    scores = {s.node_id: (s.score, s.verdict) for s in score_episode(make_detector(name), grafted)}
    assert first in {n.id for n in ep.nodes}
    assert [(s.score, s.verdict) for s in base] == [scores[s.node_id] for s in base]


@pytest.mark.parametrize("name", NAMES)
def test_clone_rebuilds_from_params(name):
    det = make_detector(name)
    twin = det.clone()
    assert type(twin) is type(det) and twin.get_params() == det.get_params()
