"""Overflow that is no bug: judged in the layer's compute dtype, agreed by every backend,
or at the compute dtype's overflow boundary (audee.oracle.nan, audee.oracle.compute_dtype).

Unit tests of the rules need no framework; the end-to-end tests run real TensorFlow,
PyTorch and JAX workers on tiny models (and the JAX plugin of tests/plugins.py whose
Dense sums in another order).
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Kind, Outcome
from audee.oracle.compute_dtype import consumer_compute_dtypes, layer_compute_dtype
from audee.oracle.nan import nan_findings, overflow_boundary, overflow_scale
from audee.cases.spec import ModelSpec

NAN, INF = float("nan"), float("inf")


def _out(name: str, out) -> Outcome:
    out = np.asarray(out, np.float32)
    return Outcome(name, logits=out, output=out, nonfinite=[] if np.isfinite(out).all() else ["d"])


def _dense(dtype: str | None = None, units: int = 2, second: bool = False) -> ModelSpec:
    params = {"units": units, **({"dtype": dtype} if dtype else {})}
    layers = [{"name": "d", "api": "Dense", "params": params, "inputs": ["x"]}]
    if second:
        layers.append({"name": "e", "api": "Dense", "params": params, "inputs": ["d"]})
    return ModelSpec.from_json({"name": "dense", "inputs": [{"name": "x", "shape": [3]}], "layers": layers,
                                "output": layers[-1]["name"], "logits": layers[-1]["name"]})


# ---- the rules, no framework ---------------------------------------------------------------------
def test_a_layer_computes_in_its_policy_dtype():
    assert layer_compute_dtype({"dtype": "mixed_float16"}) == "float16"
    assert layer_compute_dtype({"dtype": "bfloat16"}) == "bfloat16"
    policy = {"class_name": "DTypePolicy", "config": {"name": "mixed_bfloat16"}}
    assert layer_compute_dtype({"dtype": policy}) == "bfloat16"
    assert layer_compute_dtype({}) == "float32" and layer_compute_dtype(None) == "float32"
    assert consumer_compute_dtypes(_dense("mixed_float16")) == {"x": "float16"}
    assert consumer_compute_dtypes(_dense()) == {"x": "float32"}


def test_overflow_scale_is_judged_in_the_compute_dtype_not_the_arrays():
    x = {"x": np.array([[300.0, 1.0, 1.0]], np.float32)}
    assert not overflow_scale(x)                                   # float32: ordinary
    assert overflow_scale(x, {"x": "float16"}) and overflow_scale(x, "float16")  # float16: sqrt(65504) = 256
    assert overflow_scale({"x": np.array([2.0 ** 64], np.float32)}, "bfloat16")   # bfloat16 reaches 3.4e38
    assert not overflow_scale({"x": np.array([300.0], np.float32)}, "bfloat16")
    same = [_out("a", [[INF, 1.0]]), _out("b", [[INF, 1.0]])]
    (f,) = nan_findings(same, x, {"x": "float16"})
    assert f.kind == Kind.NAN_PROPAGATED and f.detail.input_overflow_scale and not f.detail.agreed
    (g,) = nan_findings(same, x)                                   # a float32 model: Inf from an ordinary input
    assert g.kind == Kind.NAN and g.detail.agreed and not g.detail.strong
    (h,) = nan_findings(same[:1], x)                               # one backend ran: nothing agreed with it
    assert h.kind == Kind.NAN and not h.detail.agreed


def test_overflow_boundary_wants_the_exact_result_beyond_the_maximum_at_every_differing_element():
    fed = {"x": np.array([[1.0, 2.0]], np.float32)}
    alone = {"a": np.array([[INF, 1.0]], np.float32), "b": np.array([[3e38, 1.0]], np.float32)}
    assert overflow_boundary(fed, alone, {"c": np.array([[5e38, 1.0]])}, "float32")
    assert overflow_boundary(fed, alone, {"c": np.array([[INF, 1.0]])}, "float32")      # Inf even in float64
    assert not overflow_boundary(fed, alone, {"c": np.array([[3e38, 1.0]])}, "float32")  # representable: stands
    assert not overflow_boundary(fed, alone, {"c": np.array([[5e38, 1.0]]), "d": np.array([[3e38, 1.0]])})
    # float32 outputs do not count as float64 evidence; without any, the values themselves:
    # every one at the differing elements non-finite or at overflow scale
    assert overflow_boundary(fed, alone, {"c": np.array([[3e38, 1.0]], np.float32)})
    assert not overflow_boundary(fed, {"a": alone["a"], "b": np.array([[7.0, 1.0]], np.float32)}, None)
    # the compute dtype sets the maximum: 7e4 is beyond float16's
    half = {"a": np.array([[INF]], np.float16), "b": np.array([[6e4]], np.float16)}
    assert overflow_boundary(fed, half, {"c": np.array([[7e4]])}, "float16")
    assert not overflow_boundary(fed, half, {"c": np.array([[7e4]])}, "float32")
    # only the kind of non-finite value differs (Inf against NaN): both overflowed inside the
    # layer, whatever the exact result
    kinds = {"a": np.array([[INF]], np.float16), "b": np.array([[NAN]], np.float16)}
    assert overflow_boundary(fed, kinds, {"c": np.array([[7e4]])}, "float32")
    # a layer fed NaN/Inf is judged on what it does with them: never a boundary
    assert not overflow_boundary({"x": np.array([[NAN]], np.float32)}, alone, {"c": np.array([[5e38, 1.0]])})


# ---- on real frameworks ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def executor(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield Executor(p)


def _failures_that_are_bugs(result) -> list:
    """Failure findings the classification counts as bugs: not agreed, not at the boundary."""
    return [f for f in result.verdict.findings if f.is_failure
            and not (f.kind == Kind.NAN and (f.detail.agreed or f.detail.overflow_boundary))]


def test_a_mixed_float16_model_overflowing_on_every_backend_is_no_bug(executor):
    from audee.cases.case import TestCase

    x = np.array([[1000.0, 1000.0, 1000.0], [1.0, 1.0, 1.0]], np.float32)  # ordinary for float32, not float16
    weights = {"d": [np.full((3, 2), 100.0, np.float32), np.zeros(2, np.float32)]}
    case = TestCase("f16", _dense("mixed_float16", second=True), weights, {"x": x})
    executor.complete_weights(case, weight_seed=0)
    result = executor.run(case)
    assert all(not np.isfinite(o.output[0]).all() for o in result.outcomes.values())  # row 0 overflows everywhere
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    assert f.kind == Kind.NAN_PROPAGATED and f.detail.input_overflow_scale, f.detail
    assert not _failures_that_are_bugs(result) and not result.verdict.failed


@pytest.mark.parametrize("api", ["SimpleRNN", "GRU"])
def test_a_recurrence_overflowing_on_every_backend_is_no_bug(executor, api):
    from audee.cases.case import TestCase

    spec = ModelSpec.from_json({"name": "rnn", "inputs": [{"name": "x", "shape": [6, 2]}],
                                "layers": [{"name": "r", "api": api, "params": {"units": 4, "activation": "exponential"},
                                            "inputs": ["x"]}], "output": "r", "logits": "r"})
    x = np.random.default_rng(0).uniform(0.0, 10.0, (4, 6, 2)).astype(np.float32)  # finite, far from overflow scale
    case = TestCase("rnn", spec, {}, {"x": x})
    executor.complete_weights(case, weight_seed=0)
    result = executor.run(case)
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    assert f.kind == Kind.NAN and not f.detail.input_overflow_scale  # the paper's NaN oracle counts it...
    assert f.detail.agreed or f.detail.overflow_boundary, f.detail  # ...but it is no bug
    assert not _failures_that_are_bugs(result)


OVERFLOW = "tests.plugins:HalvedDenseJax"


def test_a_difference_at_the_overflow_boundary_is_told_from_one_below_it(tmp_path):
    """Dense on ordinary inputs (|x| <= 1.5e19 < 1.8e19) with weights so large that the
    products overflow float32.  With weights 4e19 the exact sums (4e38, 6e38) are beyond
    float32 and the frameworks disagree on NaN, +Inf, -Inf (TensorFlow 2.21: NaN; JAX: an
    FMA chain gives +-Inf; torch mixes): the overflow boundary.  With 2.5e19 the exact
    2.5e38 is representable: the plugin summing halved values gets it while the others
    overflow, and that difference stands."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({"name": "ov", "inputs": [{"name": "x", "shape": [3]}],
                                "layers": [{"name": "d", "api": "Dense", "params": {"units": 1, "use_bias": False},
                                            "inputs": ["x"]}], "output": "d", "logits": "d"})
    x = np.array([[1e19, 1e19, -1e19], [1e19, -1e19, 1e19], [-1e19, 1e19, 1e19], [1.5e19, 1e19, -1e19]],
                 np.float32)
    got = {}
    with Pool(parse_backends(f"jax,tensorflow,torch,{OVERFLOW}"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        ex = Executor(p)
        for w in (4e19, 2.5e19):
            case = TestCase(f"ov-{w}", spec, {"d": [np.full((3, 1), w, np.float32)]}, {"x": x})
            (got[w],) = [f for f in ex.run(case).verdict.findings if f.kind == Kind.NAN]
    beyond, below = got[4e19], got[2.5e19]
    assert not beyond.detail.input_overflow_scale and not beyond.detail.agreed
    assert beyond.detail.strong and beyond.detail.overflow_boundary, beyond.detail
    standing = [pt for pt in beyond.detail.patterns.values() if not pt.cleared]
    assert standing and all(pt.overflow_evidence == "float64" for pt in standing)  # TensorFlow widened it
    assert below.detail.strong and not below.detail.overflow_boundary, below.detail
    assert below.detail.odd == [OVERFLOW] and below.detail.finite_backends == [OVERFLOW]


@pytest.mark.slow
def test_a_converter_agreeing_with_the_frameworks_its_reference_overflows_apart_from_is_not_odd(tmp_path):
    """A ConvLSTM1D whose silu recurrence explodes (the api-cpu campaign, rng 2989): TensorFlow
    makes NaN at two elements where torch, JAX and onnxruntime give -0.  Its pairs with torch
    and JAX are cleared as overflow; its pair with onnxruntime, the program it converted, was
    left standing and named onnxruntime odd, announced as a new bug.  onnxruntime agrees with
    the frameworks TensorFlow differs from, so the difference is TensorFlow's order of
    operations at overflow: cleared too, and the case has no bug signature."""
    import json

    from tests.helpers import run_audee

    out = tmp_path / "run"
    got = run_audee(["fuzz", "--api", "ConvLSTM1D", "--variants", "5", "--batch", "8", "--invalid-prob", "0.1",
                     "--special-inputs", "0.1", "--dtypes", "float32:0.7,float16:0.1,bfloat16:0.1,mixed_float16:0.1",
                     "--backends", "tensorflow,torch,jax,onnxruntime", "--rng", "2989", "--out", str(out)])
    assert got.returncode in (0, 1), got.stderr
    rows = {r["id"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    row = rows["api-ConvLSTM1D-v00004"]
    assert row["params"]["recurrent_activation"] == "silu" and "nan" in row["kinds"]
    assert not [s for s in row["signatures"] if s["kind"] == "nan"], row["signatures"]
