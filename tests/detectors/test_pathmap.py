"""The persistent path counter: a dict to its users, shared structure underneath."""
from hypothesis import given
from hypothesis import strategies as st

from detectors.pathmap import EMPTY, PathCounts


@given(keys=st.lists(st.integers(0, 120), max_size=400), fork=st.integers(0, 400))
def test_behaves_like_copying_a_dict_and_never_changes_a_parent(keys, fork):
    states, shadow = [EMPTY], [{}]
    for k in keys:
        states.append(states[-1].incremented(k))
        d = dict(shadow[-1])
        d[k] = d.get(k, 0) + 1
        shadow.append(d)
    for s, d in zip(states, shadow):
        assert dict(s) == d and len(s) == len(d)
        assert all(s.get(k, 0) == d.get(k, 0) for k in range(121))
    # A sibling branch from any earlier state leaves everything else as it was.
    i = fork % len(states)
    sibling = states[i].incremented("other")
    assert sibling["other"] == 1 and "other" not in states[i]
    assert [dict(s) for s in states] == shadow


def test_extension_copies_a_bounded_top_layer():
    s = EMPTY
    for k in range(5000):
        s = s.incremented(k)
    assert len(s._local) <= 32 and s._layers <= 8  # layers merge like a binary counter: about log2(5000 / 32)
    assert s[0] == 1 and s[4999] == 1 and len(s) == 5000


def test_pickles_as_its_contents():
    import pickle

    s = EMPTY.incremented("a").incremented("a")
    assert pickle.loads(pickle.dumps(s)) == {"a": 2}
    assert isinstance(pickle.loads(pickle.dumps(s)), PathCounts)
