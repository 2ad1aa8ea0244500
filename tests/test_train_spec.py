"""The training phase's data and rules without a framework (issue 29): call arguments in
specs, the training setup and its targets, the layers random in training, the oracles on
made-up outcomes, the settings and the API-level draw of a training flag."""
from __future__ import annotations

import json
from contextlib import nullcontext

import numpy as np
import pytest

from audee.apis.call_args import TRAINING_LAYERS, random_in_training, random_values
from audee.backends.base import Backend
from audee.backends.pool import WorkerFailure
from audee.backends.worker import WorkerState
from audee.cases.case import Finding, Kind
from audee.core.errors import ConfigError, SpecError
from audee.oracle.deviation import as_tolerances
from audee.cases.pack import pack_specs
from audee.settings import FuzzSettings, validate_settings
from audee.cases.spec import ModelSpec, one_layer_spec
from audee.store.caserecord import FINDING_KINDS
from audee.oracle.train import train_findings
from audee.train.setup import CLASS_LOSSES, LOSSES, TrainOutcome, TrainSetup, draw_setup, make_targets, train_spec
from tests.helpers import installed_keras



def _bn(call: dict | None = None, api: str = "BatchNormalization", params: dict | None = None) -> dict:
    layer = {"name": "bn", "api": api, "params": params or {}, "inputs": ["x"]}
    if call is not None:
        layer["call"] = call
    return {"name": "one", "inputs": [{"name": "x", "shape": [4]}], "layers": [layer], "output": "bn"}


# ---- specs say how a layer is called ----------------------------------------------------------
def test_call_arguments_are_spec_data_and_old_specs_keep_their_json_and_key():
    plain = ModelSpec.from_json(_bn())
    assert "call" not in plain.to_json()["layers"][0] and plain.layers[0].call == {}
    trained = ModelSpec.from_json(_bn({"training": True}))
    assert trained.to_json()["layers"][0]["call"] == {"training": True}
    assert trained.key() != plain.key()                                   # a different model to build
    assert ModelSpec.loads(trained.dumps()).layers[0].call == {"training": True}
    assert ModelSpec.from_json(_bn({"training": None})).layers[0].call == {"training": None}
    # a layer alone and a pack keep how it is called
    alone = one_layer_spec(trained, "bn", {"x": np.zeros((2, 4), np.float32)})
    assert alone.layers[0].call == {"training": True}
    assert pack_specs([trained, plain]).spec.layers[0].call == {"training": True}


@pytest.mark.parametrize("call, message", [
    ({"masks": "x"}, "unknown call argument 'masks'"),
    ({"training": "yes"}, "expected true, false or null"),
    ([1], "expected an object of call arguments"),
])
def test_bad_call_arguments_are_one_line_naming_the_field(call, message):
    with pytest.raises(SpecError, match=message) as err:
        ModelSpec.from_json(_bn(call))
    assert "layers[bn].call" in str(err.value)


def test_training_on_a_layer_whose_call_takes_none_is_refused():
    with pytest.raises(SpecError, match="Conv1D's call takes no training argument"):
        ModelSpec.from_json(_bn({"training": True}, api="Conv1D", params={"filters": 2, "kernel_size": 1}))


@pytest.mark.slow
def test_the_training_layer_list_is_the_installed_keras():
    assert installed_keras("training_layers_from") == sorted(TRAINING_LAYERS)


def test_layers_random_in_training():
    assert random_in_training("Dropout", {"rate": 0.5})
    assert random_in_training("Dropout", {"rate": 0.0}) is None
    assert random_in_training("GaussianNoise", {"stddev": 0.1})
    assert random_in_training("GaussianNoise", {"stddev": 0}) is None
    assert random_in_training("RandomFlip", {})
    assert random_in_training("LSTM", {"units": 2, "recurrent_dropout": 0.2})
    assert random_in_training("LSTM", {"units": 2}) is None
    assert random_in_training("Bidirectional", {"layer": {"api": "GRU", "params": {"units": 2, "dropout": 0.1}}})
    assert random_in_training("BatchNormalization", {}) is None


def test_the_training_phase_calls_random_layers_in_inference_mode_and_says_why():
    spec = ModelSpec.from_json({"name": "d", "inputs": [{"name": "x", "shape": [4]}], "layers": [
        {"name": "drop", "api": "Dropout", "params": {"rate": 0.5}, "inputs": ["x"]},
        {"name": "noise", "api": "GaussianNoise", "params": {"stddev": 0.1}, "inputs": ["drop"],
         "call": {"training": True}},
        {"name": "bn", "api": "BatchNormalization", "params": {}, "inputs": ["noise"]}], "output": "bn"})
    ts = train_spec(spec)
    assert ts.spec.layer("drop").call == {"training": False} and "drop" in ts.inactive
    assert ts.spec.layer("noise").call == {"training": True} and "noise" in ts.unjudged
    assert ts.spec.layer("bn").call == {} and spec.layer("drop").call == {}   # the case's own spec untouched
    assert set(ts.to_json()) == {"inactive", "unjudged"}


# ---- the setup and its targets ----------------------------------------------------------------
def test_each_case_draws_its_own_setup_from_its_own_stream():
    losses, opts = {n: 1.0 for n in LOSSES}, {"sgd": 1.0, "adam": 1.0}
    a = draw_setup("lenet5-v00003", 7, losses, opts, steps=2)
    assert a == draw_setup("lenet5-v00003", 7, losses, opts, steps=2)
    assert len({draw_setup(f"c{i}", 7, losses, opts) for i in range(40)}) > 8
    assert {draw_setup(f"c{i}", 0, {"huber": 1}, {"sgd": 1}).loss for i in range(5)} == {"huber"}
    assert TrainSetup.from_json(a.to_json()) == a
    with pytest.raises(ValueError, match="unknown loss"):
        TrainSetup("l1", "sgd")
    with pytest.raises(ValueError, match="steps"):
        TrainSetup("huber", "sgd", steps=0)


@pytest.mark.parametrize("loss", LOSSES)
def test_targets_fit_the_loss_and_are_the_same_everywhere(loss):
    setup = TrainSetup(loss, "sgd", target_seed=3)
    y = make_targets(setup, (5, 3, 4))
    assert np.array_equal(y, make_targets(setup, (5, 3, 4)))
    if loss == "sparse_categorical_crossentropy":
        assert y.shape == (5, 3) and y.dtype == np.int32 and 0 <= y.min() and y.max() < 4
    else:
        assert y.shape == (5, 3, 4) and y.dtype == np.float32
    if loss == "categorical_crossentropy":
        assert np.array_equal(y.sum(-1), np.ones((5, 3)))
    with pytest.raises(ValueError, match="class axis") if loss in CLASS_LOSSES else nullcontext():
        make_targets(setup, (5,))


# ---- the oracles on made-up outcomes ----------------------------------------------------------
def _outcome(name: str, scale: float = 1.0, nan: bool = False, **kw) -> TrainOutcome:
    g = np.random.default_rng(0)
    grads = {"hidden": [g.standard_normal((3, 4)).astype(np.float32) * scale, np.ones(4, np.float32)],
             "out": [g.standard_normal((4, 2)).astype(np.float32), np.ones(2, np.float32)]}
    if nan:
        grads["hidden"][1] = np.array([np.nan, 1, 1, 1], np.float32)
    weights = {k: [np.ones_like(a) for a in v] for k, v in grads.items()}
    kw.setdefault("output", np.ones((2, 2), np.float32))
    return TrainOutcome(name, losses=np.array([0.5]), grads=grads, weights=weights, **kw)


ORDER = ["hidden", "out"]


def test_a_gradient_one_percent_off_is_a_train_deviation_naming_the_layer_nearest_the_loss():
    findings, pairs = train_findings([_outcome("a"), _outcome("b", 1.01), _outcome("c")], ORDER)
    devs = [f for f in findings if f.kind == Kind.TRAIN_DEVIATION]
    assert sorted(f.detail.pair for f in devs) == ["a|b", "b|c"]
    d = devs[0].detail
    assert d.quantity == "gradient" and d.gradients.keys() == {"hidden"} and d.first_layer == "hidden"
    assert 5 < d.score < 15 and d.scores["output"] == 0.0 and d.losses["a"] == [0.5]
    assert devs[0].detail.odd == ["b"] and pairs["a|c"]["gradient"] == 0.0
    back = Finding.from_json(json.loads(json.dumps(devs[0].to_json())))
    assert back.detail.gradients == {"hidden": d.gradients["hidden"]}


def test_a_step_that_computed_in_bfloat16_is_judged_in_bfloat16_float32_gradients_included():
    """The train-cpu campaign's bfloat16 cases (LeakyReLU, ELU, ZeroPadding1D...): the model
    output is bfloat16, but the gradient with respect to a float32 input is float32 and was
    judged at float32's tolerance, so 1% apart made seven "new bugs".  Judged at the output's
    precision, the same 1% is within bfloat16's tolerance; a float32 step still flags it."""
    import ml_dtypes

    bf16 = np.ones((2, 2), ml_dtypes.bfloat16)
    found, _ = train_findings([_outcome("a", output=bf16), _outcome("b", 1.01, output=bf16)], ORDER)
    assert not [f for f in found if f.kind == Kind.TRAIN_DEVIATION]
    found, _ = train_findings([_outcome("a"), _outcome("b", 1.01)], ORDER)
    assert [f.kind for f in found] == [Kind.TRAIN_DEVIATION]


def test_non_finite_values_on_one_backend_only_are_a_train_nan():
    findings, _ = train_findings([_outcome("a"), _outcome("b", nan=True), _outcome("c")], ORDER)
    (nan,) = [f for f in findings if f.kind == Kind.TRAIN_NAN]
    assert nan.backends == ["b"] and nan.detail.first == {"b": "grad:hidden/1"} and nan.detail.strong
    assert nan.detail.layer == "hidden" and nan.detail.odd == ["b"]
    alike, _ = train_findings([_outcome("a", nan=True), _outcome("b", nan=True)], ORDER)
    assert not [f for f in alike if f.kind == Kind.TRAIN_NAN]   # the same non-finite values everywhere


def test_a_backend_failing_to_differentiate_is_a_divergent_acceptance_in_its_phase_and_converters_are_left_out():
    failure = WorkerFailure("error", "gradient", "ValueError: no gradient for this op")
    findings, _ = train_findings([_outcome("a"), _outcome("b"), TrainOutcome("c", failure=failure),
                                  TrainOutcome("onnxruntime", unsupported="onnxruntime: training not supported")], ORDER)
    assert [f.kind for f in findings] == [Kind.DIVERGENT_ACCEPTANCE]
    assert findings[0].detail.errors["c"].phase == "gradient" and findings[0].detail.odd == ["c"]
    only, _ = train_findings([_outcome("a"), _outcome("b", 2.0)], ORDER, judge_values=False)
    assert only == []


def test_the_training_kinds_are_case_file_kinds():
    assert {Kind.TRAIN_DEVIATION, Kind.TRAIN_NAN, Kind.TRAIN_DEVIATION_ACCUMULATED} <= set(FINDING_KINDS)
    assert Finding(Kind.TRAIN_DEVIATION, ["a", "b"], {}).is_failure
    assert not Finding(Kind.TRAIN_DEVIATION_ACCUMULATED, ["a", "b"], {}).is_failure


# ---- settings, API-level draws, a worker that does not train ----------------------------------
def test_training_settings_are_validated_like_every_setting():
    s = validate_settings(FuzzSettings, {"phase": "train", "losses": "huber:2,mean_squared_error", "steps": 3})
    assert s.loss_weights() == {"huber": 2.0, "mean_squared_error": 1.0} and s.steps == 3
    with pytest.raises(ConfigError, match="unknown loss 'l1'"):
        validate_settings(FuzzSettings, {"losses": "l1"})
    with pytest.raises(ConfigError, match="--pack: the training phase trains each case alone"):
        validate_settings(FuzzSettings, {"phase": "train", "pack": 4}, flags=True)
    with pytest.raises(ConfigError, match="phase"):
        validate_settings(FuzzSettings, {"phase": "backward"})


def test_api_level_cases_draw_a_training_flag_from_their_own_stream():
    from audee.apis import load_api_configs
    from audee.mutation.apilevel import generate_case

    apis = load_api_configs()
    plain = [generate_case("BatchNormalization", apis, 0, i, invalid_prob=0.0) for i in range(12)]
    drawn = [generate_case("BatchNormalization", apis, 0, i, invalid_prob=0.0, call_training=1.0) for i in range(12)]
    flags = [c.spec.layers[-1].call.get("training") for c in drawn]
    assert set(flags) == {True, False}
    for p, d in zip(plain, drawn):   # every other draw is the same
        layer = d.spec.layers[-1]
        assert layer.params == p.spec.layers[-1].params and np.array_equal(d.inputs["x0"], p.inputs["x0"])
        assert any(m.param == "call.training" and m.new == layer.call["training"] for m in d.mutations)
    drops = [generate_case("Dropout", apis, 0, i, invalid_prob=0.0, call_training=1.0) for i in range(20)]
    random = [c for c in drops if c.spec.layers[-1].call.get("training")
              and random_in_training(c.spec.layers[-1].api, c.spec.layers[-1].params) is not None]
    assert random  # a layer random in training is called so too: its values are then left out
    assert all(random_values(c.spec.layers) for c in random)
    assert not any(random_values(c.spec.layers) for c in drops if c not in random)


class _InferenceOnly(Backend):
    name = "inference-only"

    def versions(self):
        return {}

    def build(self, spec):
        raise AssertionError("a backend that does not train builds nothing for a training step")

    def weight_shapes(self, model):
        return {}

    def set_weights(self, model, weights):
        pass

    def run(self, model, inputs):
        return []


def test_a_backend_that_does_not_train_says_so_and_builds_nothing():
    state = WorkerState(_InferenceOnly())
    reply = state.handle({"op": "train", "spec": _bn(), "key": "k", "weights": {}, "inputs": {}, "setup": {}})
    assert reply["unsupported"] == "inference-only: training not supported (runs inference only)"
    assert state.handle({"op": "call", "name": "training_support"})["value"] == reply["unsupported"]
    from audee.backends.onnx_backend import OnnxRuntimeBackend
    from audee.backends.keras_backends import JaxBackend

    assert not OnnxRuntimeBackend.trains and JaxBackend.trains


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "rmsprop", "adagrad"])
def test_each_update_is_judged_against_the_keras_rule_on_its_own_gradient(optimizer):
    from audee.train.setup import reference_update

    setup = TrainSetup("mean_squared_error", optimizer)
    good, off, other = _outcome("a"), _outcome("b"), _outcome("c")
    initial = {k: [np.full_like(g, 0.5) for g in v] for k, v in good.grads.items()}
    for o in (good, off, other):
        o.weights = {k: [reference_update(setup, w, g).astype(np.float32) for w, g in zip(initial[k], o.grads[k])]
                     for k in initial}
    off.weights["out"][0] = off.weights["out"][0] - 0.01   # a step 1% of the weights' scale off
    findings, _ = train_findings([good, off, other], ORDER, setup=setup, initial=initial)
    (f,) = [f for f in findings if f.detail.quantity == "update"]
    assert f.backends == ["b"] and f.detail.odd == ["b"] and f.detail.layer == "out" and f.detail.pair is None and f.detail.score > 1


def test_adams_first_step_is_near_lr_times_the_sign_of_the_gradient():
    from audee.train.setup import reference_update

    g = np.array([1e-2, -3.0, 1e-9], np.float32)
    got = reference_update(TrainSetup("huber", "adam"), np.zeros(3), g)
    assert np.allclose(got[:2], [-1e-3, 1e-3], rtol=1e-3) and abs(got[2]) < 1e-5


def test_after_a_loss_non_finite_everywhere_only_the_first_forward_pass_is_compared():
    a, b = _outcome("a"), _outcome("b", nan=True)   # b's gradient NaN as well
    a.losses, b.losses = np.array([np.nan, 1.0]), np.array([np.nan, np.nan])
    findings, _ = train_findings([a, b], ORDER)
    assert not [f for f in findings if f.kind == Kind.TRAIN_NAN]
    a.losses = np.array([0.5, 1.0])                     # finite on a: b's NaN loss and gradient count
    (nan,) = [f for f in train_findings([a, b], ORDER)[0] if f.kind == Kind.TRAIN_NAN]
    assert nan.detail.first == {"b": "loss@0"}


def test_the_gradient_fitness_is_the_largest_pairs_normalized_distance():
    from audee.fitness.gradient import gradient_fitness

    value, pair = gradient_fitness({o.backend: o for o in (_outcome("a"), _outcome("b", 1.01), _outcome("c"))})
    assert 5 < value < 15 and pair in ("a|b", "b|c")
    assert gradient_fitness({"a": _outcome("a"), "c": _outcome("c")}) == (0.0, "a|c")
    assert gradient_fitness({"a": _outcome("a")}) == (0.0, "")


def test_an_update_is_judged_at_its_own_scale_not_the_weights():
    from audee.oracle.train import update_score
    from audee.train.setup import reference_update

    setup = TrainSetup("huber", "sgd", learning_rate=1e-4)
    w0, g = np.full(4, 3.0, np.float32), np.array([1.0, -1.0, 0.5, 0.0], np.float32)
    want = reference_update(setup, w0, g, np.float32)
    assert update_score(w0, want, want, as_tolerances(None))["score"] == 0.0
    half = (w0 - (w0 - want) * 0.5).astype(np.float32)   # a step half as long: 5e-5 on weights of 3
    assert update_score(w0, half, want, as_tolerances(None))["score"] > 1   # judged at the weights' 3: 0.02


def test_a_bf16_update_is_judged_without_numpy_knowing_the_dtype():
    import ml_dtypes

    from audee.oracle.train import update_score

    w0 = np.ones(3, ml_dtypes.bfloat16)
    assert update_score(w0, w0, w0, as_tolerances(None))["score"] == 0.0
