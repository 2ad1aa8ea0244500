"""Special-value inputs (audee/mutation/special.py): each kind made and recognised, rows
chosen at a rate, the GA keeping them, and the values reaching the real backends bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.mutation import special
from audee.search.encoding import Encoding
from audee.cases.spec import InputSpec, ModelSpec
from audee.cases.weights import adapt_weights

FLOAT = InputSpec("x", (6,), "float32", (0.0, 1.0))
IDS = InputSpec("ids", (5,), "int32", (0, 20))


def _batch(n: int = 4) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.random((n, 6), dtype=np.float32), "ids": rng.integers(0, 20, (n, 5)).astype(np.int32)}


@pytest.mark.parametrize("kind", special.FLOAT_KINDS)
def test_every_float_kind_is_made_and_recognised(kind):
    row = np.random.default_rng(1).random(64).astype(np.float32)
    got = special.special_row(row, kind, np.random.default_rng(2))
    assert got.dtype == np.float32 and got.shape == row.shape
    counts = special.describe({"x": got[None]})
    if kind in ("nan", "inf", "-inf", "near_max", "subnormal"):
        assert counts.get(kind, 0) >= 1, counts
    elif kind == "signed_zero":
        assert (got == 0).any()
    elif kind == "ties":
        assert np.unique(got).size == 1
    elif kind == "offset":  # a large common value, a small spread
        assert got.min() > 100 and (got.max() - got.min()) / got.mean() < 1e-3
    elif kind == "tiny":
        assert 0 < np.abs(got).max() < 1e-34
    elif kind == "zero_row":
        assert not got.any() and not np.signbit(got).any()
    np.testing.assert_array_equal(special.special_row(row, kind, np.random.default_rng(2)), got)  # deterministic


def test_float16_near_max_stays_finite_in_its_dtype():
    got = special.special_row(np.ones(16, np.float16), "near_max", np.random.default_rng(0))
    assert np.isfinite(got).all() and np.abs(got).max() > 30000


@pytest.mark.parametrize("kind", ["near_max", "offset", "tiny", "subnormal", "domain_edge"])
def test_a_float32_input_read_in_float16_gets_float16_edges(kind):
    """A float32 model input that a ``mixed_float16`` layer reads is cast to float16 there:
    its special values sit at float16's edges (65504 at most, float16's subnormals), not at
    float32's, which the cast would make Inf or 0 (a non-finite input, not the edge)."""
    row = np.random.default_rng(1).random(64).astype(np.float32)
    got = special.special_row(row, kind, np.random.default_rng(2), dtype="float16")
    assert got.dtype == np.float32
    assert np.isfinite(got.astype(np.float16)).all() and np.abs(got).max() <= 65504
    if kind == "near_max":
        assert np.abs(got).max() > 30000
    if kind == "subnormal":
        moved = got[got != row]
        assert moved.size and (np.abs(moved) < np.finfo(np.float16).tiny).all() and (moved.astype(np.float16) != 0).all()
    if kind == "offset":
        assert 1000 <= got.min() and got.max() < 6600


def test_the_readers_dtype_bounds_every_kind_and_the_batch_offset():
    """:func:`special.inject` with the readers' compute dtype per input: every value of a
    float16 reader's input finite in float16 but for the NaN/Inf kinds, its batch offset below
    a tenth of 65504, the subnormals it places recorded as such; bfloat16 keeps its near-float32
    range; a float32 reader's input is drawn as before."""
    x = {"x": np.random.default_rng(0).normal(size=(256, 6)).astype(np.float32)}
    spec = [InputSpec("x", (6,), "float32")]
    out, done = special.inject(x, spec, np.random.default_rng(1), 0.5, dtypes={"x": "float16"})
    rows = {d["row"] for d in done if d["kind"] in ("nan", "inf", "-inf", "lone_nan", "lone_inf", "lone_-inf",
                                                   "nan_tie")}
    keep = np.array([r not in rows for r in range(256)])
    assert np.isfinite(out["x"][keep].astype(np.float16)).all()
    assert any(d["kind"] == "subnormal" for d in done)
    offsets = [d["offset"] for seed in range(8) for d in special.inject(
        x, spec, np.random.default_rng(seed), 0.5, dtypes={"x": "float16"})[1] if d["kind"] == "batch_offset"]
    assert offsets and all(1000 <= o < 6551 for o in offsets)
    same, _ = special.inject(x, spec, np.random.default_rng(1), 0.5, dtypes={"x": "float32"})
    plain, _ = special.inject(x, spec, np.random.default_rng(1), 0.5)
    np.testing.assert_array_equal(same["x"], plain["x"])
    wide, _ = special.inject(x, spec, np.random.default_rng(1), 0.5, dtypes={"x": "bfloat16"})
    assert np.nanmax(np.abs(np.where(np.isfinite(wide["x"]), wide["x"], 0))) > 1e37


def test_integer_kinds_and_rates():
    batch = _batch(200)
    same, rec = special.inject(batch, [FLOAT, IDS], np.random.default_rng(0), 0.0)
    assert rec == [] and all(same[k] is batch[k] for k in batch)
    out, rec = special.inject(batch, [FLOAT, IDS], np.random.default_rng(0), 0.25)
    assert 60 < len(rec) < 140  # 400 rows at 0.25
    assert {r["kind"] for r in rec if r["input"] == "ids"} <= set(special.INT_KINDS)
    assert {r["kind"] for r in rec if r["input"] == "x"} <= set(special.FLOAT_KINDS)
    assert out["ids"].dtype == np.int32 and out["x"].dtype == np.float32
    carried = special.describe(out, [FLOAT, IDS])
    assert carried.get("out_of_range", 0) + carried.get("negative", 0) > 0
    untouched = sorted(set(range(200)) - {r["row"] for r in rec if r["input"] == "x"})
    np.testing.assert_array_equal(out["x"][untouched], batch["x"][untouched])
    only, rec = special.inject(batch, [FLOAT, IDS], np.random.default_rng(0), 1.0, kinds=["ties"])
    assert {r["kind"] for r in rec} == {"ties"} and all(np.unique(r).size == 1 for r in only["x"])


def test_the_ga_encoding_keeps_special_values_only_when_asked():
    batch = {k: v[:1] for k, v in _batch().items()}
    genes = np.concatenate([batch["x"].ravel(), batch["ids"].ravel()]).astype(np.float64)
    genes[0], genes[1], genes[6] = np.nan, -np.inf, 99  # ids[0] out of range
    for keep in (False, True):
        enc = Encoding("input", batch, {}, [FLOAT, IDS], special=keep)
        got = enc.inputs_of(enc.repair(genes.copy()))
        assert np.isinf(got["x"][0, 1]) == keep    # Inf is clipped to the dtype's maximum unless kept
        assert (got["ids"][0, 0] == 99) == keep      # ids are clipped into [0, 20) unless kept
    assert np.isnan(got["x"][0, 0])
    enc = Encoding("input", batch, {}, [FLOAT, IDS], special=True)
    back = enc.with_inputs(np.zeros(enc.size), batch)
    np.testing.assert_array_equal(enc.inputs_of(back)["ids"], batch["ids"])


def _passthrough() -> ModelSpec:
    return ModelSpec.from_json({
        "name": "passthrough", "inputs": [{"name": "x", "shape": [6], "range": [0, 1]}],
        "layers": [{"name": "same", "api": "Reshape", "params": {"target_shape": [6]}, "inputs": ["x"]},
                   {"name": "logits", "api": "Dense", "params": {"units": 3}, "inputs": ["same"]},
                   {"name": "out", "api": "Softmax", "params": {}, "inputs": ["logits"]}],
        "output": "out", "logits": "logits"})


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    with Pool(parse_backends("jax,torch"), tmp_path_factory.mktemp("logs")) as p:
        assert p.start() == {}
        yield p


def test_special_values_reach_the_backends_bit_for_bit(pool):
    spec = _passthrough()
    x = np.random.default_rng(3).random((len(special.FLOAT_KINDS), 6), dtype=np.float32)
    for i, kind in enumerate(special.FLOAT_KINDS):
        x[i] = special.special_row(x[i], kind, np.random.default_rng(i))
    shapes = {k: [(r, tuple(s)) for r, s in v] for k, v in pool.build(spec)["jax"]["shapes"].items()}
    got = pool.run(spec, adapt_weights({}, shapes, 0), "w0", {"x": x}, layers=True)
    for label in ("jax", "torch"):
        seen = np.asarray(got[label]["layers"]["same"])
        np.testing.assert_array_equal(seen.view(np.uint32), x.view(np.uint32), err_msg=label)


def test_ga_children_carry_special_values_and_the_nan_fitness_gets_no_nan(pool):
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.search.encoding import cauchy_draw
    from audee.search.engine import Search
    from audee.settings import SearchSettings

    spec = _passthrough()
    case = TestCase("s", spec, {}, {"x": np.random.default_rng(0).random((1, 6), dtype=np.float32)})
    ex = Executor(pool)
    ex.complete_weights(case, 0)
    seen: dict[str, int] = {}
    for fitness, labels in (("nan", ["jax"]), ("inconsistency", ["jax", "torch"])):
        cfg = SearchSettings(level="input", fitness=fitness, special_rate=1.0, rng=1)
        search = Search(ex, case, cfg, labels)
        kinds: dict[str, int] = {}
        for _ in range(40):
            draw = cauchy_draw(search.rng, search.encoding.size)
            child = search._mutate(search._fresh(), draw, special_values=True)
            for k, n in special.describe(search.encoding.inputs_of(child)).items():
                kinds[k] = kinds.get(k, 0) + n
        if fitness == "nan":
            assert kinds and not {"nan", "inf", "-inf"} & set(kinds), kinds
        seen.update(kinds)
    assert {"nan", "inf", "-inf"} <= set(seen)  # the inconsistency search does get them
    plain = Search(ex, case, SearchSettings(level="input", rng=1), ["jax", "torch"])
    assert not plain.encoding.special
