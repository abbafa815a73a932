"""Transfer between two runs: rankings, Kendall's tau, top picks."""
import pytest

from sim.transfer import all_rows, kendall_tau, ranking, transfer


def test_kendall_tau_of_equal_reversed_and_tied_rankings():
    a = {"x": 3.0, "y": 2.0, "z": 1.0}
    assert kendall_tau(a, a) == pytest.approx(1.0)
    assert kendall_tau(a, {"x": 1.0, "y": 2.0, "z": 3.0}) == pytest.approx(-1.0)
    # one swapped pair of three: (2 concordant - 1 discordant) / 3
    assert kendall_tau(a, {"x": 3.0, "y": 1.0, "z": 2.0}) == pytest.approx(1 / 3)
    assert kendall_tau({"x": 1.0, "y": 1.0}, {"x": 2.0, "y": 1.0}) is None  # one side all ties
    assert kendall_tau({"x": 1.0}, {"x": 1.0}) is None


def test_transfer_ranks_common_detectors_and_names_the_top_picks():
    syn = {"pg": 97.0, "exact": 32.0, "np": 55.0, "only_syn": 10.0}
    real = {"pg": 71.0, "exact": 72.0, "np": 37.0, "broken": None}
    t = transfer(syn, real)
    assert t.detectors == ["exact", "np", "pg"]
    assert t.rank_a == {"pg": 1, "np": 2, "exact": 3} and t.rank_b == {"exact": 1, "pg": 2, "np": 3}
    assert t.top_a == "pg" and t.top_b == "exact" and not t.same_top
    assert t.tau == pytest.approx(-1 / 3)
    with pytest.raises(ValueError):
        transfer({"a": 1.0}, {"b": 1.0})


def test_all_rows_reads_metrics_csv_strings_and_ranking_puts_undefined_last():
    rows = [{"detector": "a", "family": "all", "score_standard": "12.5"},
            {"detector": "a", "family": "stale", "score_standard": "99"},
            {"detector": "b", "family": "all", "score_standard": ""}]
    vals = all_rows(rows, "score_standard")
    assert vals == {"a": 12.5, "b": None}
    assert ranking({"a": 1.0, "b": None, "c": 2.0}) == ["c", "a", "b"]
