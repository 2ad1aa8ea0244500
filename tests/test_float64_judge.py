"""Between independent frameworks the float64 reference, where a case has one, decides which
side is wrong, not the majority (audee.oracle.pairs: ``odd_by_float64``,
``nonfinite_by_float64``; docs/oracles.md, "The odd backend"): two backends sharing one wrong
value leave the third, right one alone.

On real frameworks: an op case (``keras.ops.std`` of five 1e19 and five -1e19, below float32's
overflow scale: TensorFlow and JAX overflow to inf summing the squares, PyTorch and float64
give 1e19), and a model case (two JAX
plugins, tests/plugins.py, whose Dense is 5% off, against TensorFlow and its float64 run).
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Finding, Kind, Outcome
from audee.oracle.odd import mark_odd
from audee.oracle.pairs import (FLOAT64_RULE, NONFINITE_RULE, Float64Verdict, nonfinite_by_float64,
                                odd_by_float64)
from audee.records.findings import DeviationDetail, NanDetail

SCALED = "tests.plugins:ScaledDenseJax"
TWIN = "tests.plugins:ScaledDenseJaxTwin"


# ---- the rule, no framework ----------------------------------------------------------------------
def test_the_float64_reference_names_the_backends_out_of_tolerance_when_one_stays_within():
    errors = {"tensorflow": 4.0, "torch": 0.2, "jax": 4.1}
    assert odd_by_float64(["tensorflow", "torch", "jax"], errors) == (["jax", "tensorflow"], FLOAT64_RULE)
    assert odd_by_float64(["torch", "jax"], errors) == (["jax"], FLOAT64_RULE)   # a finding's pair: its culprit
    assert odd_by_float64(["torch"], errors) is None                             # nobody of these is out
    assert odd_by_float64(["tensorflow", "jax"], {"tensorflow": 3.0, "jax": 2.0}) is None  # all out: ill-conditioned
    assert odd_by_float64(["tensorflow"], {}) is None                            # no reference


def test_non_finite_where_the_float64_reference_is_finite_is_the_odd_side():
    inf, nan = np.inf, np.nan
    two_wrong = {"tensorflow": np.array([inf, 1.0]), "jax": np.array([inf, 1.0]), "torch": np.array([3.0, 1.0])}
    assert nonfinite_by_float64(two_wrong, np.array([3.0, 1.0])) == ("jax", "tensorflow")
    assert nonfinite_by_float64(two_wrong, np.array([nan, 1.0])) is None        # undefined there itself
    assert nonfinite_by_float64(two_wrong, np.array([3.0, 1.0, 0.0])) is None   # another shape
    alike = {b: np.array([inf, 1.0]) for b in ("tensorflow", "jax")}
    assert nonfinite_by_float64(alike, np.array([3.0, 1.0])) is None            # no difference to decide


def _outcome(b, y):
    y = np.asarray(y, np.float32).reshape(1, -1)
    return Outcome(b, logits=y, output=y, nonfinite=["d"] if not np.isfinite(y).all() else [])


def test_mark_odd_reads_the_reference_before_the_majority_and_the_majority_where_it_cannot_tell():
    outcomes = [_outcome("tensorflow", [1.05]), _outcome("torch", [1.0]), _outcome("jax", [1.05])]
    findings = [Finding(Kind.DEVIATION, [a, b], DeviationDetail(pair=f"{a}|{b}", score=5.0))
                for a, b in (("tensorflow", "torch"), ("torch", "jax"))]
    mark_odd(outcomes, findings)
    assert all(f.detail.odd == ["torch"] for f in findings)              # the majority: the right one
    mark_odd(outcomes, findings, Float64Verdict({"tensorflow": 5.0, "torch": 0.1, "jax": 5.0}))
    assert all(f.detail.odd == ["jax", "tensorflow"] and f.detail.odd_rule == FLOAT64_RULE for f in findings)
    mark_odd(outcomes, findings, Float64Verdict({"tensorflow": 5.0, "torch": 4.0, "jax": 5.0}))
    assert all(f.detail.odd == ["torch"] for f in findings)              # every one out: the majority again
    nan = Finding(Kind.NAN, ["tensorflow", "jax"], NanDetail(backends=["tensorflow", "jax"]))
    mark_odd(outcomes, [nan], Float64Verdict({}, ("jax", "tensorflow")))
    assert nan.detail.odd == ["jax", "tensorflow"] and nan.detail.odd_rule == NONFINITE_RULE


# ---- real frameworks -----------------------------------------------------------------------------
def _roots(verdict, spec, meta):
    from audee.triage.rootcause import classify, root_key
    from audee.triage.signature import case_signatures

    return [(s, classify(s)[0], root_key(s)) for s in case_signatures(verdict, spec, meta)]


@pytest.mark.slow
def test_an_op_two_frameworks_overflow_alike_is_their_bug_not_the_third_ones(tmp_path):
    """``keras.ops.std`` of five 1e19 and five -1e19 (each square representable in float32):
    TensorFlow and JAX sum the squares into float32's overflow (inf), PyTorch's kernel and
    float64 give 1e19.  The majority blames PyTorch; the float64 reference (the call on float64
    tensors, on JAX with x64) names TensorFlow and JAX."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.opcase import OpCase
    from audee.engine.opexec import OpExecutor
    from audee.reference.run import Reference, reference_refs

    refs = parse_backends("tensorflow,torch,jax")
    case = OpCase("std", [{"tensor": "x"}], {}, {"x": np.array([1e19] * 5 + [-1e19] * 5, np.float32)}, {"x": "float32"})
    with Pool(refs, tmp_path, timeout=300, threads=1, reference=reference_refs(refs, "jax")) as pool:
        pool.start_or_fail()
        plain = OpExecutor(pool).run(case)
        judged = OpExecutor(pool, reference=Reference("jax")).run(case)
    (before,) = [f for f in plain.verdict.findings if f.kind == Kind.NAN and f.is_failure]
    assert before.detail.odd == ["torch"]                                  # today's majority: the right one
    ref = judged.reference
    assert ref.backend == "jax-x64" and ref.usable and ref.nonfinite == ["jax", "tensorflow"]
    (f,) = [f for f in judged.verdict.findings if f.kind == Kind.NAN and f.is_failure]
    assert f.detail.odd == ["jax", "tensorflow"] and f.detail.odd_rule == NONFINITE_RULE
    meta = {"api": "std", "op": "std"}
    roots = _roots(judged.verdict, {"layers": []}, meta)
    assert roots and all(s.odd == ("jax", "tensorflow") and "torch" not in key for s, _, key in roots), roots


@pytest.fixture(scope="module")
def model_pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.reference.run import reference_refs

    refs = parse_backends(f"tensorflow,{SCALED},{TWIN}")
    with Pool(refs, tmp_path_factory.mktemp("logs"), timeout=300, threads=1, reference=reference_refs(refs)) as p:
        p.start_or_fail()
        yield p


def test_a_model_two_backends_share_one_wrong_value_leaves_the_third_as_the_right_one(model_pool):
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.reference.run import Reference
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "one-dense", "inputs": [{"name": "x", "shape": [4], "range": [0, 1]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 3}, "inputs": ["x"]}],
        "output": "d", "logits": "d"})
    case = TestCase("shared-wrong", spec, {}, {"x": np.random.default_rng(0).random((4, 4)).astype(np.float32)})
    plain = Executor(model_pool, diagnose=False)
    plain.complete_weights(case, weight_seed=0)
    before = [f for f in plain.run(case).verdict.findings if f.kind == Kind.DEVIATION]
    assert before and all(f.detail.odd == ["tensorflow"] for f in before)   # today's majority: the right one
    result = Executor(model_pool, diagnose=False, reference=Reference()).run(case)
    ref = result.reference
    assert ref.backend == "tensorflow" and ref.usable and ref.errors["tensorflow"] < 1 < ref.errors[SCALED]
    devs = [f for f in result.verdict.findings if f.kind == Kind.DEVIATION]
    assert {f.detail.pair for f in devs} == {f"tensorflow|{SCALED}", f"tensorflow|{TWIN}"}
    assert all(f.detail.odd == sorted([SCALED, TWIN]) and f.detail.odd_rule == FLOAT64_RULE for f in devs)
    roots = _roots(result.verdict, spec, {})
    assert roots and all(s.odd in ((SCALED,), (TWIN,)) and "tensorflow" not in s.odd for s, _, _ in roots), roots


def test_an_op_calls_reference_widens_its_float_tensors_and_dtype_argument_only():
    from audee.reference.run import widened_call

    call = {"op": "cumsum", "args": [{"tensor": "x"}, {"tensor": "i"}], "kwargs": {"axis": 0, "dtype": "float16"},
            "dtypes": {"x": "bfloat16", "i": "int32"}}
    tensors = {"x": np.ones(3, np.float32), "i": np.arange(3, dtype=np.int32)}
    wide, arrays = widened_call(call, tensors)
    assert wide["dtypes"] == {"x": "float64", "i": "int32"} and wide["kwargs"] == {"axis": 0, "dtype": "float64"}
    assert arrays["x"].dtype == np.float64 and arrays["i"].dtype == np.int32
    assert call["kwargs"]["dtype"] == "float16" and tensors["x"].dtype == np.float32   # the case's own call untouched
