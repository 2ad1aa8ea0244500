"""The conditioning probe moves a reduced-precision layer's input both ways
(audee.oracle.deviation.PROBE_SIGNS).

Rounding moves a value either way.  One random draw can carry every value near a threshold
away from it, and the layer then looks well conditioned where its mirror image crosses the
threshold.  The api-cpu campaign, rng 2962, had such a case: a mixed_float16 GRU whose hard_shrink
saw a pre-activation 0.0002 from -0.5, and four frameworks split two and two by their order of
float16 adds.  The draw scored 1.6x tolerance and its mirror 26x, where the frameworks were 27x
apart.

The end-to-end test runs the probe of the engine (``Executor._self_score``) on real torch and
JAX.  Its layer is a float16 hard_shrink with every input value one ulp from 0.5, on the side
the draw moves away from.  A float32 layer keeps the single draw: its thresholds are rarely
within rounding, and a second run of a backend's own unstable kernel (a cancelling variance)
would be read as the layer's conditioning.
"""
from __future__ import annotations

import numpy as np

import pytest

from audee.oracle.deviation import DTYPE_ROUNDING, PERTURBATION, PROBE_SIGNS, perturbed

ULPS = {"float16": 2.0 ** -11, "float32": 2.0 ** -24}   # one ulp at 0.5
SIZES = {"float16": DTYPE_ROUNDING["float16"], "float32": PERTURBATION}   # the probe's move


def _hard_shrink(v: np.ndarray) -> np.ndarray:
    return np.where(np.abs(v) > 0.5, v, 0).astype(v.dtype)


def _on_the_threshold(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Values one ``dtype`` ulp from 0.5, each on the side the probe's own draw (seed 0) moves
    away from (float32 arrays: the layer casts them)."""
    u = np.random.default_rng(0).uniform(-1.0, 1.0, shape)
    return (0.5 + np.sign(u) * ULPS[dtype]).astype(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_the_draw_misses_a_threshold_its_mirror_crosses(dtype):
    x = {"x": _on_the_threshold((2, 8), dtype)}
    moves = {sign: float(np.abs(_hard_shrink(perturbed(x, size=sign * SIZES[dtype])["x"].astype(dtype))
                                - _hard_shrink(x["x"])).max()) for sign in PROBE_SIGNS}
    assert moves[1.0] < 1e-2 and moves[-1.0] > 0.4, moves
    assert PROBE_SIGNS == (1.0, -1.0)


def test_a_float16_layer_on_a_threshold_is_ill_conditioned_on_real_frameworks(tmp_path):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({
        "name": "shrink", "inputs": [{"name": "x", "shape": [8]}],
        "layers": [{"name": f"act_{dtype}", "api": "Activation",
                    "params": {"activation": "hard_shrink", "dtype": dtype}, "inputs": ["x"]}
                   for dtype in ("float16", "float32")],
        "output": "act_float16", "logits": "act_float16"})
    scores = {}
    with Pool(parse_backends("torch,jax"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        ex = Executor(p)
        for dtype in ("float16", "float32"):
            x = {"x": _on_the_threshold((2, 8), dtype)}
            case = TestCase("shrink", spec, {}, x)
            replies = ex._run_alone(case, f"act_{dtype}", {}, x, ["torch", "jax"], given=True)
            assert np.array_equal(replies["torch"]["logits"], replies["jax"]["logits"])   # they agree...
            scores[dtype] = ex._self_score(case, f"act_{dtype}", {}, x, ["torch", "jax"], replies)
    # ...and the float16 layer turns two ulps of noise into a jump of 0.5: no evidence against
    # either; the float32 one is probed one way only, which this input was built to miss
    assert scores["float16"] > 10 and scores["float32"] < 1.0, scores
