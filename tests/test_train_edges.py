"""The training phase at the edges, on the real frameworks: special inputs in training
steps, and a ``train_nan`` pinned on the layer whose backward pass makes the non-finite
gradient.  The NaN is a real one: Keras 3.15.1's ``UnitNormalization`` (``ops.normalize``,
order 2) clamps ``rsqrt(sum(x**2))``'s output, not its input, so an all-zero row's gradient
differentiates ``rsqrt(0) = inf`` times 0: NaN on PyTorch and JAX, finite on TensorFlow
(keras-team/keras#23075)."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.case import Kind, TestCase
from audee.spec import ModelSpec
from audee.train.run import TrainExecutor

KERAS = ["tensorflow", "torch", "jax"]

#: a weighted layer, the weightless normalization, a weighted head: the NaN made by the
#: normalization's backward pass reaches ``proj``'s kernel gradient first
UNIT = {"name": "unit", "inputs": [{"name": "x", "shape": [8]}],
        "layers": [{"name": "proj", "api": "Dense", "params": {"units": 6, "use_bias": False}, "inputs": ["x"]},
                   {"name": "norm", "api": "UnitNormalization", "params": {}, "inputs": ["proj"]},
                   {"name": "out", "api": "Dense", "params": {"units": 3}, "inputs": ["norm"]}],
        "output": "out"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends(",".join(KERAS)), tmp_path_factory.mktemp("logs")) as p:
        p.start_or_fail()
        yield p


def _trainer(pool, **kw) -> TrainExecutor:
    return TrainExecutor(pool, losses={"mean_squared_error": 1}, optimizers={"sgd": 1}, **kw)


def _unit_case(ex: TrainExecutor) -> TestCase:
    s = ModelSpec.from_json(UNIT)
    x = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
    x[3] = 0.0   # an all-zero row: proj (no bias) passes it on, the normalization sees a zero norm
    case = TestCase("unit", s, {}, {"x": x})
    ex.complete_weights(case, 5)
    return case


def test_a_zero_row_gradient_nan_made_by_a_weightless_layer_is_pinned_on_that_layer(pool):
    ex = _trainer(pool)
    result = ex.run(_unit_case(ex))
    nan = [f for f in result.verdict.findings if f.kind == Kind.TRAIN_NAN]
    assert nan, result.verdict.to_json()
    d = nan[0].detail
    assert "grad:proj/0" in d.differ and d.finite_backends == ["tensorflow"], d
    assert d.backward_layer == "norm" and d.layer == "norm", d    # not proj, whose kernel the NaN reaches first
    assert d.backward.get("proj") == "accumulated" and d.backward["norm"] == "blamed", d.backward
