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
