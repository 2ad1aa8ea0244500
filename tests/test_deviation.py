"""The deviation oracle (audee/oracle/deviation.py): the normalized score, its tolerances,
the whole-model check with per-layer own-input judgement, and the fitness built on it."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Finding, Kind, Outcome, TestCase
from audee.engine.execute import Executor
from audee.fitness import inconsistency_fitness
from audee.oracle.deviation import (Tolerance, Tolerances, compare, deviation_findings, deviation_score,
                                    normalized_error)
from audee.settings import TOLERANCES, FuzzSettings
from audee.cases.spec import ModelSpec
from audee.store.caserecord import CaseRecord
from tests.helpers import tiny_cnn, tiny_inputs

FAULTY = "tests.plugins:ScaledLayerBackend"  # TensorFlow with layer d2's output times 1.01


def _rows(*rows: list[float], dtype=np.float32) -> np.ndarray:
    return np.array(rows, dtype=dtype)


# ---- the score -----------------------------------------------------------------------------------
def test_score_is_scale_invariant_and_symmetric():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 10)).astype(np.float32)
    b = (a * (1 + 2e-3 * rng.normal(size=a.shape))).astype(np.float32)
    s = deviation_score(a, b)
    for k in (10.0, 1e3, 1e6):  # atol (1e-5) is negligible next to rtol * s (s ~ 2) at these scales
        np.testing.assert_allclose(deviation_score(a * np.float32(k), b * np.float32(k)), s, rtol=1e-2)
    # far below the atol scale only atol counts: the same relative error is no deviation
    assert (deviation_score(a * np.float32(1e-4), b * np.float32(1e-4)) < 1).all()
    np.testing.assert_array_equal(deviation_score(b, a), s)


def test_reference_is_the_row_maximum_so_cancellation_near_zero_is_not_flagged():
    # element 2 is a logit near zero made by cancellation; its rounding error is relative
    # to the row's magnitude (10), not to itself (1e-4)
    a = _rows([10.0, -3.0, 1e-4])
    b = _rows([10.0, -3.0, 1e-4 + 5e-6])
    assert deviation_score(a, b)[0] < 1.0
    err = normalized_error(a, b, Tolerance(1e-3, 1e-5))
    assert err[0, 2] == pytest.approx(5e-6 / (1e-5 + 1e-3 * 10.0), rel=1e-3)


def test_zero_rows_and_tolerance_edges():
    z = np.zeros((2, 5), np.float32)
    assert deviation_score(z, z).tolist() == [0.0, 0.0]
    tol = Tolerance(1e-3, 1e-5)
    # an all-zero row against a tiny one: only atol applies, s = the tiny value itself
    small = z.copy()
    small[0, 0] = 5e-6
    assert deviation_score(z, small, tol)[0] == pytest.approx(5e-6 / (1e-5 + 1e-3 * 5e-6), rel=1e-6)
    # exactly at the tolerance is 1 (not out); just above is out
    a = np.array([[1.0, 0.0]], np.float64)
    edge = 1e-5 + 1e-3 * 1.0
    for d, out in ((edge * 0.999, False), (edge * 1.001, True)):
        b = a.copy()
        b[0, 1] = d
        assert bool(deviation_score(a, b, tol)[0] > 1.0) is out
    # different shapes cannot agree
    assert np.isinf(deviation_score(np.zeros((2, 3)), np.zeros((2, 4)))).all()


def test_dtype_defaults_and_lowest_precision_wins():
    t = Tolerances()
    assert t.float32 == Tolerance(*TOLERANCES["float32"]) == Tolerance(1e-3, 1e-5)
    assert t.float16.rtol > t.float32.rtol and t.bfloat16.rtol > t.float16.rtol
    a32, a16 = np.zeros((1, 2), np.float32), np.zeros((1, 2), np.float16)
    assert t.dtype_of(a32, a32) == "float32" and t.dtype_of(a32, a16) == "float16"
    assert t.dtype_of(a32.astype(np.float64), a32.astype(np.float64)) == "float32"
    # 0.5% off: out of tolerance in float32, within it in float16
    a = _rows([1.0, 2.0])
    b = _rows([1.0, 2.01])
    assert compare(a, b)["score"] > 1 and compare(a.astype(np.float16), b.astype(np.float16))["score"] < 1
    # settings carry the same defaults, one flag per dtype and bound, and round-trip
    s = FuzzSettings()
    assert Tolerances.from_json(s.tolerances()) == t
    custom = FuzzSettings(float32_rtol=0.1).tolerances()
    assert Tolerances.from_json(custom).float32 == Tolerance(0.1, 1e-5)
    assert Tolerances.from_json({}) == t


def test_non_finite_rows_are_left_to_the_nan_oracle():
    a = _rows([1.0, 2.0], [1.0, np.nan], [1.0, 1.0])
    b = _rows([1.0, 2.5], [1.0, 1.0], [1.0, 1.0])
    c = compare(a, b)
    assert c["rows"] == [0] and c["n"] == 4  # row 1 is not judged here
    assert np.isinf(deviation_score(a, b)[1])  # the fitness still sees it as maximal disagreement
    same = _rows([np.inf, 1.0])
    assert deviation_score(same, same)[0] == 0.0


def test_finding_contract_and_label_flips_stay_inconsistency():
    a = Outcome("x", logits=_rows([1.0, 2.0], [3.0, 1.0]), output=_rows([1.0, 2.0], [3.0, 1.0]))
    b = Outcome("y", logits=_rows([1.0, 2.05], [3.0, 1.0]), output=_rows([1.0, 2.05], [3.0, 1.0]))
    (f,) = deviation_findings([a, b])
    assert f.kind == Kind.DEVIATION and f.is_failure and f.backends == ["x", "y"]
    d = f.detail
    assert d.pair == "x|y" and d.tensor == "logits" and d.rows == [0]
    assert d.n_out == 1 and d.n == 4 and d.dtype == "float32"
    assert d.max_abs == pytest.approx(0.05, rel=1e-4) and d.max_rel == pytest.approx(0.05 / 2.05, rel=1e-4)
    assert d.score == pytest.approx(0.05 / (1e-5 + 1e-3 * 2.05), rel=1e-4)
    assert d.tolerance.to_json() == {"rtol": 1e-3, "atol": 1e-5}
    assert d.first_layer is None and d.own_layers == [] and d.own == {}
    assert Finding.from_json(f.to_json()).detail == d
    assert deviation_findings([a, b], {"float32": {"rtol": 0.1, "atol": 0.0}}) == []


def test_fitness_is_the_normalized_score():
    x = _rows([1.0, 2.0], [0.0, 0.0])
    outs = {"x": x, "y": x * np.float32(1.01), "z": x}
    best, pair = inconsistency_fitness(outs)
    np.testing.assert_allclose(best, [0.02 / (1e-5 + 1e-3 * 2.02), 0.0], rtol=1e-4)
    assert pair[0] in ("x|y", "y|z")
    big = {k: v * np.float32(1e6) for k, v in outs.items()}
    np.testing.assert_allclose(inconsistency_fitness(big)[0], best, rtol=1e-2)  # atol no longer counts


# ---- real frameworks -------------------------------------------------------------------------------
def mlp(name: str = "mlp") -> ModelSpec:
    """Dense -> Dense (d2, the faulted one) -> Dense logits -> Softmax."""
    return ModelSpec.from_json({
        "name": name,
        "inputs": [{"name": "x", "shape": [8], "range": [0, 1]}],
        "layers": [
            {"name": "d1", "api": "Dense", "params": {"units": 16, "activation": "relu"}, "inputs": ["x"]},
            {"name": "d2", "api": "Dense", "params": {"units": 16, "activation": "tanh"}, "inputs": ["d1"]},
            {"name": "logits", "api": "Dense", "params": {"units": 4}, "inputs": ["d2"], "fixed": ["units"]},
            {"name": "softmax", "api": "Softmax", "params": {}, "inputs": ["logits"]},
        ],
        "output": "softmax", "logits": "logits"})


@pytest.fixture(scope="module")
def fault_pool(tmp_path_factory):
    with Pool(parse_backends(f"tensorflow,jax,{FAULTY}"), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


def test_one_percent_single_layer_fault_is_a_deviation_at_that_layer(fault_pool, tmp_path):
    ex = Executor(fault_pool, tolerances=FuzzSettings().tolerances())
    case = TestCase("mlp-fault", mlp(), {}, {"x": np.random.default_rng(1).random((8, 8), dtype=np.float32)})
    ex.complete_weights(case, 3)
    result = ex.run(case)
    kinds = [f.kind for f in result.verdict.findings]
    assert Kind.INCONSISTENCY not in kinds, result.verdict.to_json()   # no label flips
    devs = {f.detail.pair: f for f in result.verdict.findings if f.kind == Kind.DEVIATION}
    assert set(devs) == {f"tensorflow|{FAULTY}", f"jax|{FAULTY}"}   # tensorflow and jax agree
    d = devs[f"tensorflow|{FAULTY}"].detail
    assert d.pair == f"tensorflow|{FAULTY}" and d.tensor == "logits"
    assert d.score > 1 and 1e-3 < d.max_rel < 0.05 and d.n_out > 0 and d.rows
    assert d.first_layer == "d2"                          # d1 agrees; d2 is the first one out
    assert d.own_layers == ["d2"]                         # logits and softmax only carry it on
    assert d.own["d2"].score > 1 and d.own["logits"].score < 1
    assert d.own["d2"].max_rel == pytest.approx(0.01 / 1.01, rel=0.05)
    # the tolerances travel with the case file, and a re-judgement with them agrees
    from audee.fuzz import case_record

    rec = case_record(result, fault_pool, {"seed": "mlp"}, tolerances=FuzzSettings().tolerances())
    back = CaseRecord.from_file(rec.to_file(tmp_path / "c.pkl"))
    assert back.tolerances == FuzzSettings().tolerances()
    loose = Executor(fault_pool, tolerances={"float32": {"rtol": 0.05, "atol": 1e-5}}).run(back.test_case())
    assert Kind.DEVIATION not in loose.verdict.kinds()


def test_fitness_of_agreeing_backends_stays_below_one_at_any_input_scale(fault_pool):
    """TensorFlow against JAX on tiny_cnn: they differ by rounding only, and the score
    stays below 1 however large or small the inputs (the Definition 4 distance grows)."""
    spec = tiny_cnn()
    ex = Executor(fault_pool)
    case = TestCase("tiny", spec, {}, tiny_inputs(8))
    ex.complete_weights(case, 0)
    for k in (1e-3, 1.0, 1e3, 1e6):
        x = {n: v * np.float32(k) for n, v in case.inputs.items()}
        got = fault_pool.run(spec, case.weights, "w", x, labels=["tensorflow", "jax"])
        logits = {b: r["logits"] for b, r in got.items()}
        best, _ = inconsistency_fitness(logits, ex.tolerances)
        assert (best < 1.0).all(), (k, best)
        dist = np.abs(logits["tensorflow"].astype(np.float64) - logits["jax"]).mean()
        print(f"input scale {k:g}: fitness max {best.max():.3g}, Definition 4 distance {dist:.3g}")


# ---- attribution: conditioning and the layers worth judging alone (no framework) ----------------
def test_a_layer_is_blamed_only_when_well_conditioned():
    from audee.oracle.deviation import CONDITIONING_FACTOR, attributed

    assert attributed(10.0, 1e-4)                        # a 1% fault in a stable layer
    assert not attributed(0.9, 0.0)                      # within tolerance is never blamed
    assert not attributed(1000.0, 1000.0)                # chaotic: rounding noise moves it as much
    assert not attributed(5.0, 5.0 / CONDITIONING_FACTOR)  # must clearly exceed its own sensitivity
    assert attributed(5.0, 0.99 * 5.0 / CONDITIONING_FACTOR)


def test_perturbation_is_rounding_sized_deterministic_and_leaves_integers_alone():
    from audee.oracle.deviation import PERTURBATION, perturbed

    x = {"f": np.linspace(-3, 3, 1000, dtype=np.float32).reshape(10, 100), "ids": np.arange(10, dtype=np.int32)}
    a, b = perturbed(x), perturbed(x)
    assert np.array_equal(a["f"], b["f"]) and a["f"].dtype == np.float32
    rel = np.abs(a["f"].astype(np.float64) - x["f"]) / np.maximum(np.abs(x["f"]), 1e-30)
    assert rel.max() <= 2 * PERTURBATION and rel.max() > 0
    assert np.array_equal(a["ids"], x["ids"])


def test_judged_layers_are_the_first_out_of_tolerance_then_the_biggest_jumps():
    from audee.oracle.deviation import jump_order

    order = ["a", "b", "c", "d", "e"]
    preds = {"a": [], "b": ["a"], "c": ["b"], "d": ["c"], "e": ["d"]}
    scores = {"a": {"score": 0.1}, "b": {"score": 2.0}, "c": {"score": 2.1}, "d": {"score": 50.0}, "e": {"score": 51.0}}
    got = jump_order(scores, order, lambda n: preds[n])
    assert got[0] == "b"                 # first out of tolerance
    assert got[1] == "d"                 # where the score jumps, not where it is carried
    assert set(got) == {"b", "c", "d", "e"}
    assert jump_order({"a": {"score": 0.5}}, ["a"], lambda n: []) == []


def test_the_conditioning_perturbation_is_at_least_two_ulps_of_the_data_dtype():
    from audee.oracle.deviation import PERTURBATION, perturbed, rounding_for

    x16 = {"x": np.linspace(0.5, 1.5, 64).astype(np.float16)}
    assert rounding_for("full", {"x": np.ones(2, np.float32)}) == PERTURBATION
    assert rounding_for("full", x16) == 2.0 ** -9 and rounding_for("tf32", x16) == 2.0 ** -9
    assert (perturbed(x16, size=PERTURBATION)["x"] == x16["x"]).all()        # float32 noise vanishes in float16
    assert (perturbed(x16, size=rounding_for("full", x16))["x"] != x16["x"]).any()


def test_the_perturbation_moves_bfloat16_and_keeps_finite_values_finite():
    """A probe that leaves a bfloat16 input as it is calls every bfloat16 layer perfectly
    conditioned; one that moves a float16 near-maximum to Inf probes another computation."""
    import ml_dtypes

    from audee.oracle.deviation import perturbed, rounding_for

    xb = {"x": np.linspace(0.5, 1.5, 64).astype(ml_dtypes.bfloat16)}
    moved = perturbed(xb, size=rounding_for("full", xb))["x"]
    assert moved.dtype == xb["x"].dtype and (moved != xb["x"]).any()
    top = np.full(256, 65504.0, np.float16)
    edge = {"x": np.concatenate([top, -top, [np.inf, np.nan]]).astype(np.float16)}
    out = perturbed(edge, size=rounding_for("full", edge))["x"]
    assert np.isfinite(out[:-2]).all() and np.isinf(out[-2]) and np.isnan(out[-1])


def test_a_layer_fed_a_bfloat16_policy_output_is_judged_alone(fault_pool):
    """Under a bfloat16 policy each layer's output is a bfloat16 array, which no model input can
    be: fed as it was, the layer alone failed on every backend and no deviation in such a model
    was ever judged alone (the api-cpu campaign, rng 2833: a GroupQueryAttention behind a
    bfloat16 Dense announced as a new bug where the layer alone is bit-identical)."""
    from audee.cases.spec import weights_key

    raw = mlp("mlp-bf16").to_json()
    for layer in raw["layers"]:
        layer["params"]["dtype"] = "bfloat16"
    spec = ModelSpec.from_json(raw)
    ex = Executor(fault_pool, tolerances=FuzzSettings().tolerances())
    case = TestCase("mlp-bf16", spec, {}, {"x": np.random.default_rng(2).random((4, 8), dtype=np.float32)})
    ex.complete_weights(case, 3)
    got = ex.pool_run(spec, case.weights, weights_key(case.weights), case.inputs, labels=["tensorflow"], layers=True)
    fed = got["tensorflow"]["layers"]
    assert fed["d1"].dtype.name == "bfloat16"
    replies = ex._run_alone(case, "d2", fed, case.inputs, ["tensorflow", "jax"])
    assert all(isinstance(replies.get(b), dict) for b in ("tensorflow", "jax")), replies
    np.testing.assert_array_equal(np.asarray(replies["tensorflow"]["logits"], np.float32),
                                  np.asarray(fed["d2"], np.float32))   # the same layer on the same input


def test_a_layer_is_judged_alone_at_the_batch_size_the_case_ran(tmp_path):
    """A deviation is diagnosed on its worst rows, repeated to the case's batch size: a backend
    whose ``logits`` kernel is wrong only on fewer than 8 rows (a kernel picked by size) is
    right at the case's 8, so only its ``d2`` fault is blamed; judged on the worst rows alone,
    ``logits`` would be blamed too (rng 2990's JAX GroupNormalization, its multi-axis mean
    summed sequentially on one row and in a YNNPACK fusion on the case's batch)."""
    from audee.oracle.attribution import batch_of

    assert batch_of([4], {"x": np.zeros((8, 3))}) == [4] * 8
    assert batch_of([1, 5, 6], {"x": np.zeros((8, 3))}) == [1, 5, 6, 1, 5, 6, 1, 5]
    assert batch_of([0, 1], {"x": np.zeros((2, 3)), "scalar": np.float32(1)}) == [0, 1]
    small = "tests.plugins:SmallBatchKernelJax"
    with Pool(parse_backends(f"jax,{small}"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool, tolerances=FuzzSettings().tolerances())
        case = TestCase("mlp-batch", mlp(), {}, {"x": np.random.default_rng(1).random((8, 8), dtype=np.float32)})
        ex.complete_weights(case, 3)
        result = ex.run(case)
    (dev,) = [f for f in result.verdict.findings if f.kind == Kind.DEVIATION]
    from audee.engine.execute import DIAGNOSE_INPUTS

    assert DIAGNOSE_INPUTS // 2 < len(dev.detail.rows) == 8   # diagnosed on 4 of the 8 rows it shows on
    assert dev.detail.own_layers == ["d2"], dev.to_json()
    assert dev.detail.own["logits"].score < 1
