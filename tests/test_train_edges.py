"""The training phase at the edges, on the real frameworks: special inputs in training
steps, and a ``train_nan`` pinned on the layer whose backward pass makes the non-finite
gradient.  The NaN is a real one: Keras 3.15.1's ``UnitNormalization`` (``ops.normalize``,
order 2) clamps ``rsqrt(sum(x**2))``'s output, not its input, so an all-zero row's gradient
differentiates ``rsqrt(0) = inf`` times 0: NaN on PyTorch and JAX, finite on TensorFlow
(keras-team/keras#23075)."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.cases.spec import ModelSpec
from audee.engine.train import TrainExecutor

KERAS = ["tensorflow", "torch", "jax"]

#: a weighted layer, the weightless normalization, a weighted head: the NaN made by the
#: normalization's backward pass reaches ``proj``'s kernel gradient first
UNIT = {"name": "unit", "inputs": [{"name": "x", "shape": [8]}],
        "layers": [{"name": "proj", "api": "Dense", "params": {"units": 6, "use_bias": False}, "inputs": ["x"]},
                   {"name": "norm", "api": "UnitNormalization", "params": {}, "inputs": ["proj"]},
                   {"name": "out", "api": "Dense", "params": {"units": 3}, "inputs": ["norm"]}],
        "output": "out"}


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends(",".join(KERAS)), tmp_path_factory.mktemp("logs")) as p:
        p.start_or_fail()
        yield p


def _trainer(pool, **kw) -> TrainExecutor:
    return TrainExecutor(pool, losses={"mean_squared_error": 1}, optimizers={"sgd": 1}, **kw)


def _unit_case(ex: TrainExecutor) -> TestCase:
    s = ModelSpec.from_json(UNIT)
    x = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
    x[3] = 0.0   # an all-zero row: proj (no bias) passes it on, the normalization sees a zero norm
    case = TestCase("unit", s, {}, {"x": x})
    ex.complete_weights(case, 5)
    return case


def test_a_zero_row_gradient_nan_made_by_a_weightless_layer_is_pinned_on_that_layer(pool):
    ex = _trainer(pool)
    result = ex.run(_unit_case(ex))
    nan = [f for f in result.verdict.findings if f.kind == Kind.TRAIN_NAN]
    assert nan, result.verdict.to_json()
    d = nan[0].detail
    assert "grad:proj/0" in d.differ and d.finite_backends == ["tensorflow"], d
    assert d.backward_layer == "norm" and d.layer == "norm", d    # not proj, whose kernel the NaN reaches first
    assert d.backward.get("proj") == "accumulated" and d.backward["norm"] == "blamed", d.backward


def test_a_weightless_model_has_its_backward_pass_judged_and_pinned(pool):
    """The normalization alone (an API-level case): no weight has a gradient, so only the
    input's gradient shows the NaN; the step asks for it and the walk names the layer."""
    spec = {"name": "alone", "inputs": [{"name": "x", "shape": [4, 6]}],
            "layers": [{"name": "norm", "api": "UnitNormalization", "params": {}, "inputs": ["x"]}], "output": "norm"}
    ex = _trainer(pool)
    x = np.random.default_rng(2).standard_normal((6, 4, 6)).astype(np.float32)
    x[1] = 0.0
    case = TestCase("alone", ModelSpec.from_json(spec), {}, {"x": x})
    ex.complete_weights(case, 5)
    nan = [f for f in ex.run(case).verdict.findings if f.kind == Kind.TRAIN_NAN]
    assert nan and nan[0].detail.differ == ["input_grad:x"], nan
    assert nan[0].detail.backward_layer == "norm" and sorted(nan[0].backends) == ["jax", "torch"]


def test_the_training_level_injects_only_kinds_a_correct_step_trains_on_finitely():
    """A NaN, Inf or near-max row makes every backend's batch loss non-finite and leaves the
    step's gradients unjudged: the training level draws the other kinds, the seed case none,
    the same ones for the same case, and the row records them."""
    from audee.cases.case import NONFINITE_SPECIALS
    from audee.fuzz import FuzzConfig
    from audee.levels.train import TRAIN_SPECIAL_KINDS, train_specials, without_specials

    assert "zero_row" in TRAIN_SPECIAL_KINDS and "ties" in TRAIN_SPECIAL_KINDS
    assert not set(TRAIN_SPECIAL_KINDS) & set(NONFINITE_SPECIALS + ("near_max",))
    cfg = FuzzConfig([], "/nonexistent", special_inputs=0.5, rng=3)
    assert without_specials(cfg).special_inputs == 0.0 and cfg.special_inputs == 0.5
    s = ModelSpec.from_json(UNIT)

    def cases():
        for i in (-1, 0, 1):
            x = np.random.default_rng(i + 5).standard_normal((16, 8)).astype(np.float32)
            yield TestCase(f"unit-{i}", s, {}, {"x": x}), {"variant": i}

    got = list(train_specials(cases(), cfg))
    again = list(train_specials(cases(), cfg))
    assert "special_inputs" not in got[0][1]                    # the seed case never
    for (case, extra), (case2, _) in zip(got[1:], again[1:]):
        kinds = {r["kind"] for r in extra["special_inputs"]}
        assert kinds and kinds <= set(TRAIN_SPECIAL_KINDS), kinds
        assert np.isfinite(case.inputs["x"]).all()
        np.testing.assert_array_equal(case.inputs["x"], case2.inputs["x"])
        for r in extra["special_inputs"]:
            if r["kind"] == "zero_row":
                assert not case.inputs["x"][r["row"]].any()


@pytest.mark.slow
def test_the_training_phase_finds_the_zero_row_nan_from_defaults_plus_special_inputs(tmp_path):
    """`audee fuzz --api UnitNormalization --phase train --special-inputs 0.2`, rng 0 (the
    first tried): within five cases a train_nan on torch pinned on the normalization layer,
    every row's special values of the training kinds (once NaN rows that blinded the step)."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from audee.levels.train import TRAIN_SPECIAL_KINDS
    from audee.store.caserecord import CaseRecord

    out = tmp_path / "run"
    got = subprocess.run([sys.executable, "-m", "audee", "fuzz", "--api", "UnitNormalization", "--phase", "train",
                          "--special-inputs", "0.2", "--variants", "5", "--rng", "0", "--backends", "tensorflow,torch",
                          "--out", str(out), "--no-progress"], capture_output=True, text=True, timeout=1200,
                         cwd=Path(__file__).resolve().parent.parent)
    assert got.returncode in (0, 1), got.stdout + got.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    specials = [r["kind"] for row in rows for r in row.get("special_inputs") or []]
    assert specials and set(specials) <= set(TRAIN_SPECIAL_KINDS), specials
    nan = [r for r in rows if "train_nan" in r["kinds"]]
    assert nan, [(r["id"], r["kinds"]) for r in rows]
    record = CaseRecord.from_file(out / nan[0]["case_file"])
    f = next(f for f in record.verdict_obj().findings if f.kind == Kind.TRAIN_NAN)
    assert f.backends == ["torch"] and f.detail.backward_layer == f.detail.layer
    assert record.test_case().spec.layer(f.detail.layer).api == "UnitNormalization"


@pytest.mark.slow
def test_the_zero_row_nan_gets_a_standalone_script_that_reproduces(pool, tmp_path):
    import subprocess
    import sys

    from audee.store.caserecord import CaseRecord
    from audee.repro.train import write_train_repro

    ex = _trainer(pool)
    result = ex.run(_unit_case(ex))
    record = CaseRecord.from_result(result, parse_backends(",".join(KERAS)), pool.versions(),
                                    meta={"phase": "train", "train": result.train})
    index = next(i for i, f in enumerate(record.verdict_obj().findings) if f.kind == Kind.TRAIN_NAN)
    rep = write_train_repro(record, tmp_path, "unit", pool, index)
    assert rep.model == "one-layer model", rep.notes                # the normalization alone reproduces it
    run = subprocess.run([sys.executable, str(rep.script)], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0 and "REPRODUCED" in run.stdout, run.stdout + run.stderr


def test_the_localizer_names_the_layer_the_backward_walk_blamed(pool, tmp_path):
    from audee.apis import load_api_configs
    from audee.store.caserecord import CaseRecord
    from audee.localize.train import localize_train

    ex = _trainer(pool)
    result = ex.run(_unit_case(ex))
    record = CaseRecord.from_result(result, parse_backends(",".join(KERAS)), pool.versions(),
                                    meta={"phase": "train", "train": result.train})
    record.to_file(tmp_path / "c.pkl")
    record = CaseRecord.from_file(tmp_path / "c.pkl")
    found = localize_train(pool, record, record.test_case(), load_api_configs(), max_values=1)
    assert found.kind == Kind.TRAIN_NAN and found.layer == "norm" and found.api == "UnitNormalization", found
    assert "norm (UnitNormalization)" in found.render()
