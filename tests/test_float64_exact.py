"""The float64 the reference reads is computed in float64.

Keras' ``backend.result_type`` maps float64 to float32 on every backend but TensorFlow, so a
float64 GroupNormalization on torch or JAX (x64) computes in float32 and casts back: a
float64 array of float32 rounding, which the reference took for the exact result and which
named TensorFlow, the one exactly right, the odd backend (api-cpu rng 3011).  An ``exact``
spec is built and run with that narrowing off; an answer that still holds float32 rounding
that a nudge below float32's resolution leaves as it was (TensorFlow's bilinear resize) is
not the reference; an exact computation's float32 numbers move, and stay."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.cases.spec import ModelSpec, weights_key
from audee.core.floats import float32_valued, nudged
from audee.engine.execute import Executor
from audee.equivalence.rules import widened
from audee.reference.run import Reference, Wide, reference_refs, widened_call


def _spec(name: str, layers: list[dict], shape: list[int]) -> ModelSpec:
    return ModelSpec.from_json({"name": name, "inputs": [{"name": "x", "shape": shape}], "layers": layers,
                                "output": layers[-1]["name"]})


NORMS = _spec("norms", [
    {"name": "gn", "api": "GroupNormalization", "params": {"groups": 2}, "inputs": ["x"]},
    {"name": "bn", "api": "BatchNormalization", "params": {}, "inputs": ["x"]},
    {"name": "ln", "api": "LayerNormalization", "params": {}, "inputs": ["x"]},
], [6, 6, 4])
ONE_ELEMENT = _spec("one", [{"name": "gn", "api": "GroupNormalization", "params": {"groups": -1, "epsilon": 1e-12},
                             "inputs": ["x"]}], [1, 1, 4])
RESIZE = _spec("resize", [{"name": "r", "api": "Resizing", "params": {"height": 5, "width": 7}, "inputs": ["x"]}],
               [4, 4, 2])


def test_float32_rounding_in_a_float64_array_is_told_from_a_float64_result():
    x = np.random.default_rng(0).standard_normal(50)
    assert not float32_valued(x) and float32_valued(x.astype(np.float32).astype(np.float64))
    assert not float32_valued(np.array([1.0, -3.0, 0.0, np.nan]))      # integers: exact either way
    assert not float32_valued(x.astype(np.float32))                      # a float32 array says so itself
    # a nudge a float64 computation sees and a float32 cast takes away
    widened32 = x.astype(np.float32).astype(np.float64)
    moved = nudged({"x": widened32, "ids": np.arange(3)})
    assert not np.array_equal(moved["x"], widened32) and np.array_equal(moved["ids"], np.arange(3))
    assert np.array_equal(moved["x"].astype(np.float32), widened32.astype(np.float32))
    assert ModelSpec.from_json({**NORMS.to_json(), "exact": True}).exact and "exact" not in NORMS.to_json()
    assert widened_call({"op": "mean", "dtypes": {"x": "float32"}}, {"x": x.astype(np.float32)})[0]["exact"]


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    refs = parse_backends("tensorflow,torch")
    with Pool(refs, tmp_path_factory.mktemp("logs"), timeout=300, reference=reference_refs(refs)) as p:
        assert p.start() == {}
        yield p


def _case(spec: ModelSpec, pool: Pool) -> TestCase:
    ex = Executor(pool)
    rng = np.random.default_rng(3)
    case = TestCase(spec.name, spec, {}, {"x": rng.standard_normal((4, *spec.inputs[0].shape)).astype(np.float32)})
    ex.complete_weights(case, 5)
    return case


def test_the_reference_model_keeps_float64_where_keras_narrows_it_as_users_run_it(pool):
    case = _case(NORMS, pool)
    wide = Wide.of(case, "float64")
    assert wide.spec.exact
    as_users, _ = widened(case.spec, case.weights, "float64")
    for spec in (as_users, wide.spec):
        got = pool.run(spec, wide.weights, weights_key(wide.weights), wide.inputs, layers=True)
        tf, torch = got["tensorflow"]["layers"], got["torch"]["layers"]
        for name in ("gn", "bn", "ln"):
            assert torch[name].dtype == np.float64 and not float32_valued(tf[name])
            # as users run it, torch's float64 normalization is float32 rounding, 1e-7 off
            # TensorFlow's; the reference's is float64, within float64 rounding of it
            assert float32_valued(torch[name]) == (not spec.exact), (name, spec.exact)
            err = float(np.max(np.abs(torch[name] - tf[name])))
            assert (err < 1e-12) == spec.exact, (name, err)


def test_an_answer_holding_float32_rounding_is_not_the_reference(pool):
    case = _case(RESIZE, pool)
    rec, wide, tensors = Reference().run(Executor(pool), case)
    # TensorFlow's bilinear resize computes float32 whatever the policy; torch's is float64
    assert "computed in float32" in rec.refused["tensorflow"] and rec.backend == "torch"
    assert not float32_valued(tensors["logits"])


def test_an_exact_answer_of_float32_numbers_stays_the_reference(pool):
    """Groups of one element: the output is beta, a float32 number widened, whatever the
    input; the nudge moves the weights too, so TensorFlow's exact answer moves and stays."""
    case = _case(ONE_ELEMENT, pool)
    rec, wide, tensors = Reference().run(Executor(pool), case)
    assert rec.backend == "tensorflow" and not rec.refused, rec.refused
    assert float32_valued(tensors["logits"]) and np.array_equal(tensors["logits"][0, 0, 0], wide.weights["gn"][1])


def test_the_weight_level_searchs_reference_lane_is_exact_too(pool):
    """A weight-level precision search runs its reference lane with ``run_many`` (one request
    per generation): that path keeps float64 as float64 as a ``run`` does."""
    case = _case(NORMS, pool)
    wide = Wide.of(case, "float64")
    items = [{"weights_key": weights_key(wide.weights), "weights": wide.weights, "inputs": wide.inputs, "layers": True}]
    (reply,) = pool.call("torch", "run_many", spec=wide.spec.to_json(), key=wide.spec.key(), items=items)
    tf = pool.run(wide.spec, wide.weights, weights_key(wide.weights), wide.inputs, layers=True)["tensorflow"]["layers"]
    for name in ("gn", "bn", "ln"):
        assert not float32_valued(reply["layers"][name]), name
        assert float(np.max(np.abs(reply["layers"][name] - tf[name]))) < 1e-12, name
