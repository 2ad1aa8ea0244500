"""Coverage of layer APIs and parameter values (audee/report/coverage.py)."""
from __future__ import annotations

import pandas as pd

from audee.report import coverage
from tests.helpers import tiny_cnn


def test_every_layer_and_parameter_value_is_exercised():
    got = {tuple(t) for t in coverage.exercised(tiny_cnn())}
    assert ("Conv2D", "", "") in got and ("Softmax", "", "") in got
    assert ("Conv2D", "filters", "4") in got and ("Conv2D", "activation", '"relu"') in got
    assert ("Dense", "units", "5") in got


def test_tables_count_cases_and_failures_and_list_apis_never_run(tmp_path):
    ex = coverage.exercised(tiny_cnn())
    other = [t for t in ex if t[0] != "Conv2D"] + [["Conv2D", "", ""], ["Conv2D", "filters", "8"]]
    cases = pd.DataFrame({"status": ["pass", "fail", "pass"], "exercised": [ex, ex, other]})
    values = coverage.coverage_table(cases)
    row = values[(values.api == "Conv2D") & (values.param == "filters")].set_index("value")
    assert row.loc["4", "cases"] == 2 and row.loc["4", "failing"] == 1 and row.loc["8", "cases"] == 1
    apis = coverage.api_table(cases, configured=["Conv2D", "GRU"]).set_index("api")
    assert apis.loc["GRU", "cases"] == 0 and apis.loc["Conv2D", "cases"] == 3 and apis.loc["Conv2D", "failing"] == 1
    assert apis.index[0] == "GRU"  # never exercised: listed first
    assert coverage.heatmap(cases, tmp_path / "c.png", ["GRU"]) and (tmp_path / "c.png").stat().st_size > 1000
    assert not coverage.heatmap(pd.DataFrame(), tmp_path / "none.png")
