"""Network-level mutation: deterministic per variant, respects fixed parameters, keeps
invalid draws, redraws unbuildable valid ones."""
from __future__ import annotations

import json

import numpy as np

from audee.apis import load_api_configs
from audee.mutation import generate_variants, mutate_spec
from audee.cases.spec import ModelSpec
from tests.helpers import tiny_cnn

APIS = load_api_configs()


def _dump(variants):
    return [json.dumps(v.spec.to_json(), sort_keys=True) for v in variants]


def test_same_seed_same_variants_and_variant_i_is_independent():
    a = list(generate_variants(tiny_cnn(), APIS, n=6, rng_seed=3))
    b = list(generate_variants(tiny_cnn(), APIS, n=6, rng_seed=3))
    c = list(generate_variants(tiny_cnn(), APIS, n=6, rng_seed=4))
    assert _dump(a) == _dump(b) and _dump(a) != _dump(c)
    alone = list(generate_variants(tiny_cnn(), APIS, n=1, rng_seed=3, start=4))
    assert _dump(alone) == _dump(a[4:5])


def test_variants_change_something_keep_fixed_params_and_round_trip():
    for v in generate_variants(tiny_cnn(), APIS, n=30, rng_seed=0):
        assert v.mutations
        assert v.spec.layer("logits").params["units"] == 5
        assert ModelSpec.from_json(json.loads(json.dumps(v.spec.to_json()))).to_json() == v.spec.to_json()
        assert v.spec.meta["mutations"] == [m.to_json() for m in v.mutations]


def test_invalid_probability_controls_crafty_values():
    never = list(generate_variants(tiny_cnn(), APIS, n=30, rng_seed=1, invalid_prob=0.0))
    always = list(generate_variants(tiny_cnn(), APIS, n=30, rng_seed=1, invalid_prob=1.0))
    assert not any(v.invalid for v in never)
    assert all(v.invalid for v in always)
    assert all(sum(m.invalid for m in v.mutations) == 1 for v in always)  # exactly one value under test


def _ks(spec):
    ks = spec.layer("conv").params.get("kernel_size", 3)
    return max(ks) if isinstance(ks, list) else ks


def test_unbuildable_valid_variants_are_redrawn_invalid_ones_kept():
    def validate(spec):  # pretend no backend builds kernels above 3
        return "kernel too large" if _ks(spec) > 3 else None

    redrawn = kept = 0
    for i in range(40):
        v = mutate_spec(tiny_cnn(), APIS, np.random.default_rng([9, i]), invalid_prob=0.0, validate=validate,
                        max_redraws=20, index=i)
        assert _ks(v.spec) <= 3 or "build_error" in v.spec.meta
        redrawn += v.spec.meta["redraws"] > 0
    for i in range(40):
        v = mutate_spec(tiny_cnn(), APIS, np.random.default_rng([9, i]), invalid_prob=1.0,
                        validate=lambda s: "always fails", index=i)
        if v.invalid:  # the draw carrying an invalid value was never validated nor redrawn
            assert "build_error" not in v.spec.meta
            kept += 1
    assert redrawn > 0 and kept > 0


def test_a_redrawn_axis_that_names_one_axis_twice_at_its_layer_is_marked_outside_the_contract():
    """A LayerNormalization on a rank-2 tensor redrawn to ``axis=[1, -1]`` (valid on rank 3):
    the variant's record marks the value invalid and why, and it is kept, not redrawn."""
    spec = ModelSpec.from_json({"name": "ln", "inputs": [{"name": "x", "shape": [6]}],
                                "layers": [{"name": "ln", "api": "LayerNormalization", "params": {}, "inputs": ["x"]},
                                           {"name": "logits", "api": "Dense", "params": {"units": 3},
                                            "inputs": ["ln"], "fixed": ["units"]}],
                                "output": "logits", "logits": "logits"})
    marked = clean = 0
    for i in range(60):
        v = mutate_spec(spec, APIS, np.random.default_rng([5, i]), invalid_prob=0.0, param_rate=1.0,
                        validate=lambda s: "always fails", max_redraws=2, index=i)
        axis = v.spec.layer("ln").params.get("axis")
        marks = [(m.param, m.why) for m in v.mutations if m.invalid]
        if axis == [1, -1]:
            assert marks == [("axis", "axis names one axis twice")] and "build_error" not in v.spec.meta
            assert {"why": "axis names one axis twice", "invalid": True}.items() <= \
                next(m for m in v.spec.meta["mutations"] if m["param"] == "axis").items()
            marked += 1
        else:
            assert marks == []
            clean += 1
    assert marked and clean
