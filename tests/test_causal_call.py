"""Attention layers called with ``use_causal_mask=True`` (API level, ``--call-causal``).

(a) a case's causal flag comes from a stream of its own: every other draw stays as it was, only
    layers whose call takes it get it, and the spec says so (a call argument, checked);
(b) the list of such layers is the installed Keras';
(c) on the real frameworks a causal Attention and MultiHeadAttention agree across the Keras
    backends and equal NumPy's masked attention, and the causal flag changes the result (the
    draw reaches the code path it names).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

from audee.apis import load_api_configs
from audee.apis.call_args import CAUSAL_LAYERS
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import TestCase
from audee.cases.spec import ModelSpec
from audee.core.errors import SpecError
from audee.engine.execute import Executor
from audee.mutation.apilevel import generate_case
from tests.helpers import installed_keras



def test_api_level_cases_draw_the_causal_flag_from_their_own_stream():
    apis = load_api_configs()
    for api in ("MultiHeadAttention", "Attention"):
        plain = [generate_case(api, apis, 0, i, invalid_prob=0.0) for i in range(6)]
        causal = [generate_case(api, apis, 0, i, invalid_prob=0.0, call_causal=1.0) for i in range(6)]
        for p, c in zip(plain, causal):
            layer = c.spec.layer(c.spec.output)
            assert layer.call.get("use_causal_mask") is True and c.meta["call"]["use_causal_mask"] is True
            assert any(m.param == "call.use_causal_mask" for m in c.mutations)
            assert c.spec.layer(c.spec.output).params == p.spec.layer(p.spec.output).params  # every other draw
            assert all((c.inputs[k] == p.inputs[k]).all() for k in p.inputs)
            ModelSpec.from_json(c.spec.to_json())                               # a valid spec
    some = [generate_case("GroupQueryAttention", apis, 0, i, invalid_prob=0.0, call_causal=0.3) for i in range(40)]
    assert 4 <= sum("use_causal_mask" in c.spec.layer(c.spec.output).call for c in some) <= 20
    dense = generate_case("Dense", apis, 0, 0, call_causal=1.0)                 # a call that takes no such flag
    assert all("use_causal_mask" not in ls.call for ls in dense.spec.layers)


@pytest.mark.parametrize("api, value, message", [
    ("Dense", True, "Dense's call takes no use_causal_mask argument"),
    ("Attention", 1, "expected true or false, got 1")])
def test_a_bad_causal_flag_is_one_line_naming_the_field(api, value, message):
    inputs = ["q", "v"] if api == "Attention" else ["q"]
    with pytest.raises(SpecError) as err:
        ModelSpec.from_json({"name": "m", "inputs": [{"name": "q", "shape": [3, 4]}, {"name": "v", "shape": [3, 4]}],
                             "layers": [{"name": "l", "api": api, "params": {"units": 2} if api == "Dense" else {},
                                         "inputs": inputs, "call": {"use_causal_mask": value}}], "output": "l"})
    assert message in str(err.value) and "use_causal_mask" in str(err.value)


@pytest.mark.slow
def test_the_causal_layer_list_is_the_installed_keras():
    assert installed_keras("causal_layers_from") == sorted(CAUSAL_LAYERS)


def _causal_attention(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Keras' dot-product Attention (no scale) with the causal mask, in float64."""
    scores = np.einsum("btd,bsd->bts", q.astype(np.float64), v.astype(np.float64))
    scores = np.where(np.tril(np.ones(scores.shape[1:], bool)), scores, -np.inf)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    return np.einsum("bts,bsd->btd", w / w.sum(-1, keepdims=True), v.astype(np.float64))


def test_a_causal_attention_agrees_on_every_keras_backend_and_with_numpy():
    rng = np.random.default_rng(0)
    q, v = rng.normal(size=(3, 5, 4)).astype(np.float32), rng.normal(size=(3, 5, 4)).astype(np.float32)
    layers = [{"name": "att", "api": "Attention", "params": {}, "inputs": ["q", "v"], "call": {"use_causal_mask": True}},
              {"name": "mha", "api": "MultiHeadAttention", "params": {"num_heads": 2, "key_dim": 3},
               "inputs": ["q", "v"], "call": {"use_causal_mask": True}},
              {"name": "cat", "api": "Concatenate", "params": {}, "inputs": ["att", "mha"]}]
    spec = ModelSpec.from_json({"name": "causal", "inputs": [{"name": "q", "shape": [5, 4]},
                                                              {"name": "v", "shape": [5, 4]}],
                                "layers": layers, "output": "cat"})
    with tempfile.TemporaryDirectory() as tmp, Pool(parse_backends("tensorflow,torch,jax"), Path(tmp)) as pool:
        pool.start_or_fail()
        ex = Executor(pool)
        case = TestCase("t", spec, {}, {"q": q, "v": v})
        ex.complete_weights(case, 0)
        result = ex.run(case)
        got = {b: o.output for b, o in result.outcomes.items()}
    assert not result.verdict.failed, [f.to_json() for f in result.verdict.findings]
    for b, out in got.items():
        assert np.abs(out[..., :4] - _causal_attention(q, v)).max() < 1e-5, b
    full = np.einsum("bts,bsd->btd", np.exp(np.einsum("btd,bsd->bts", q, v)) /
                     np.exp(np.einsum("btd,bsd->bts", q, v)).sum(-1, keepdims=True), v)
    assert np.abs(got["jax"][..., :4] - full).max() > 1e-2  # the flag reaches the causal path
