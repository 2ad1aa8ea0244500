"""Report pieces without frameworks: Table 1 lists every seed run, error messages stay
readable, Figure 3 marks clipped values.  (tests/test_fuzz_cli.py builds a report from a
real run.)"""
from __future__ import annotations

import numpy as np
import pandas as pd

from audee.records.search import SearchTrace
from audee.report.merge import CampaignData, UnitTrace
from audee.report.write import FIG3_CEIL, FIG3_FLOOR, _md, backend_errors, clip_series, figure3, table1

INF = float("inf")


def test_table1_has_a_row_for_every_seed_and_pair_run():
    units = pd.DataFrame([{"unit": "u1", "seed": "lenet5", "pairs": ["tensorflow|torch"]},
                          {"unit": "u2", "seed": "gru", "pairs": ["tensorflow|jax", "tensorflow|torch"]}])
    cases = pd.DataFrame([{"id": "lenet5-v1", "seed": "lenet5", "unit": "u1", "level": "NET",
                           "inconsistent_pairs": ["torch|tensorflow"]},   # the other orientation: same pair
                          {"id": "gru-v1", "seed": "gru", "unit": "u2", "level": "NET", "inconsistent_pairs": []}])
    t = table1(cases, units)
    assert t[["seed", "pair", "NET"]].values.tolist() == [["gru", "tensorflow vs jax", 0],
                                                          ["gru", "tensorflow vs torch", 0],
                                                          ["lenet5", "tensorflow vs torch", 1]]


def test_backend_errors_list_every_rejecting_backend_and_escape_markdown():
    cases = pd.DataFrame([{"id": "c1", "unit": "u", "kinds": ["consistent_rejection"],
                           "backends": {"a": "error:build", "b": "error:build"},
                           "errors": {"a": "ValueError: bad | worse", "b": "TypeError:\nno"}},
                          {"id": "c2", "unit": "u", "kinds": [], "backends": {"a": "ok", "b": "ok"}, "errors": {}}])
    e = backend_errors(cases)
    assert e[["case", "backend", "error"]].values.tolist() == [["c1", "a", "ValueError: bad | worse"],
                                                              ["c1", "b", "TypeError:\nno"]]
    md = _md(e)
    assert "ValueError: bad \\| worse" in md and "TypeError: no" in md and len(md.splitlines()) == 4


def test_clip_series_marks_values_outside_the_plotted_range():
    y, solid, hi, lo = clip_series(np.array([np.nan, 0.0, 0.0, 1e-3, 1e5, 1e300, 1e300]))
    assert np.isnan(y[0]) and y[1] == FIG3_FLOOR and y[-1] == FIG3_CEIL
    assert lo == 2 and hi == 5
    assert solid.tolist() == [True, False, True, True, True, True, False]
    y, solid, hi, lo = clip_series(np.array([1e-3, 1e-2, INF]))
    assert (hi, lo) == (2, None) and y[2] == FIG3_CEIL


def test_figure3_draws_many_runs(tmp_path):
    traces = {f"u{k}/s{k}": UnitTrace(SearchTrace.model_validate(
                  {"id": f"s{k}", "config": {"fitness": "inconsistency", "level": ["input", "weight"][k % 2],
                                             "search": ["ga", "random"][k % 2]},
                   "trace": [{"generation": g, "best": b} for g, b in
                             enumerate([0.0, 1e-6 * (k + 1), 1e300 if k == 3 else 1e-3])]}), f"u{k}", f"seed{k % 7}")
              for k in range(40)}
    assert figure3(CampaignData(pd.DataFrame(), pd.DataFrame(), traces), tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000


def test_per_backend_api_coverage_names_what_never_ran_and_why():
    """The compilers report: per backend, APIs given, run in some case, never run; each API a
    backend never ran with its first error, an explicit refusal marked a limitation."""
    import pandas as pd

    from audee.report.coverage import backend_api_tables

    refusal = "ConverterError: error: 'tf.AvgPool' op is neither a custom op nor a flex op"
    cases = pd.DataFrame([
        {"api": "AveragePooling2D", "backends": {"tensorflow": "ok", "litert": "error:convert"},
         "errors": {"litert": refusal}},
        {"api": "AveragePooling2D", "backends": {"tensorflow": "ok", "litert": "error:convert"},
         "errors": {"litert": refusal}},
        {"api": "Conv2DTranspose", "backends": {"tensorflow": "ok", "litert": "error:run"},
         "errors": {"litert": "RuntimeError: transpose_conv.cc:315 computed_input_height != SizeOfDimension"}},
        {"api": "Dense", "backends": {"tensorflow": "ok", "litert": "ok"}, "errors": {}},
        {"api": "Dense", "backends": {"tensorflow": "ok", "litert": "hard_crash:run"}, "errors": {"litert": "died"}},
        {"api": None, "backends": {"tensorflow": "ok"}, "errors": {}},  # a network-level row: not counted
    ])
    summary, rest = backend_api_tables(cases)
    by = summary.set_index("backend")
    assert by.loc["tensorflow", ["apis", "ran", "never_ran"]].tolist() == [3, 3, 0]
    assert by.loc["litert", ["apis", "ran", "never_ran", "never_ran_limitation"]].tolist() == [3, 1, 2, 1]
    r = rest.set_index("api")
    assert r.loc["AveragePooling2D", "cases"] == 2 and r.loc["AveragePooling2D", "phase"] == "convert"
    assert bool(r.loc["AveragePooling2D", "limitation"]) and not bool(r.loc["Conv2DTranspose", "limitation"])
    assert "Dense" not in r.index  # ran once, crashed once: it converts and runs
