"""The conformance suite itself: each check catches the broken detector it exists for."""
import math

import pytest

from detectors import Decision, Detector, Verdict
from detectors.exact import ExactDetector
from detectors.normalized import NormalizedDetector
from detectors.testing import CHECKS, DetectorCheckError, check_detector, run_check


class Broken(ExactDetector):
    """An exact detector with one defect switched on by a parameter."""

    def __init__(self, *, max_repeats_per_signature: int = 1, tool_overrides=None, defect: str = ""):
        super().__init__(max_repeats_per_signature=max_repeats_per_signature, tool_overrides=tool_overrides)
        self.defect = defect
        self._seen = 0

    def check(self, state, call):
        d = super().check(state, call)
        if self.defect == "nan":
            return Decision(d.verdict, math.nan)
        if self.defect == "inconsistent" and d.alarm:
            return Decision(d.verdict, 0.0, d.message)
        if self.defect == "key_order":
            return Decision(Verdict.ALLOW, float(list(call.args).index(sorted(call.args)[0])) / 10 if call.args else 0.0)
        if self.defect == "sets" and any(isinstance(v, set) for v in call.args.values()):
            raise TypeError("unhashable")
        if self.defect == "leak":  # a counter that survives start(): later episodes score differently
            return Decision(d.verdict, d.score + (0.5 if self._seen > 30 else 0.0), d.message)
        if self.defect == "no_text" and d.alarm:
            return Decision(Verdict.NUDGE, d.score)
        return d

    def record(self, state, call, decision, observation):
        if self.defect == "mutate":
            sig = self._signature(call)
            state[sig] = state.get(sig, 0) + 1  # writes into the parent's mapping
            return state
        if self.defect == "leak":
            self._seen += 1
        return super().record(state, call, decision, observation)

    def start(self):
        return {} if self.defect == "mutate" else super().start()


class Loud(Detector):
    def check(self, state, call):
        return Decision(Verdict.NUDGE, 1.0, message="stop")


class BadClone(ExactDetector):
    def __init__(self, *, max_repeats_per_signature: int = 1, tool_overrides=None):
        super().__init__(max_repeats_per_signature=max_repeats_per_signature + 1, tool_overrides=tool_overrides)


@pytest.mark.parametrize("defect, check", [
    ("nan", "check_finite_scores"),
    ("inconsistent", "check_threshold_consistency"),
    ("key_order", "check_key_order_invariance"),
    ("sets", "check_robust_to_odd_arguments"),
    ("no_text", "check_decisions_are_well_formed"),
    ("mutate", "check_no_state_mutation"),
    ("mutate", "check_sibling_independence"),
    ("leak", "check_reset"),
])
def test_each_check_catches_its_defect(defect, check):
    assert run_check(Broken(), check).status == "passed"
    result = run_check(Broken(defect=defect), check)
    assert result.status == "failed", result


def test_quality_floors_and_clone():
    assert run_check(Loud(), "check_quiet_on_clean_trace").status == "failed"
    assert run_check(BadClone(), "check_clone").status == "failed"


class Provenance(ExactDetector):
    """An exact detector whose ``skip`` switches off parts it says came from corpora."""

    derived_from = {"skip": {"a": ("corpus_1",), "b": ("corpus_2",)}}
    known = ("a", "b")

    def __init__(self, *, max_repeats_per_signature: int = 1, tool_overrides=None, skip: tuple = ()):
        super().__init__(max_repeats_per_signature=max_repeats_per_signature, tool_overrides=tool_overrides)
        unknown = set(skip) - set(self.known)
        if unknown:
            raise ValueError(f"skip: unknown part(s) {sorted(unknown)}")
        self.skip = tuple(skip)


class ProvenanceOfNothing(Provenance):
    derived_from = {"skip_parts": {"a": ("corpus_1",)}}  # no such parameter


class ProvenanceOfUnknownParts(Provenance):
    derived_from = {"skip": {"a": ("corpus_1",), "zz": ("corpus_2",)}}  # "zz" is refused


def test_derived_from_must_name_parts_that_can_be_switched_off():
    assert run_check(Provenance(), "check_derived_from_names_switches").status == "passed"
    assert run_check(ExactDetector(), "check_derived_from_names_switches").status == "skipped"
    bad = run_check(ProvenanceOfNothing(), "check_derived_from_names_switches")
    assert bad.status == "failed" and "skip_parts" in bad.detail
    bad = run_check(ProvenanceOfUnknownParts(), "check_derived_from_names_switches")
    assert bad.status == "failed" and "zz" in bad.detail


def test_check_detector_raises_with_every_failure_and_honours_declared_ones():
    with pytest.raises(DetectorCheckError, match="check_threshold_consistency"):
        check_detector(Broken(defect="inconsistent"))
    report = check_detector(Broken(defect="inconsistent"), expected_failures={"check_threshold_consistency": "known"}, raise_on_failure=False)
    statuses = {r.check: r.status for r in report.results}
    assert statuses["check_threshold_consistency"] == "xfail"
    assert statuses["check_catches_exact_repeat"] == "passed"
    with pytest.raises(ValueError, match="unknown check"):
        check_detector(ExactDetector(), expected_failures={"check_nonsense": "typo"})


def test_scope_skips_sibling_independence_instead_of_failing():
    assert run_check(NormalizedDetector(), "check_sibling_independence").status == "skipped"
    assert run_check(ExactDetector(), "check_sibling_independence").status == "passed"


def test_a_declared_failure_that_passes_is_reported():
    r = run_check(ExactDetector(), "check_clone", {"check_clone": "stale declaration"})
    assert r.status == "xpass"


def test_the_suite_names_every_rule_of_the_brief():
    for name in ("check_no_look_ahead", "check_no_state_mutation", "check_sibling_independence",
                 "check_key_order_invariance", "check_reset", "check_clone", "check_robust_to_odd_arguments",
                 "check_finite_scores", "check_threshold_consistency", "check_catches_exact_repeat",
                 "check_quiet_on_clean_trace"):
        assert name in CHECKS


def test_testing_module_stands_alone():
    import subprocess
    import sys

    code = ("import sys, detectors.testing; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('sim', 'scenarios', 'pytest', 'hypothesis')]; "
            "print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True)
