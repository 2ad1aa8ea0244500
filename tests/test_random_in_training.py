"""A layer random in training, called with training=True, on real frameworks: each framework
draws its own masks, so its values are left out (the case records why) and what each backend
accepts and declares is judged: CutMix under bfloat16 refused by torch is a divergent
acceptance (findings row 118), Dropout's differing masks are no finding."""
from __future__ import annotations

import numpy as np
import pytest

from audee.apis import load_api_configs
from audee.apis.call_args import random_values
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.cases.spec import ModelSpec
from audee.engine.execute import Executor
from audee.mutation.apilevel import generate_case


def _spec(api: str, params: dict, shape: list[int], training: bool | None = True) -> ModelSpec:
    call = {} if training is None else {"call": {"training": training}}
    return ModelSpec.from_json({"name": api.lower(), "inputs": [{"name": "x", "shape": shape}],
                                "layers": [{"name": "t", "api": api, "params": params, "inputs": ["x"], **call}],
                                "output": "t"})


def test_values_are_random_only_for_a_random_layer_called_in_training():
    assert "Dropout" in random_values(_spec("Dropout", {"rate": 0.5}, [4]).layers)
    assert random_values(_spec("Dropout", {"rate": 0.0}, [4]).layers) is None        # no mask drawn
    assert random_values(_spec("Dropout", {"rate": 0.5}, [4], training=False).layers) is None
    assert random_values(_spec("Dropout", {"rate": 0.5}, [4], training=None).layers) is None   # inference
    assert "CutMix" in random_values(_spec("CutMix", {}, [8, 8, 3]).layers)
    apis = load_api_configs()   # a layer that computes in training only is always called so
    assert all(generate_case("CutMix", apis, 5, i).spec.layers[-1].call == {"training": True} for i in range(4))


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends("jax,torch"), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


def _run(pool: Pool, spec: ModelSpec, x: np.ndarray):
    ex = Executor(pool)
    case = TestCase(spec.name, spec, {}, {"x": x})
    ex.complete_weights(case, 1)
    return ex.run(case)


def test_differing_dropout_masks_are_no_finding_and_the_row_says_why(pool):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    result = _run(pool, _spec("Dropout", {"rate": 0.5}, [64]), x)
    jax, torch = (np.asarray(result.outcomes[b].logits) for b in ("jax", "torch"))
    assert not np.allclose(jax, torch)                      # each framework drew its own mask
    assert result.verdict.findings == [] and result.verdict.status == "pass"
    assert result.undefined == ["values: Dropout draws a random mask or noise in training (rate=0.5)"]
    from audee.fuzz import result_row

    assert result_row(result, {}).undefined == result.undefined


def test_a_policy_one_backend_refuses_in_training_is_a_divergent_acceptance(pool):
    x = np.random.default_rng(1).uniform(0, 255, (4, 8, 8, 3)).astype(np.float32)
    result = _run(pool, _spec("CutMix", {"dtype": "bfloat16", "seed": 1}, [8, 8, 3]), x)
    kinds = {f.kind for f in result.verdict.findings}
    assert kinds == {Kind.DIVERGENT_ACCEPTANCE}, result.verdict.findings
    (f,) = result.verdict.findings
    assert f.backends == ["torch"] and "not implemented for 'BFloat16'" in f.detail.errors["torch"].message
    assert result.outcomes["jax"].ok and result.undefined


def test_a_channels_first_image_every_backend_refuses_where_channels_last_runs_is_an_equivalence_finding(pool):
    """The image_channels rule, by acceptance: RandomColorJitter built its saturation step
    without its data_format (findings row 127), so channels_first images are refused by every
    backend alike (a consistent rejection, no cross-backend finding) while the same images
    channels_last run: each backend's original is the one rejected.  RandomFlip runs both ways:
    no finding, though its two models draw different flips."""
    x = np.random.default_rng(2).uniform(0, 255, (4, 3, 8, 8)).astype(np.float32)
    jitter = _spec("RandomColorJitter", {"saturation_factor": [0.2, 0.8], "data_format": "channels_first"}, [3, 8, 8])
    case = TestCase("jitter", jitter, {}, {"x": x})
    result = Executor(pool, equivalence=["image_channels"]).run(case)
    assert not any(o.ok for o in result.outcomes.values())
    eq = [f for f in result.verdict.findings if f.kind == Kind.EQUIVALENCE]
    assert sorted(b for f in eq for b in f.backends) == ["jax", "torch"], result.verdict.findings
    assert {(f.detail.reason, f.detail.layer) for f in eq} == {("original_rejected", "t")}
    assert result.equivalence == {"image_channels": "fail"}
    flip = Executor(pool, equivalence=["image_channels"]).run(
        TestCase("flip", _spec("RandomFlip", {"data_format": "channels_first"}, [3, 8, 8]), {}, {"x": x}))
    assert flip.verdict.findings == [] and flip.equivalence == {"image_channels": "pass"}


def test_a_layer_keras_declares_uncompilable_runs_uncompiled_on_jax(pool):
    """RandomCrop slices at a traced offset and says so (``supports_jit = False``), so Keras'
    predict and fit run a model holding it without jax.jit: the jax backend does too, and the
    crop in training is no refusal of JAX's (under jax.jit it raised "Slice entries must be
    static integers", which rng 3015 announced as a new bug)."""
    x = np.random.default_rng(3).uniform(0, 255, (4, 7, 16, 3)).astype(np.float32)
    result = _run(pool, _spec("RandomCrop", {"height": 4, "width": 12, "seed": 1}, [7, 16, 3]), x)
    assert result.outcomes["jax"].ok and result.outcomes["torch"].ok, result.verdict.findings
    assert np.shape(result.outcomes["jax"].logits) == (4, 4, 12, 3)
    assert not any(f.kind == Kind.DIVERGENT_ACCEPTANCE for f in result.verdict.findings)
