"""The training phase on the real frameworks (issue 29): one-layer and two-layer models
trained one step on TensorFlow, PyTorch and JAX, and a plugin whose one layer passes
1.01 times its gradient back.  One pool for the module: the workers start once."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.engine.execute import Executor
from audee.cases.spec import ModelSpec
from audee.engine.train import TrainExecutor

PLUGIN = "tests.plugins:GradScaledJax"
FAR = "tests.plugins:GradScaledFarJax"
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
    with Pool(parse_backends(",".join(KERAS + [PLUGIN, FAR])), tmp_path_factory.mktemp("logs")) as p:
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


def test_the_training_search_drives_the_inputs_to_a_gradient_bug_the_seed_input_misses(pool):
    """The GA (the inference search's DEAP engine, with the gradient-distance fitness) at
    input level, from a seed input on which the plugin's layer is right: the search pushes
    an input beyond the plugin's threshold, and the suspect it confirms names the layer."""
    from audee.settings import SearchSettings
    from audee.search.train import train_search

    labels = ["jax", FAR]
    ex = _trainer(pool, labels, losses={"mean_squared_error": 1}, optimizers={"sgd": 1})
    case = _case(MLP, ex)
    assert np.abs(case.inputs["x"]).max() < 12.0
    assert not ex.run(case).verdict.failed  # the seed input's step agrees
    found = []
    cfg = SearchSettings(level="input", population=8, parents=3, budget_s=120.0, stop_at_first=True, rng=0)
    out = train_search(ex, case, cfg, lambda r: found.append(r) or r.case.id, "far")
    assert out.stopped == "first_finding" and found and out.failures == [r.case.id for r in found], out.to_json()
    for r in found:
        assert r.case.meta["fitness"] == "gradient" and r.case.meta["train"]["loss"] == "mean_squared_error"
        assert np.abs(r.case.inputs["x"]).max() > 12.0
        (f,) = r.verdict.findings
        assert f.kind == Kind.TRAIN_DEVIATION and f.backends == labels and f.detail.layer == "hidden"


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


PROBS = {"name": "probs", "inputs": [{"name": "x", "shape": [6]}],
         "layers": [{"name": "hidden", "api": "Dense", "params": {"units": 8, "activation": "tanh"}, "inputs": ["x"]},
                    {"name": "logits", "api": "Dense", "params": {"units": 3}, "inputs": ["hidden"]},
                    {"name": "probs", "api": "Activation", "params": {"activation": "softmax"}, "inputs": ["logits"]}],
         "output": "probs", "logits": "logits"}


def test_a_cross_entropy_on_saturated_probabilities_is_left_out_and_an_unsaturated_one_judged(pool):
    """In Keras' clip region (a softmax probability below 1e-7) TensorFlow's cross-entropy
    (from the attached logits) and PyTorch's and JAX's (from clipped probabilities) are
    different rules, both intended: the loss and gradients are not compared there, and
    the record says why; the same model unsaturated is judged as usual."""
    from audee.oracle.train import pair_scores
    from audee.train.setup import TrainSetup

    ex = _trainer(pool, KERAS)
    case = _case(PROBS, ex)
    case.meta["train"] = TrainSetup("categorical_crossentropy", "sgd", target_seed=3, from_logits=False).to_json()
    calm = ex.run(case)
    assert not calm.verdict.failed and "unjudged_loss" not in calm.train, calm.train
    assert all("loss" in v and "gradient" in v for v in calm.pairs.values())
    kernel, bias = case.weights["logits"]
    case.weights["logits"] = [kernel * 60.0, bias]
    hot = ex.run(case)
    assert "clip region" in hot.train["unjudged_loss"] and not hot.verdict.failed, hot.verdict.to_json()
    assert all("loss" not in v and "gradient" not in v and "output" in v for v in hot.pairs.values())
    tf, torch = hot.trained["tensorflow"], hot.trained["torch"]
    assert pair_scores(tf, torch)["loss"]["score"] > 1.0   # judged as one rule, the two would differ


@pytest.mark.slow
def test_a_plugin_finding_is_localized_to_its_layer_and_no_parameter_removes_it(pool, tmp_path):
    """The 1.01 gradient of the plugin's layer is in its code, not in a parameter: the
    localizer names the layer and finds no value that removes it."""
    from audee.apis import load_api_configs
    from audee.backends.registry import parse_backends
    from audee.store.caserecord import CaseRecord
    from audee.localize.train import localize_train

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
        self.pool = pool
        self.workers = {k: pool.workers[k] for k in labels}
        self.labels, self.precisions = list(labels), {k: pool.precisions[k] for k in labels}

    def call_many(self, labels, name, **kw):
        return {label: None for label in labels} if name == "training_support" else None

    def build(self, spec, labels=None, **kw):
        return self.pool.build(spec, labels or self.labels, **kw)

    def versions(self):
        return {k: v for k, v in self.pool.versions().items() if k in self.workers}


@pytest.mark.slow
def test_a_train_nan_finding_gets_a_standalone_script(pool, tmp_path):
    """A real train_nan: MaxPooling1D over a window holding NaN, which TensorFlow's pooling
    drops (known issue tf-maxpool-drops-nan) and torch and JAX keep.  The script writer once
    read a deviation's `quantity` off the NaN finding's detail and raised AttributeError (the
    train-cpu campaign's ConvLSTM1D case); it writes the script, which reproduces alone."""
    import subprocess
    import sys

    from audee.store.caserecord import CaseRecord
    from audee.repro.train import write_train_repro

    spec = {"name": "pool", "inputs": [{"name": "x", "shape": [4, 2]}],
            "layers": [{"name": "pool", "api": "MaxPooling1D", "params": {"pool_size": 2}, "inputs": ["x"]}],
            "output": "pool"}
    ex = _trainer(pool, KERAS, losses={"mean_squared_error": 1}, optimizers={"sgd": 1})
    case = _case(spec, ex)
    case.inputs["x"][0, 0, 0] = np.nan
    result = ex.run(case)
    assert any(f.kind == Kind.TRAIN_NAN for f in result.verdict.findings), result.verdict.findings
    record = CaseRecord.from_result(result, parse_backends(",".join(KERAS)), pool.versions(),
                                    meta={"phase": "train", "train": result.train})
    nan = next(i for i, f in enumerate(record.verdict_obj().findings) if f.kind == Kind.TRAIN_NAN)
    rep = write_train_repro(record, tmp_path, "nan", pool, nan)
    assert rep.kind == Kind.TRAIN_NAN and rep.script.is_file()
    run = subprocess.run([sys.executable, str(rep.script)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "REPRODUCED" in run.stdout, run.stdout + run.stderr
