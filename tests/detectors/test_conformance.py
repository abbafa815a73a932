"""Every registered detector passes the conformance suite of ``detectors.testing``.

The embedding detectors run with the bag-of-words ``HashingEncoder`` so the suite stays
fast; one run of ``embedding`` with the real model is marked ``model``.
"""
import pytest

from detectors.embedding_model import Embedder, HashingEncoder
from detectors.registry import available, make_detector
from detectors.testing import check_detector, parametrize_with_checks


def built(name: str):
    if name.startswith("embedding") or name == "progress_guard":
        return make_detector(name, embedder=Embedder(encode=HashingEncoder(), model_name="fake-bow"))
    return make_detector(name)


NAMES = available()


@parametrize_with_checks([built(n) for n in NAMES], ids=NAMES)
def test_builtin_detector_conforms(detector, check):
    check(detector)


def test_every_builtin_detector_is_covered():
    # The built-ins are all registered through entry points; a new one is checked automatically.
    assert {"exact", "normalized", "planner", "embedding", "openhands", "max_turns"} <= set(NAMES)


@pytest.mark.model
def test_embedding_with_the_real_model_conforms():
    report = check_detector(make_detector("embedding"))
    assert report.failures == []
    assert {r.status for r in report.results} <= {"passed", "skipped"}
