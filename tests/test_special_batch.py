"""The batch-wide special kind (audee.mutation.special.inject_batch): the rows no row kind
touched moved together to one large common offset, recorded like a row kind, and fed to
real TensorFlow, PyTorch and JAX, whose BatchNormalization in training mode normalizes with
that batch's statistics (a row kind never moves them).  Measured on this batch: Keras on
PyTorch returns NaN for one feature (its batch variance, computed in one pass, cancels
below zero) where TensorFlow and JAX stay finite."""
from __future__ import annotations

import numpy as np

from audee.mutation import special
from audee.cases.spec import InputSpec, ModelSpec

X = InputSpec("x", (6,), "float32", (0.0, 1.0))


def _batch(n: int = 16) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(0).random((n, 6), dtype=np.float32)}


def test_a_batch_offset_moves_every_row_left_alone_and_is_recorded():
    batch = _batch()
    out, rec = special.inject(batch, [X], np.random.default_rng(0), 1.0, kinds=["batch_offset"])
    (r,) = rec
    assert r["kind"] == "batch_offset" and r["input"] == "x" and r["row"] is None and r["rows"] == 16
    x = out["x"].astype(np.float64)
    assert 1e3 <= x.mean() <= 1e6 and abs(x.mean() - r["offset"]) < 1e-3 * r["offset"]
    assert (x.max() - x.min()) / x.mean() < 3e-4                 # a small spread across the whole batch
    assert np.corrcoef(x.ravel(), batch["x"].ravel())[0, 1] > 0.999  # the batch's shape kept
    assert batch["x"].max() < 1.0                                  # the caller's array untouched
    again, rec2 = special.inject(batch, [X], np.random.default_rng(0), 1.0, kinds=["batch_offset"])
    assert rec2 == rec and np.array_equal(again["x"], out["x"])    # deterministic


def test_a_batch_of_empty_rows_has_nothing_to_offset():
    """An op case's tensor of shape (4, 0): rows, but no value in them.  The batch kind
    reduced over the empty block and raised, stopping two units of the compilers campaign."""
    empty = {"x": np.zeros((4, 0), np.float32)}
    out, rec = special.inject(empty, [InputSpec("x", (0,), "float32", (0.0, 1.0))], np.random.default_rng(0), 1.0,
                              kinds=["batch_offset"])
    assert rec == [] and out["x"].shape == (4, 0)


def test_row_kinds_draw_as_before_and_the_batch_kind_takes_the_rows_they_left():
    batch = _batch(200)
    rows_only, before = special.inject(batch, [X], np.random.default_rng(5), 0.3, kinds=list(special.FLOAT_KINDS))
    both, rec = special.inject(batch, [X], np.random.default_rng(5), 0.3)
    assert [r for r in rec if r["row"] is not None] == before      # the same rows, the same kinds
    hit = sorted(r["row"] for r in before)
    np.testing.assert_array_equal(both["x"][hit], rows_only["x"][hit])
    draws = [special.inject(batch, [X], np.random.default_rng(s), 0.3)[1] for s in range(40)]
    offsets = [r for d in draws for r in d if r["kind"] == "batch_offset"]
    assert 4 <= len(offsets) <= 24                                  # about 0.3 of the 40 batches
    assert all(r["rows"] == 200 - sum(1 for x in d if x["row"] is not None)
               for d in draws for r in d if r["kind"] == "batch_offset")
    _, none = special.inject(batch, [X], np.random.default_rng(5), 0.0)
    assert none == []


def test_the_batch_offset_reaches_batch_statistics_on_real_frameworks(tmp_path):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({
        "name": "bn", "inputs": [{"name": "x", "shape": [6]}],
        "layers": [{"name": "bn", "api": "BatchNormalization", "params": {}, "inputs": ["x"],
                    "call": {"training": True}}],
        "output": "bn", "logits": "bn"})
    inputs, rec = special.inject(_batch(), spec.inputs, np.random.default_rng(0), 1.0, kinds=["batch_offset"])
    assert [r["kind"] for r in rec] == ["batch_offset"]
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        ex = Executor(p)
        case = TestCase("bn-offset", spec, {}, inputs)
        ex.complete_weights(case, weight_seed=0)
        result = ex.run(case)
    assert set(result.outcomes) == {"tensorflow", "torch", "jax"} and all(o.ok for o in result.outcomes.values())
    assert np.asarray(inputs["x"]).min() > 1e3
    for o in result.outcomes.values():  # normalized by the batch's own mean: the offset is gone
        out = np.asarray(o.output, np.float64)
        finite = out[:, np.isfinite(out).all(0)]
        assert finite.shape[1] >= 5 and np.abs(finite.mean(0)).max() < 1.0, o.backend
