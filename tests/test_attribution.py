"""The one attribution rule (audee/oracle/attribution.py): which candidate layer deviates on
its own input and is well conditioned there.  The "backends" here are numpy computations of a
layer on synthetic arrays, judged with the deviation oracle's own ``compare`` and conditioned
with its own perturbation, as every diagnosis site does with framework outputs."""
from __future__ import annotations

import numpy as np
import pytest

from audee.oracle.attribution import ILL_CONDITIONED, IN_TOLERANCE, Alone, attribute, settle
from audee.oracle.deviation import CONDITIONING_FACTOR, PERTURBATION, compare, perturbed
from audee.records.findings import OwnScore

RNG = np.random.default_rng(0)
X = RNG.normal(size=(4, 16)).astype(np.float32)


def _scaled(x: np.ndarray) -> np.ndarray:
    return x * np.float32(3.0)


def _step(x: np.ndarray) -> np.ndarray:
    """A threshold sitting on its input: rounding noise flips it (ill-conditioned)."""
    return (x >= X).astype(np.float32) * np.float32(5.0)


def _judge(layer, faulty, x: np.ndarray = X) -> Alone:
    """``layer`` on backend a, ``faulty`` on backend b, both fed ``x``: their score alone and
    the conditioning (either backend's output moved by rounding noise on its input)."""
    a, b = layer(x), faulty(x)
    own = compare(a, b)
    assert own is not None

    def self_score() -> float:
        moved = perturbed({"x": x}, size=PERTURBATION)["x"]
        return max(compare(a, layer(moved))["score"], compare(b, faulty(moved))["score"])

    return Alone(OwnScore(score=own["score"], max_abs=own["max_abs"], max_rel=own["max_rel"]), self_score=self_score)


def _never() -> float:
    raise AssertionError("a layer within tolerance alone is not conditioned")


def test_well_conditioned_layer_out_of_tolerance_is_blamed_with_its_self_score():
    att = attribute(["d"], ["d"], lambda _: _judge(_scaled, lambda x: _scaled(x) * np.float32(1.01)))
    assert att.blamed == ["d"] and att.ill_conditioned == [] and not att.accumulated
    entry = att.own["d"]
    assert entry.score > 1.0 and entry.self_score is not None and entry.score > CONDITIONING_FACTOR * entry.self_score


def test_ill_conditioned_layer_is_listed_not_blamed_and_the_difference_is_accumulated():
    # backend b's threshold differs from a's by rounding: out of tolerance alone, but the
    # layer itself turns rounding noise on its input into a change as large
    att = attribute(["t"], ["t"], lambda _: _judge(_step, lambda x: ((x * np.float32(1 + 2 ** -21)) >= X)
                                                    .astype(np.float32) * np.float32(5.0)))
    assert att.own["t"].score > 1.0
    assert att.blamed == [] and att.ill_conditioned == ["t"] and att.reasons == {"t": ILL_CONDITIONED}
    assert att.accumulated


def test_within_tolerance_is_cleared_without_asking_the_conditioning():
    att = attribute(["d"], ["d"], lambda _: Alone(OwnScore(score=0.5), self_score=_never))
    assert att.reasons == {"d": IN_TOLERANCE} and att.own["d"].self_score is None and att.accumulated


def test_the_conditioning_factor_is_strict_and_no_conditioning_is_no_evidence():
    assert settle(Alone(OwnScore(score=10.0), self_score=lambda: 1.0))[0] == "ill_conditioned"
    assert settle(Alone(OwnScore(score=10.5), self_score=lambda: 1.0))[0] == "blamed"
    assert settle(Alone(OwnScore(score=1.0), self_score=lambda: 0.0))[0] == "cleared"
    assert settle(Alone(OwnScore(score=1e9)))[0] == "ill_conditioned"   # could not be moved: inf


def test_candidates_are_judged_in_model_order_and_an_unjudged_one_keeps_the_failure():
    seen: list[str] = []
    scores = {"c": (5.0, 0.01), "a": (5.0, 1.0), "b": (0.2, 0.0)}

    def run(name: str) -> Alone | None:
        seen.append(name)
        if name == "x":
            return None   # cannot stand alone
        score, self_score = scores[name]
        return Alone(OwnScore(score=score), self_score=lambda: self_score)

    own: dict[str, OwnScore] = {}
    att = attribute(["c", "x", "a", "b"], ["a", "b", "c", "x"], run, own=own)
    assert seen == ["a", "b", "c", "x"]
    assert att.own is own and list(own) == ["a", "b", "c"]
    assert att.blamed == ["c"] and att.ill_conditioned == ["a"]
    assert (att.judged, att.checked) == (3, 4)
    att = attribute(["a", "x"], ["a", "x"], run)
    assert not att.blamed and not att.accumulated   # a layer not judged: no evidence either way


@pytest.mark.parametrize("reason, verdict", [(None, "blamed"), ("ill_conditioned", "ill_conditioned"),
                                             ("overflow", "cleared"), ("accumulated", "cleared")])
def test_the_pattern_rule_blames_only_a_difference_that_stands(reason, verdict):
    att = attribute(["n"], ["n"], lambda _: Alone(OwnScore(score=float("inf")), pattern=lambda: reason))
    assert (att.blamed == ["n"]) == (verdict == "blamed")
    assert (att.ill_conditioned == ["n"]) == (verdict == "ill_conditioned")
    assert att.reasons.get("n") == reason
    assert att.own["n"].self_score is None


def test_a_layer_is_fed_alone_from_one_run_and_cut_out_with_its_own_weights():
    from audee.cases.spec import layer_feed, one_layer_model
    from tests.helpers import tiny_cnn, tiny_inputs

    spec, inputs = tiny_cnn(), tiny_inputs(2)
    conv = np.zeros((2, 10, 10, 4), np.float32)
    assert layer_feed(spec, "pool", {}, inputs) is None            # the run did not return conv
    fed = layer_feed(spec, "pool", {"conv": conv}, inputs)
    assert list(fed) == ["conv"] and fed["conv"] is conv
    assert list(layer_feed(spec, "conv", {"conv": conv}, inputs)) == ["image"]   # a model input as given
    weights = {"conv": [np.zeros((3, 3, 1, 4), np.float32), np.zeros(4, np.float32)], "logits": []}
    spec1, w1 = one_layer_model(spec, weights, "conv", {"image": inputs["image"]})
    assert spec1.output == "conv" and [i.name for i in spec1.inputs] == ["image"] and list(w1) == ["conv"]
    assert one_layer_model(spec, weights, "pool", {}) is None      # cannot stand alone: not judged alone


def test_the_rounding_probe_moves_the_layers_float_weights_and_leaves_integer_ones():
    from audee.oracle.deviation import perturbed_weights

    w = {"d": [np.ones((3, 4), np.float32), np.arange(3)], "e": [np.full(5, 2.0, np.float16)]}
    moved = perturbed_weights(w, "d", size=PERTURBATION)
    assert list(moved) == ["d"]                                            # the probed layer's own only
    assert moved["d"][0].dtype == np.float32 and (moved["d"][0] != 1.0).any()
    assert np.abs(moved["d"][0] - 1.0).max() <= 2 * PERTURBATION
    assert moved["d"][1].tolist() == [0, 1, 2]
    assert perturbed_weights(w, "e", size=PERTURBATION)["e"][0].dtype == np.float16
    assert perturbed_weights(w, "none", size=PERTURBATION) == {}          # a layer without weights
    again = perturbed_weights(w, "d", size=PERTURBATION)                   # deterministic
    assert all((a == b).all() for a, b in zip(moved["d"], again["d"]))


def _recurrence_case(steps: int = 16000):
    """A linear SimpleRNN of one unit with kernel, recurrent kernel and bias 1 over zero inputs:
    its state counts the steps, exactly in float32.  Zero inputs stay zero under a relative
    nudge, so only the layer's weights can show how its own rounding adds up."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "count", "inputs": [{"name": "x", "shape": [steps, 1], "range": [0, 1]}],
        "layers": [{"name": "r", "api": "SimpleRNN", "params": {"units": 1, "activation": "linear"}, "inputs": ["x"]}],
        "output": "r", "logits": "r"})
    one = np.array([[1.0]], np.float32)
    return TestCase("count", spec, {"r": [one, one, np.array([1.0], np.float32)]},
                    {"x": np.zeros((2, steps, 1), np.float32)})


@pytest.mark.parametrize("plugin, kind", [("tests.plugins:RoundedRecurrenceJax", "deviation_accumulated"),
                                          ("tests.plugins:FaultyRecurrenceJax", "deviation")])
def test_a_recurrence_adding_up_rounding_is_ill_conditioned_and_a_fault_is_blamed(plugin, kind, tmp_path):
    """Two ulps a step over 16000 steps (:class:`tests.plugins.RoundedRecurrenceJax`) end 0.19 %
    apart, beyond float32's tolerance: the layer's own rounding, which the probe sees only by
    moving its weights too (the api-cpu campaign, rng 2884: a GRU whose state grows 1.5x a step,
    onnxruntime's and TensorFlow's tanh 3e-7 apart, outputs 10^3 apart).  1e-4 a step is blamed."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends(f"jax,{plugin}"), tmp_path, timeout=180) as p:
        assert p.start() == {}
        got = Executor(p).run(_recurrence_case())
    (f,) = [f for f in got.verdict.findings if str(f.kind).startswith("deviation")]
    assert f.kind == kind and f.detail.own["r"].score > 1.0
    assert (f.detail.ill_conditioned == ["r"]) == (kind == "deviation_accumulated")


def _one_element_norm_case():
    """A LayerNormalization over a last axis of length 1, epsilon 1e-12: its exact output is
    beta, and Keras' formula on JAX rounds it to the grid of ``|x| * 1e6`` (torch's
    ``F.layer_norm`` subtracts the mean first: beta exactly)."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "one-element-norm", "inputs": [{"name": "x", "shape": [1]}],
        "layers": [{"name": "n", "api": "LayerNormalization",
                    "params": {"axis": -1, "epsilon": 1e-12, "center": True, "scale": False}, "inputs": ["x"]}],
        "output": "n", "logits": "n"})
    x = np.random.default_rng(3).normal(scale=3.0, size=(8, 1)).astype(np.float32)
    return TestCase("one-element-norm", spec, {"n": [np.array([-0.13248757], np.float32)]}, {"x": x})


@pytest.mark.parametrize("plugin, kind", [("jax", "deviation_accumulated"),
                                          ("tests.plugins:OffsetNormJax", "deviation")])
def test_a_normalization_over_one_element_rounds_its_terms_and_a_fault_is_blamed(plugin, kind, tmp_path):
    """JAX's Keras formula ``x * inv + (beta - mean * inv)`` against torch's exact beta, each
    term at ``|x| / sqrt(1e-12)``: rounding the probe cannot move (the element and its mean move
    alike), bounded from the formula (the api-cpu campaign, rngs 2881 and 2896, where the
    exact side was named odd).  A LayerNormalization 100 off is blamed."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends(f"torch,{plugin}"), tmp_path, timeout=180) as p:
        assert p.start() == {}
        got = Executor(p).run(_one_element_norm_case())
    (f,) = [f for f in got.verdict.findings if str(f.kind).startswith("deviation")]
    assert f.kind == kind and f.detail.own["n"].score > 1.0
    assert (f.detail.ill_conditioned == ["n"]) == (kind == "deviation_accumulated")


def test_the_one_element_bound_needs_one_element_slices_and_a_mean():
    """The formula's bound (audee.oracle.slices): 4 half-ulps of ``|x| * |gamma| / sqrt(eps)``
    where every normalized slice holds one element; none for two elements (the probe's case),
    for RMS scaling (no mean subtracted) or for a layer that normalizes nothing; a
    TimeDistributed LayerNormalization is judged on one time step."""
    from audee.apis import load_api_configs
    from audee.oracle.slices import one_element_rounding

    configs = load_api_configs()
    x = np.full((8, 1, 4), 2.0, np.float32)
    params = {"axis": 1, "epsilon": 1e-12, "scale": True}
    gamma = [np.array([0.5], np.float32), np.zeros(1, np.float32)]
    assert one_element_rounding("LayerNormalization", params, x, gamma, configs) == pytest.approx(
        4 * 2.0 ** -24 * 2.0 * 0.5 * 1e6)
    assert one_element_rounding("LayerNormalization", {**params, "axis": -1}, x, gamma, configs) == 0.0
    assert one_element_rounding("LayerNormalization", {**params, "rms_scaling": True}, x, gamma, configs) == 0.0
    assert one_element_rounding("Dense", {"units": 3}, x, gamma, configs) == 0.0
    # GroupNormalization: one channel per group and the other axes of length 1, else none
    grouped = {"groups": -1, "axis": -1, "epsilon": 1e-12, "scale": True}
    assert one_element_rounding("GroupNormalization", grouped, np.full((8, 1, 4), 2.0, np.float32), gamma, configs) \
        == pytest.approx(4 * 2.0 ** -24 * 2.0 * 0.5 * 1e6)
    assert one_element_rounding("GroupNormalization", {**grouped, "groups": 2}, np.full((8, 1, 4), 2.0, np.float32),
                                gamma, configs) == 0.0
    assert one_element_rounding("GroupNormalization", grouped, np.full((8, 3, 4), 2.0, np.float32), gamma,
                                configs) == 0.0
    assert one_element_rounding("GroupNormalization", {**grouped, "axis": 1}, np.full((8, 4, 1), 2.0, np.float32),
                                gamma, configs) == pytest.approx(4 * 2.0 ** -24 * 2.0 * 0.5 * 1e6)
    wrapped = {"layer": {"api": "LayerNormalization", "params": {"axis": 1, "epsilon": 1e-12, "scale": False}}}
    assert one_element_rounding("TimeDistributed", wrapped, np.full((8, 8, 1, 1), 2.0, np.float32), [], configs) \
        == pytest.approx(4 * 2.0 ** -24 * 2.0 * 1e6)
