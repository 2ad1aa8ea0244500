"""The Keras -> tf2onnx -> onnxruntime bridge computes the model it was given.

A layer holding constants as plain tensors (``Normalization(mean=..., variance=...)``) is
captured by the traced function; tf2onnx 1.17 turns those captures into graph inputs
nobody feeds, which audee once reported as a divergent acceptance of onnxruntime (a false
alarm of the harness, found when the repro script did not reproduce it alone).
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.engine.execute import Executor
from audee.cases.spec import ModelSpec


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> Executor:
    with Pool(parse_backends("tensorflow,onnxruntime"), tmp_path_factory.mktemp("logs"), timeout=300) as pool:
        assert pool.start() == {}
        yield Executor(pool)


@pytest.mark.parametrize("invert", [False, True])
def test_captured_constants_are_baked_into_the_graph(executor, invert):
    spec = ModelSpec.from_json({
        "name": f"norm_{invert}",
        "inputs": [{"name": "x0", "shape": [3], "range": [-2, 2]}],
        "layers": [{"name": "norm", "api": "Normalization",
                    "params": {"mean": [1.0, -2.0, 0.5], "variance": [4.0, 9.0, 0.25], "invert": invert},
                    "inputs": ["x0"]}],
        "output": "norm", "logits": "norm"})
    x = np.random.default_rng(0).uniform(-2, 2, (4, 3)).astype(np.float32)
    case = TestCase(f"norm-{invert}", spec, {}, {"x0": x})
    executor.complete_weights(case, weight_seed=0)
    result = executor.run(case)
    onnx, tf = result.outcomes["onnxruntime"], result.outcomes["tensorflow"]
    assert onnx.ok, onnx.failure
    assert result.verdict.findings == [], [f.to_json() for f in result.verdict.findings]
    mean, var = np.array([1.0, -2.0, 0.5]), np.array([4.0, 9.0, 0.25])
    want = x * np.sqrt(var) + mean if invert else (x - mean) / np.sqrt(var)
    np.testing.assert_allclose(onnx.logits, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tf.logits, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("failing_pass", [False, True])
def test_conversion_without_graph_copies_is_tf2onnx_own(failing_pass):
    """audee converts without tf2onnx's graph copy before each optimizer pass (a third of
    the conversion time); the graph and its outputs must be the default conversion's, also
    when a pass raises (the default skips it: so must audee)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    args = ["--failing-pass"] if failing_pass else []
    out = subprocess.run([sys.executable, "-m", "tests.tf2onnx_copies", *args], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parent.parent, timeout=600,
                         env={k: v for k, v in os.environ.items() if k != "TF2ONNX_CATCH_ERRORS"})
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [r["model"] for r in rows] == ["tiny", "bn_mlp"]
    for r in rows:
        assert r["audee"] == r["default"], r["model"]
        assert r["env_left"] is None  # the switch is put back as it was
    if failing_pass:
        assert "Failed to apply always_fails" in out.stderr  # the default's warning: the pass really ran


def _one_layer_case(name: str, layer: dict, inputs: dict, x: np.ndarray) -> TestCase:
    spec = ModelSpec.from_json({"name": name, "inputs": [inputs],
                                "layers": [{"name": "t_layer", "inputs": [inputs["name"]], **layer}],
                                "output": "t_layer", "logits": "t_layer"})
    return TestCase(name, spec, {}, {inputs["name"]: x})


def test_a_layer_declaring_another_dtype_than_it_computes_converts(executor):
    """CategoryEncoding(count) under mixed_float16 declares a float16 output (Keras' symbolic
    dtype) and computes float32 on every backend, in the traced TensorFlow graph too, which
    tf2onnx copies faithfully.  The converted graph computes the model: it converts and runs,
    equal to TensorFlow (it was once refused as a tf2onnx dtype map that does not exist)."""
    x = np.random.default_rng(0).integers(0, 4, (5, 3)).astype(np.int32)
    case = _one_layer_case("ce", {"api": "CategoryEncoding",
                                  "params": {"num_tokens": 4, "output_mode": "count", "dtype": "mixed_float16"}},
                           {"name": "x0", "shape": [3], "dtype": "int32", "range": [0, 4]}, x)
    executor.complete_weights(case, weight_seed=0)
    result = executor.run(case)
    onnx, tf = result.outcomes["onnxruntime"], result.outcomes["tensorflow"]
    assert onnx.ok, onnx.failure
    np.testing.assert_array_equal(onnx.logits, tf.logits)
    np.testing.assert_array_equal(onnx.logits, np.stack([np.bincount(r, minlength=4) for r in x]))


def test_a_bfloat16_model_is_still_refused_in_the_known_entrys_words(executor):
    """tf2onnx writes TensorFlow's bfloat16 as ONNX float16: the graph of a bfloat16 Dense is
    refused at convert, and the refusal names that mapping, which the known entry matches."""
    from audee.fuzz import result_row
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import Signature

    x = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    case = _one_layer_case("bf16", {"api": "Dense", "params": {"units": 2, "dtype": "bfloat16"}},
                           {"name": "x0", "shape": [3]}, x)
    executor.complete_weights(case, weight_seed=0)
    result = executor.run(case)
    failure = result.outcomes["onnxruntime"].failure
    assert failure is not None and failure.phase == "convert"
    assert "tf2onnx maps TensorFlow's bfloat16 to ONNX float16" in failure.message, failure.message
    row = result_row(result, {}, meta={"api": "Dense"})
    (sig,) = [Signature.from_json(s) for s in row.signatures if "onnxruntime" in s["backends"]]
    assert match_known(sig, load_known_issues()).id == "tf2onnx-bfloat16-as-float16"
