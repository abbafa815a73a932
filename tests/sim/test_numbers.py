"""sim.numbers.as_bool: one reading of a yes/no CSV cell for the report, its plots and the bench scripts."""
from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pytest

from sim.files import read_table
from sim.numbers import as_bool


@pytest.mark.parametrize("value, expected", [
    (True, True), (False, False), (np.True_, True), (np.False_, False),
    ("true", True), ("True", True), ("TRUE", True), (" yes ", True), ("1", True),
    ("false", False), ("False", False), ("no", False), ("0", False),
    (None, None), (math.nan, None), (np.float64("nan"), None), ("", None), ("maybe", None), ("nan", None),
])
def test_as_bool_reads_flags_and_leaves_the_rest_unknown(value, expected):
    assert as_bool(value) is expected


def test_as_bool_reads_a_written_column_back_whatever_dtype_pandas_gives_it(tmp_path):
    # loopbench writes flags as true/false (sim.files.fmt) and empty for unknown: pandas reads an
    # all-set column as bool and a column with gaps as objects holding bools and NaN.
    path = tmp_path / "t.csv"
    path.write_text("full,gaps\ntrue,true\nfalse,\ntrue,false\n")
    df = read_table(path)
    assert df["full"].dtype == bool and df["gaps"].dtype == object
    assert [as_bool(v) for v in df["full"]] == [True, False, True]  # numpy bools from iteration
    assert [as_bool(v) for v in df["gaps"].tolist()] == [True, None, False]
    text = pd.read_csv(io.StringIO("x\ntrue\nfalse\n"), dtype=str)["x"].tolist()
    assert [as_bool(v) for v in text] == [True, False]
