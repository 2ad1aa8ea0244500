"""A scalar weight (Attention's ``concat_score_weight``, shape ``()``) reaches every backend
with its own shape: numpy's ``ascontiguousarray`` makes 0-d arrays 1-d, which made
PyTorch's direct weight copy fail ("output with shape [] doesn't match the broadcast shape
[1]") -- a harness fault the api-cpu campaign's root-cause classes showed."""
from __future__ import annotations

import numpy as np

from audee.cases.spec import ModelSpec, contiguous


def test_contiguous_keeps_the_shape_of_a_scalar():
    a = np.float32(2.5) * np.ones((), np.float32)
    assert np.ascontiguousarray(a).shape == (1,) and contiguous(a).shape == ()
    t = np.arange(6, dtype=np.float32).reshape(2, 3).T
    assert contiguous(t).flags.c_contiguous and contiguous(t).shape == (3, 2)


def test_a_scalar_weight_runs_on_the_backends_that_copy_weights_directly(tmp_path):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({
        "name": "att", "inputs": [{"name": "q", "shape": [4, 6]}, {"name": "v", "shape": [4, 6]}],
        "layers": [{"name": "att", "api": "Attention", "params": {"score_mode": "concat", "use_scale": False},
                    "inputs": ["q", "v"]},
                   {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["att"]}],
        "output": "flat", "logits": "flat"})
    rng = np.random.default_rng(0)
    x = {n: rng.normal(size=(4, 4, 6)).astype(np.float32) for n in ("q", "v")}
    with Pool(parse_backends("torch,onnxruntime"), tmp_path, timeout=300) as pool:  # the two direct weight paths
        assert pool.start() == {}
        ex = Executor(pool)
        case = TestCase("att", spec, {}, x)
        ex.complete_weights(case, weight_seed=0)
        assert [w.shape for w in case.weights["att"]] == [()]
        result = ex.run(case)
    assert all(o.ok for o in result.outcomes.values()), {b: o.failure for b, o in result.outcomes.items()}
    assert not result.verdict.failed, result.verdict.to_json()
