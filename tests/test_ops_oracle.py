"""The oracles on op-level outputs (audee/oracle/ops.py), on recorded outputs (no framework):
values with dtype tolerances, integers exactly, shapes and dtypes, what is undefined; and
campaign units for ops."""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Kind, Outcome
from audee.core.errors import ConfigError
from audee.oracle.ops import op_findings

B = ("tensorflow", "torch", "jax")


def judge(outs, dtypes=None, inputs=None, undefined=(), op="x"):
    outcomes = [Outcome(b) for b in B]
    dtypes = dtypes or {b: [str(np.asarray(o).dtype) for o in outs[b]] for b in B}
    return op_findings(outcomes, outs, dtypes, inputs or {"x": np.zeros(3, np.float32)}, None, undefined, op)


def test_a_float_output_off_on_one_backend_is_a_deviation_of_that_backend():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    found, _ = judge({"tensorflow": [x], "torch": [x * 1.01], "jax": [x + 1e-7]})
    devs = [f for f in found if f.kind == Kind.DEVIATION]
    assert {tuple(sorted(f.backends)) for f in devs} == {("tensorflow", "torch"), ("jax", "torch")}
    assert all(f.detail.odd == ["torch"] and f.detail.tensor == "out0" for f in devs)


def test_integers_are_exact_and_structure_mismatches_are_deviations():
    i = np.array([1, 2, 3], np.int32)
    found, _ = judge({"tensorflow": [i], "torch": [i], "jax": [i + np.array([0, 0, 1], np.int32)]})
    assert {f.detail.odd[0] for f in found} == {"jax"} and all(f.detail.dtype == "int32" for f in found)
    found, _ = judge({"tensorflow": [i], "torch": [i.astype(np.int64)], "jax": [i]})
    assert {f.detail.tensor for f in found} == {"out0:dtype"} and all(f.detail.odd == ["torch"] for f in found)
    found, _ = judge({"tensorflow": [i[:2]], "torch": [i], "jax": [i]})
    assert {f.detail.tensor for f in found} == {"out0:shape"}


def test_undefined_parts_are_not_compared_and_say_why():
    tied = {"x": np.array([1.0, 1.0, 0.0], np.float32)}
    a, b = np.array([0], np.int32), np.array([1], np.int32)
    found, skipped = judge({"tensorflow": [a], "torch": [b], "jax": [a]}, inputs=tied, undefined=["tie_indices"])
    assert not found and skipped == ["out0: indices of tied values"]
    big = {"x": np.array([3e38, 1.0], np.float32)}
    found, skipped = judge({"tensorflow": [a], "torch": [b], "jax": [a]}, inputs=big)
    assert not found and "conversion undefined" in skipped[0]
    found, _ = judge({"tensorflow": [a], "torch": [b], "jax": [a]}, inputs=big, op="saturate_cast")
    assert found  # saturate_cast defines the conversion: compared


def test_an_integer_division_by_zero_is_undefined_values_and_failures():
    from audee.cases.case import ZERO_DIVISOR, Finding
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    x1, zero = np.array([6, -8], np.int32), np.array([2, 0], np.int32)
    a, b = np.array([0, 0], np.int32), np.array([0, -1], np.int32)
    found, skipped = judge({"tensorflow": [a], "torch": [a], "jax": [b]}, inputs={"x1": x1, "x2": zero}, op="mod")
    assert not found and skipped == [ZERO_DIVISOR]
    found, skipped = judge({"tensorflow": [a], "torch": [a], "jax": [b]}, inputs={"x1": zero, "x2": x1}, op="mod")
    assert found and not skipped   # a 0 in the dividend is defined: compared
    crash = Finding(Kind.DIVERGENT_ACCEPTANCE, ["tensorflow"], {"accepted": ["torch", "jax"], "errors": {
        "tensorflow": {"phase": "run", "message": "InvalidArgumentError: Integer division by zero [Op:FloorMod]"}}})
    (sig,) = signatures_of(crash, {"layers": []}, {"op": "mod", "undefined": skipped + [ZERO_DIVISOR]})
    assert classify(sig) == ("undefined", "an integer division by zero")


def test_a_reduction_without_identity_over_an_empty_axis_is_undefined_values_and_failures():
    from audee.cases.case import EMPTY_REDUCTION, Finding
    from audee.oracle.ops import op_findings
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    x = np.zeros((3, 0), np.float32)
    ok = [Outcome("tensorflow"), Outcome("jax")]
    outs = {"tensorflow": [np.full(3, np.nan, np.float32)], "jax": [np.full(3, -np.inf, np.float32)]}
    dtypes = {b: ["float32"] for b in outs}

    def call(axis):
        return {"op": "nanmax", "args": [{"tensor": "x"}], "kwargs": {"axis": axis}}
    found, skipped = op_findings(ok, outs, dtypes, {"x": x}, None, (), "nanmax", call(1))
    assert not found and skipped == [EMPTY_REDUCTION]
    found, skipped = op_findings(ok, outs, dtypes, {"x": x}, None, (), "nanmax", call(None))
    assert not found and skipped == [EMPTY_REDUCTION]            # axis None reduces the empty axis too
    found, skipped = op_findings(ok, {b: [np.zeros(0, np.float32)] for b in outs}, dtypes, {"x": x}, None, (),
                                 "nanmax", call(0))
    assert not skipped                                           # over the axis of size 3: defined, compared
    found, _ = op_findings(ok, outs, dtypes, {"x": x}, None, (), "nansum", call(1))
    assert found                                                 # a sum has an identity: 0 is the answer
    crash = Finding(Kind.DIVERGENT_ACCEPTANCE, ["torch"], {"accepted": ["tensorflow", "jax"], "errors": {
        "torch": {"phase": "run", "message": "IndexError: max(): Expected reduction dim 1 to have non-zero size."}}})
    (sig,) = signatures_of(crash, {"layers": []}, {"seed": "op:nanmax", "api": "nanmax",
                                                   "undefined": [EMPTY_REDUCTION]})
    assert classify(sig)[0] == "undefined" and "identity" in classify(sig)[1]


def test_empty_segments_fill_is_each_frameworks_own_and_not_compared():
    ids = np.array([0, 0, 2], np.int32)
    lowest, inf = np.array([[1.0], [-3.4e38], [2.0]], np.float32), np.array([[1.0], [-np.inf], [2.0]], np.float32)
    inputs = {"data": np.ones((3, 1), np.float32), "segment_ids": ids}
    found, skipped = judge({"tensorflow": [lowest], "torch": [inf], "jax": [inf]}, inputs=inputs,
                           undefined=["empty_segments"])
    assert not found and skipped == ["rows of empty segments [1]: each framework's own fill"]
    wrong = np.array([[1.0], [-np.inf], [5.0]], np.float32)   # a filled segment still compares
    found, _ = judge({"tensorflow": [lowest], "torch": [inf], "jax": [wrong]}, inputs=inputs,
                     undefined=["empty_segments"])
    assert found and all("jax" in f.backends for f in found)


def test_nan_from_a_nan_input_alike_everywhere_is_propagation():
    x = np.array([np.nan, 1.0], np.float32)
    found, _ = judge({b: [x] for b in B}, inputs={"x": x})
    assert [f.kind for f in found] == [Kind.NAN_PROPAGATED]


def test_campaign_ops_runs_expand_into_op_units(tmp_path):
    from audee.campaign.config import load_campaign

    path = tmp_path / "c.yaml"
    path.write_text("name: c\nruns:\n  - ops: [add, cumsum, sum]\n    op_group: 2\n    variants: 3\n"
                    "    backends: [[tensorflow, torch, jax]]\n")
    units = load_campaign(path).units
    assert [u.ops for u in units] == [("add", "cumsum"), ("sum",)] and all(u.apis is None for u in units)
    assert units[0].id == "op-add+cumsum--tensorflow+torch+jax--r0"
    path.write_text("name: c\nruns:\n  - ops: [add, nosuchop]\n    backends: [[jax]]\n")
    with pytest.raises(ConfigError, match=r"runs\[0\].ops\[1\]: unknown op 'nosuchop'"):
        load_campaign(path)
    path.write_text("name: c\nruns:\n  - ops: all\n    apis: all\n    backends: [[jax]]\n")
    with pytest.raises(ConfigError, match="exactly one"):
        load_campaign(path)
    assert len(load_campaign("experiments/campaigns/ops-cpu.yaml").units) >= 28


def test_complex_outputs_compare_as_real_and_imaginary_parts():
    c = np.array([1 + 2j, 3 - 1j], np.complex64)
    found, _ = judge({"tensorflow": [c], "torch": [c], "jax": [c + 0.5j]},
                     dtypes={b: ["complex64"] for b in B})
    assert {f.detail.odd[0] for f in found} == {"jax"} and all(f.kind == Kind.DEVIATION for f in found)


def test_unknown_op_and_a_search_are_one_line_errors(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for args, flag in ((["--op", "cumsum,nosuchop"], "--op"), (["--op", "cumsum", "--level", "input"], "--level")):
        r = subprocess.run([sys.executable, "-m", "audee", "fuzz", *args, "--out", str(tmp_path / "o")], env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 2 and flag in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
        assert not (tmp_path / "o").exists()


def test_the_report_gives_each_case_levels_rate():
    import pandas as pd

    from audee.report.write import rate_table

    cases = pd.DataFrame({"seed": ["op:add", "op:sum", "api:Dense", "lenet5"], "seconds": [0.5, 0.5, 2.0, 4.0]})
    got = {r.level: (r.cases, r.cases_per_s) for r in rate_table(cases).itertuples()}
    assert got == {"op": (2, 2.0), "api": (1, 0.5), "network": (1, 0.25)}
