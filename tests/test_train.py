"""The training phase on the real frameworks (issue 29): one-layer and two-layer models
trained one step on TensorFlow, PyTorch and JAX, and a plugin whose one layer passes
1.01 times its gradient back.  One pool for the module: the workers start once."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.case import Kind, TestCase
from audee.execute import Executor
from audee.spec import ModelSpec
from audee.train.run import TrainExecutor

PLUGIN = "tests.plugins:GradScaledJax"
KERAS = ["tensorflow", "torch", "jax"]

MLP = {"name": "mlp", "inputs": [{"name": "x", "shape": [6]}],
       "layers": [{"name": "hidden", "api": "Dense", "params": {"units": 8, "activation": "tanh"}, "inputs": ["x"]},
                  {"name": "out", "api": "Dense", "params": {"units": 3}, "inputs": ["hidden"]}],
       "output": "out"}
BN = {"name": "bn", "inputs": [{"name": "x", "shape": [5]}],
      "layers": [{"name": "bn", "api": "BatchNormalization", "params": {"momentum": 0.5}, "inputs": ["x"],
                  "call": {"training": True}}],
      "output": "bn"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends(",".join(KERAS + [PLUGIN])), tmp_path_factory.mktemp("logs")) as p:
        p.start_or_fail()
        yield p


def _case(spec: dict, ex, rows: int = 16, offset: float = 0.0) -> TestCase:
    s = ModelSpec.from_json(spec)
    x = np.random.default_rng(1).standard_normal((rows, *s.inputs[0].shape)).astype(np.float32) * 3 + offset
    case = TestCase(s.name, s, {}, {"x": x})
    ex.complete_weights(case, 5)
    return case


def _trainer(pool, labels, **kw) -> TrainExecutor:
    ex = TrainExecutor(pool, **kw)
    ex._support = {label: (None if label in labels else "left out by the test") for label in pool.labels}
    return ex


def test_batchnorm_called_in_training_mode_runs_on_every_keras_backend(pool):
    inference = Executor(pool)
    case = _case(BN, inference, offset=40.0)
    result = inference.run(case)
    assert not result.verdict.failed, result.verdict.to_json()
    gamma, beta, _, _ = case.weights["bn"]
    x = case.inputs["x"].astype(np.float64)
    want = gamma * (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3) + beta   # batch statistics, not the moving ones
    for label in KERAS:
        assert np.abs(result.outcomes[label].output - want).max() < 1e-4
    trained = _trainer(pool, KERAS, losses={"mean_squared_error": 1}, optimizers={"adam": 1}, steps=2).run(case)
    assert not trained.verdict.failed, trained.verdict.to_json()
    losses = trained.train["losses"]
    assert sorted(losses) == sorted(KERAS) and all(len(v) == 2 for v in losses.values())
    assert max(trained.pairs[p]["gradient"] for p in trained.pairs) < 1.0
    moved = [trained.trained[label].weights["bn"] for label in KERAS]   # the moving statistics were updated
    assert all(np.abs(w[2]).max() > 1.0 for w in moved)


def test_a_layer_whose_gradient_is_one_percent_off_is_flagged_in_training_only_and_named(pool):
    labels = ["jax", PLUGIN]
    inference = Executor(pool)
    case = _case(MLP, inference)
    assert not inference.run(case).verdict.failed  # its forward pass is exactly JAX's
    result = _trainer(pool, labels, losses={"mean_squared_error": 1}, optimizers={"sgd": 1}).run(case)
    (f,) = result.verdict.findings
    assert f.kind == Kind.TRAIN_DEVIATION and f.backends == labels
    d = f.detail
    assert d.quantity == "gradient" and d.gradients.keys() == {"hidden"} and d.scores["loss"] == 0.0
    assert d.own_layers == ["hidden"] and d.layer == "hidden" and d.own["hidden"].score > 1.0
    assert result.train["loss"] == "mean_squared_error"


@pytest.mark.parametrize("losses", [
    ["categorical_crossentropy", "mean_squared_error"],
    pytest.param(None, marks=pytest.mark.slow, id="every-loss"),
])
def test_each_loss_and_optimizer_agrees_across_the_keras_backends(pool, losses):
    from audee.train.setup import LOSSES, OPTIMIZERS, TrainSetup

    ex = _trainer(pool, KERAS)
    case = _case(MLP, ex)
    for i, loss in enumerate(losses or LOSSES):
        case.meta["train"] = TrainSetup(loss, OPTIMIZERS[i % len(OPTIMIZERS)], steps=2, target_seed=i).to_json()
        result = ex.run(case)
        assert not result.verdict.failed, (loss, result.verdict.to_json())
        assert len({round(v[0], 4) for v in result.train["losses"].values()}) == 1


@pytest.mark.slow
def test_a_plugin_finding_is_localized_to_its_layer_and_no_parameter_removes_it(pool, tmp_path):
    """The 1.01 gradient of the plugin's layer is in its code, not in a parameter: the
    localizer names the layer and finds no value that removes it."""
    from audee.apis import load_api_configs
    from audee.backends.registry import parse_backends
    from audee.store.caserecord import CaseRecord
    from audee.train.localize import localize_train

    labels = ["jax", PLUGIN]
    ex = _trainer(pool, labels, losses={"mean_squared_error": 1}, optimizers={"sgd": 1})
    case = _case(MLP, ex)
    result = ex.run(case)
    record = CaseRecord.from_result(result, parse_backends(",".join(labels)), pool.versions(),
                                    meta={"phase": "train", "train": result.train})
    record.to_file(tmp_path / "c.pkl")
    record = CaseRecord.from_file(tmp_path / "c.pkl")
    sub = _SubPool(pool, labels)
    found = localize_train(sub, record, record.test_case(), load_api_configs(), max_values=1)
    assert found.kind == Kind.TRAIN_DEVIATION and found.layer == "hidden" and found.api == "Dense"
    assert found.baseline > 1.0 and found.candidates and not any(c.removing for c in found.candidates)
    assert "hidden (Dense)" in found.render()


class _SubPool:
    """Some of a pool's workers, as a pool of their own (the case's backends)."""

    def __init__(self, pool, labels):
        self.workers = {k: pool.workers[k] for k in labels}
        self.labels, self.precisions = list(labels), {k: pool.precisions[k] for k in labels}

    def call_many(self, labels, name, **kw):
        return {label: None for label in labels} if name == "training_support" else None
