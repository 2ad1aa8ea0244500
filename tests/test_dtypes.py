"""float16 / bfloat16 / mixed-precision models end to end on the real frameworks (issue 11).

A layer's dtype policy travels as its ``dtype`` parameter (``"float16"``,
``"mixed_bfloat16"``, ...); a model input's dtype as ``InputSpec.dtype``.  Every case runs
through the Executor, as ``audee fuzz`` runs it, on one Pool of four workers.

Documented limitations (docs/backends.md, "Dtypes"), asserted here as what they are:

* onnxruntime refuses bfloat16 and mixed_bfloat16 models at ``convert``: tf2onnx 1.17 writes
  TensorFlow's bfloat16 tensors as ONNX float16 (``tf2onnx.tf_utils.TF_TO_ONNX_DTYPE``), so
  the converted graph would compute another model; the refusal names tf2onnx's mapping.
* case files widen bfloat16 arrays to float32 (exactly): only plain numpy dtypes pass the
  restricted loader.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.engine.execute import Executor, Result
from audee.oracle.deviation import compare
from audee.settings import TOLERANCES
from audee.cases.spec import ModelSpec
from audee.cases.weights import adapt_weights, init_weights

BACKENDS = ("tensorflow", "torch", "jax", "onnxruntime")
TF2ONNX_BF16 = "tf2onnx maps TensorFlow's bfloat16 to ONNX float16"


def dtype_spec(policy: str | None, input_dtype: str = "float32") -> ModelSpec:
    """Conv + BatchNorm + Dense classifier with every layer in ``policy`` (None: Keras' float32)."""
    p = {} if policy is None else {"dtype": policy}
    return ModelSpec.from_json({
        "name": f"dt_{policy}",
        "inputs": [{"name": "image", "shape": [6, 6, 2], "dtype": input_dtype, "range": [0, 1]}],
        "layers": [
            {"name": "conv", "api": "Conv2D", "params": {"filters": 3, "kernel_size": 3, "activation": "relu", **p},
             "inputs": ["image"]},
            {"name": "bn", "api": "BatchNormalization", "params": dict(p), "inputs": ["conv"]},
            {"name": "flat", "api": "Flatten", "params": dict(p), "inputs": ["bn"]},
            {"name": "logits", "api": "Dense", "params": {"units": 4, **p}, "inputs": ["flat"]},
            {"name": "softmax", "api": "Softmax", "params": dict(p), "inputs": ["logits"]},
        ],
        "output": "softmax", "logits": "logits"})


def inputs(dtype: str = "float32") -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(3).random((5, 6, 6, 2), dtype=np.float32).astype(dtype)}


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> Executor:
    with Pool(parse_backends(",".join(BACKENDS)), tmp_path_factory.mktemp("logs"), timeout=300) as pool:
        assert pool.start() == {}
        yield Executor(pool)


_runs: dict[str, Result] = {}


def run(executor: Executor, policy: str | None, input_dtype: str = "float32") -> Result:
    """One test case per model, run once per module (float32 weights, as seeds carry them)."""
    spec = dtype_spec(policy, input_dtype)
    if spec.key() not in _runs:
        case = TestCase(f"dt-{policy}", spec, {}, inputs(input_dtype))
        executor.complete_weights(case, weight_seed=0)
        _runs[spec.key()] = executor.run(case)
    return _runs[spec.key()]


def outputs_of(result: Result, backend: str) -> Any:
    o = result.outcomes[backend]
    assert o.ok, f"{backend}: {o.failure}"
    return o


# ---- float16 and mixed_float16: every backend, no finding -------------------------------------------
@pytest.mark.parametrize("policy, input_dtype", [("float16", "float16"), ("float16", "float32"),
                                                 ("mixed_float16", "float32")])
def test_float16_models_run_on_every_backend_without_a_finding(executor, policy, input_dtype):
    result = run(executor, policy, input_dtype)
    for b in BACKENDS:
        o = outputs_of(result, b)
        assert o.logits.dtype == np.float16 and o.output.dtype == np.float16, (b, o.logits.dtype)
    assert result.verdict.findings == [], [f.to_json() for f in result.verdict.findings]
    for b in BACKENDS[1:]:  # judged as float16, with float16's tolerances
        got = compare(result.outcomes["tensorflow"].logits, result.outcomes[b].logits)
        assert got["dtype"] == "float16", b
        assert (got["tolerance"]["rtol"], got["tolerance"]["atol"]) == TOLERANCES["float16"]
        assert got["score"] <= 1.0, (b, got)


def test_float16_weights_in_their_dtype_give_the_same_outputs(executor):
    """Weights handed over as float16 arrays (audee.cases.weights with the variables' dtype)
    round as float32 ones do inside each backend: the outputs are the same bits."""
    base = run(executor, "float16", "float16")
    spec = dtype_spec("float16", "float16")
    shapes = executor.shapes(spec)
    halves = {k: [(role, shape, "float16") for role, shape in v] for k, v in shapes.items()}
    weights = init_weights(halves, 0)
    assert all(a.dtype == np.float16 for arrs in weights.values() for a in arrs)
    again = executor.run(TestCase("dt-float16-halves", spec, weights, inputs("float16")))
    assert again.verdict.findings == []
    for b in BACKENDS:
        np.testing.assert_array_equal(outputs_of(again, b).logits, outputs_of(base, b).logits, err_msg=b)


# ---- bfloat16 and mixed_bfloat16 ------------------------------------------------------------------
@pytest.mark.parametrize("policy", ["bfloat16", "mixed_bfloat16"])
@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_bfloat16_models_run_in_bfloat16(executor, policy, backend):
    result = run(executor, policy)
    o = outputs_of(result, backend)
    assert str(o.logits.dtype) == "bfloat16" and str(o.output.dtype) == "bfloat16"
    if backend != "tensorflow":
        got = compare(result.outcomes["tensorflow"].logits, o.logits)
        assert got["dtype"] == "bfloat16"
        assert (got["tolerance"]["rtol"], got["tolerance"]["atol"]) == TOLERANCES["bfloat16"]
        assert got["score"] <= 1.0, got


@pytest.mark.parametrize("policy", ["bfloat16", "mixed_bfloat16"])
def test_onnxruntime_refuses_bfloat16_at_convert_naming_tf2onnx(executor, policy):
    """A documented limitation: the refusal is a clean convert-phase error, never a
    weights- or run-phase one, and the only crash finding is onnxruntime's."""
    result = run(executor, policy)
    failure = result.outcomes["onnxruntime"].failure
    assert failure is not None and failure.kind == "error" and failure.phase == "convert", failure
    assert TF2ONNX_BF16 in failure.message and "\n" not in failure.message
    crashes = [f for f in result.verdict.findings if f.kind in (Kind.DIVERGENT_ACCEPTANCE, Kind.HARD_CRASH)]
    assert all("onnxruntime" in f.backends for f in crashes), [f.to_json() for f in crashes]


def test_bfloat16_compare_uses_the_lowest_precision():
    a = np.array([[1.0, 2.0]], np.float32)
    b = a.astype(ml_dtypes.bfloat16)
    assert compare(a, b)["dtype"] == "bfloat16" and compare(a.astype(np.float16), b)["dtype"] == "bfloat16"


# ---- audee.cases.weights in each variable's dtype (no framework) -----------------------------------------
def test_weights_take_each_variables_dtype_rounded_from_float32():
    plain = {"conv": [("kernel", (3, 3, 2, 3)), ("bias", (3,))], "bn": [("gamma", (3,)), ("moving_variance", (3,))]}
    typed = {"conv": [("kernel", (3, 3, 2, 3), "float16"), ("bias", (3,), "float16")],
             "bn": [("gamma", (3,), "bfloat16"), ("moving_variance", (3,), "float32")]}
    f32, got = init_weights(plain, 7), init_weights(typed, 7)
    assert [str(a.dtype) for a in got["conv"] + got["bn"]] == ["float16", "float16", "bfloat16", "float32"]
    for name in plain:
        for x, y in zip(f32[name], got[name]):
            assert x.dtype == np.float32
            np.testing.assert_array_equal(y, x.astype(y.dtype))   # the same draw, rounded once
    # kept (seed) weights are rounded into the variant's dtype; a reshaped array is drawn fresh
    kept = adapt_weights(f32, {**typed, "conv": [("kernel", (1, 1, 2, 3), "float16"), ("bias", (3,), "float16")]}, 7)
    np.testing.assert_array_equal(kept["conv"][1], f32["conv"][1].astype(np.float16))
    assert kept["conv"][0].shape == (1, 1, 2, 3) and kept["conv"][0].dtype == np.float16
    assert str(kept["bn"][0].dtype) == "bfloat16" and kept["bn"][1] is f32["bn"][1]


def test_case_files_carry_bfloat16_arrays_widened_exactly():
    from audee.store.casefile import encode, restricted_loads

    a = np.array([1.5, -2.25, 3e38], dtype=ml_dtypes.bfloat16)
    back = restricted_loads(encode({"id": "x", "outputs": {"torch": {"logits": a}}, "weights": {"d": [a]}}))
    for got in (back["outputs"]["torch"]["logits"], back["weights"]["d"][0]):
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.astype(ml_dtypes.bfloat16), a)
