"""Detector parameters are checked before a detector is built: declared ranges, else types."""
import pytest

from detectors.params import OneOf, ParamError, Range, check_params, param_rules
from detectors.protocol import Detector, allow
from detectors.registry import build, make_detector
from detectors.testing import DetectorCheckError, check_rejects_out_of_range_params


class Plain(Detector):
    """A plug-in that declares nothing: its defaults' types are checked."""

    def __init__(self, *, limit: int = 3, ratio=0.5, tools=("a", "b"), strict=False):
        self.limit, self.ratio, self.tools, self.strict = limit, ratio, tools, strict

    def check(self, state, call):
        return allow(0)


class Declared(Plain):
    param_ranges = {"limit": Range(1, 10), "ratio": Range(0, 1, float)}


class Ignores(Declared):
    """Declares a range and then does not enforce it."""

    @classmethod
    def validate_params(cls, params):
        pass


class DuckTyped:
    def __init__(self, *, limit: int = 3):
        self.limit = limit

    def start(self):
        return None

    def check(self, state, call):
        return allow(0)

    def record(self, state, call, decision, observation):
        return state


@pytest.mark.parametrize("value", ["abc", -1, 0, 1.5, True, None])
def test_exact_refuses_a_value_outside_its_range(value):
    with pytest.raises(ParamError) as info:
        make_detector("exact", max_repeats_per_signature=value)
    assert info.value.param == "max_repeats_per_signature" and info.value.value == value
    assert str(info.value) == f"max_repeats_per_signature={value!r} is not allowed (expected an integer >= 1)"


def test_exact_takes_a_value_in_range():
    assert make_detector("exact", max_repeats_per_signature=2).max_repeats_per_signature == 2


def test_undeclared_parameters_are_checked_against_their_default_types():
    rules = {k: r.describe() for k, r in param_rules(Plain).items()}
    assert rules == {"limit": "an integer", "ratio": "a number", "tools": "a list of strings", "strict": "true or false"}
    for bad in ({"limit": "x"}, {"ratio": "0.5"}, {"tools": "a"}, {"tools": [1]}, {"strict": 1}):
        with pytest.raises(ParamError):
            build(Plain, bad)
    assert build(Plain, {"limit": 7, "ratio": 1, "tools": ["x"], "strict": True}).ratio == 1


def test_a_duck_typed_detector_gets_the_type_checks_too():
    with pytest.raises(ParamError, match="limit='x'"):
        build(DuckTyped, {"limit": "x"})


def test_declared_ranges_win_over_types():
    with pytest.raises(ParamError, match=r"ratio=1.5 is not allowed \(expected a number from 0 to 1\)"):
        build(Declared, {"ratio": 1.5})
    with pytest.raises(ParamError, match="expected one of 'a', 'b'"):
        check_params(type("T", (), {"param_ranges": {"m": OneOf(("a", "b"))}, "__init__": lambda self, *, m="a": None}),
                     {"m": "c"})


def test_layered_names_the_layer_parameter_that_is_wrong():
    with pytest.raises(ParamError) as info:
        make_detector("layered", layer_params={"normalized": {"threshold": 0}})
    assert info.value.param == "layer_params.normalized.threshold"


def test_conformance_check_catches_a_range_that_is_not_enforced():
    check_rejects_out_of_range_params(Declared())
    with pytest.raises(DetectorCheckError, match="outside the declared range"):
        check_rejects_out_of_range_params(Ignores())
    wrong = type("Wrong", (Plain,), {"param_ranges": {"nope": Range(1)}})
    with pytest.raises(DetectorCheckError, match="does not take: nope"):
        check_rejects_out_of_range_params(wrong())
