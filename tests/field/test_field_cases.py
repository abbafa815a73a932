"""Every field baseline agrees with its own project's unit tests, case by case (``tests/field/cases``)."""
import pytest

from tests.field.replay import agreement_table, all_cases, disagreement

CASES, UNREPRODUCIBLE = all_cases()

#: Minimum share of a project's reproducible cases our baseline must agree on.
MIN_AGREEMENT = 0.95


def _marked(case):
    if case.known:  # a declared disagreement must stay one: strict xfail
        return pytest.param(case, marks=pytest.mark.xfail(reason=case.known, strict=True), id=case.id)
    return pytest.param(case, id=case.id)


@pytest.mark.parametrize("case", [_marked(c) for c in CASES])
def test_case_agrees_with_the_project(case):
    assert disagreement(case) is None


@pytest.mark.parametrize("project,agree,total", agreement_table(CASES), ids=lambda v: str(v))
def test_project_agreement(project, agree, total):
    assert agree >= MIN_AGREEMENT * total, f"{project}: {agree}/{total}"


def test_every_unreproducible_case_has_a_reason():
    assert UNREPRODUCIBLE
    for item in UNREPRODUCIBLE:
        assert item.reason.strip() and item.test.strip() and "@" in item.source


def test_every_field_baseline_has_cases():
    projects = {c.project for c in CASES}
    assert {"openhands", "openhands_sdk", "gemini_cli", "roo_code", "cline", "goose", "crewai", "openclaw"} <= projects


def test_a_bad_case_file_is_named_in_one_line(tmp_path):
    from tests.field.replay import CaseError, load

    bad = tmp_path / "x.json"
    bad.write_text('{"project": "p", "detector": "exact", "repo": "r", "commit": "c", "file": "f",\n "cases": [{"test": "t"}]}')
    with pytest.raises(CaseError, match=r"x.json: case 0: missing field 'events'"):
        load(bad)
    bad.write_text("{\n oops")
    with pytest.raises(CaseError, match=r"x.json: line 2"):
        load(bad)
