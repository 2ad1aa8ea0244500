"""Non-finite patterns (audee.oracle.nan): where NaN/Inf are, on each backend.

Unit tests of the element-wise comparison need no framework; the end-to-end tests run a
NaN-bearing input through real workers (JAX and PyTorch, and JAX-based plugins from
tests/plugins.py that scrub NaN from their inputs).
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Finding, Kind, Outcome, Verdict
from audee.oracle.nan import (amplified_rounding, compare_codes, condition_pattern, diagnose_patterns, diagnose_rows,
                              has_nonfinite, nan_findings, nonfinite_codes, overflow_scale, same_difference,
                              settle_conditioning, state_at_overflow_scale, without_nonfinite)

NAN, INF = float("nan"), float("inf")


def _out(name: str, out, layers: list[str] | None = None) -> Outcome:
    out = np.asarray(out, np.float32)
    if layers is None:
        layers = [] if np.isfinite(out).all() else ["logits"]
    return Outcome(name, logits=out, output=out, nonfinite=layers)


# ---- (d) the mask comparison, no framework ------------------------------------------------------
def test_codes_tell_nan_from_each_infinity():
    assert nonfinite_codes(np.array([1.0, NAN, INF, -INF])).tolist() == [0, 1, 2, 3]
    assert not nonfinite_codes(np.array([1, 2], np.int32)).any()
    assert has_nonfinite({"x": np.array([0.0, NAN])}) and not has_nonfinite({"x": np.zeros(2), "t": np.arange(2)})


def test_bfloat16_arrays_hold_values_whose_nan_and_inf_count():
    """Every framework hands a bfloat16 tensor out as ml_dtypes' bfloat16, which NumPy calls void:
    its NaN and Inf are the oracle's as a float32's are.  A bfloat16 backend and one whose layer
    returns float32 (TensorFlow's resize), NaN at the same places, agree (the api-cpu campaign,
    rng 2860: TensorFlow alone was called non-finite, the others' bfloat16 NaN unseen)."""
    import ml_dtypes

    from audee.backends.worker import _nonfinite

    row = np.array([[1.0, NAN, INF, -INF]], np.float32)
    bf = row.astype(ml_dtypes.bfloat16)
    assert nonfinite_codes(bf).tolist() == [[0, 1, 2, 3]] and has_nonfinite({"x": bf})
    assert _nonfinite(["layer"], [bf]) == (["layer"], {"layer": [0]})
    tf = Outcome("tensorflow", logits=row, output=row, nonfinite=["layer"])
    torch = Outcome("torch", logits=bf, output=bf, nonfinite=["layer"])
    (f,) = nan_findings([tf, torch], {"x": np.ones((1, 3), np.float32)})
    assert not f.detail.strong and f.detail.patterns == {} and f.detail.counts["torch"] == {"nan": 1, "+inf": 1,
                                                                                          "-inf": 1}


def test_compare_codes_counts_and_gives_an_example():
    a = np.array([[0.0, NAN, 1.0], [NAN, 2.0, INF]], np.float32)
    b = np.array([[5.0, NAN, 1.0], [3.0, NAN, NAN]], np.float32)  # finite values may differ: only kinds count
    got = compare_codes(a, b)
    assert got == {"elements": 3, "index": [1, 0], "values": ["nan", "finite"], "rows": [1]}
    assert compare_codes(a, a.copy()) is None
    assert compare_codes(a, np.zeros((3, 2))) is None  # shapes: the inconsistency oracle's business


def test_nan_on_one_backend_finite_on_the_other_is_strong_even_when_outputs_agree_elsewhere():
    a = _out("a", [[0.1, 0.9], [NAN, NAN]])
    b = _out("b", [[0.1, 0.9], [0.5, 0.5]])
    (f,) = nan_findings([a, b], {"x": np.ones((2, 3))})
    assert f.kind == Kind.NAN and f.is_failure and f.detail.strong
    p = f.detail.patterns["a|b"]
    assert p.elements == 2 and p.example.to_json() == {"array": "output", "index": [1, 0], "a": "nan", "b": "finite"}
    assert p.first_layer == "logits" and p.first_layer_from == "layer-lists"
    assert sorted(f.backends) == ["a", "b"] and f.detail.finite_backends == ["b"]


def test_nan_against_inf_at_the_same_element_is_a_pattern_difference():
    (f,) = nan_findings([_out("a", [[NAN, 1.0]]), _out("b", [[INF, 1.0]])])
    assert f.kind == Kind.NAN and f.detail.strong
    assert f.detail.patterns["a|b"].example.codes() == {"a": "nan", "b": "+inf"}


def test_same_nan_from_finite_inputs_is_the_plain_nan_finding():
    outs = [_out(n, [[NAN, 1.0], [0.0, 1.0]]) for n in ("a", "b", "c")]
    (f,) = nan_findings(outs, {"x": np.ones((2, 3), np.float32)})
    assert f.kind == Kind.NAN and f.is_failure and not f.detail.strong and f.detail.patterns == {}
    assert f.backends == ["a", "b", "c"] and f.detail.first_layer == {"a": "logits", "b": "logits", "c": "logits"}


def test_same_nan_propagated_from_a_nan_input_is_not_a_failure():
    outs = [_out(n, [[NAN, NAN], [0.0, 1.0]]) for n in ("a", "b")]
    (f,) = nan_findings(outs, {"x": np.array([[NAN, 1.0], [0.0, 1.0]], np.float32)})
    assert f.kind == Kind.NAN_PROPAGATED and not f.is_failure and f.detail.input_nonfinite
    assert Verdict([f]).status == "pass"
    # one backend alone: nothing to compare, still propagation
    (f,) = nan_findings(outs[:1], {"x": np.array([INF])})
    assert f.kind == Kind.NAN_PROPAGATED


def test_a_nan_input_that_one_backend_drops_is_a_finding():
    (f,) = nan_findings([_out("a", [[NAN, NAN]]), _out("b", [[0.3, 0.7]])], {"x": np.array([[NAN]])})
    assert f.kind == Kind.NAN and f.detail.strong and f.detail.input_nonfinite


def test_an_intermediate_layer_non_finite_on_one_backend_only_is_a_pattern_difference():
    a = _out("a", [[0.0, 1.0]], layers=["conv"])  # NaN in conv, gone by the output (say, a max that drops it)
    b = _out("b", [[0.0, 1.0]], layers=[])
    (f,) = nan_findings([a, b])
    assert f.detail.strong and f.detail.patterns["a|b"].first_layer == "conv"
    assert f.detail.patterns["a|b"].elements == 0 and f.detail.patterns["a|b"].arrays == []


def test_all_finite_gives_nothing():
    assert nan_findings([_out("a", [[0.0, 1.0]]), _out("b", [[0.0, 2.0]])], {"x": np.ones(2)}) == []


def test_diagnosis_finds_the_first_layer_whose_masks_differ():
    f = Finding(Kind.NAN, ["a", "b"], {"patterns": {"a|b": {"first_layer": None, "arrays": ["output"]}}})
    la = {"conv": np.array([[1.0, 2.0], [NAN, 0.0]]), "pool": np.array([[1.0], [NAN]]), "out": np.array([[NAN], [NAN]])}
    lb = {"conv": np.array([[1.0, 2.0], [NAN, 0.0]]), "pool": np.array([[1.0], [0.0]]), "out": np.array([[0.0], [0.0]])}
    diagnose_patterns(f, {"a": la, "b": lb}, rows=[4, 9])
    p = f.detail.patterns["a|b"]
    assert p.first_layer == "pool" and p.first_layer_from == "layers" and p.layer_elements == 1
    assert p.layer_example.to_json() == {"index": [9, 0], "a": "nan", "b": "finite"}  # row 1 of the subset is batch row 9


def test_diagnose_rows_prefers_rows_with_non_finite_values():
    outs = [_out("a", [[0.0], [NAN], [0.0]]), _out("b", [[0.0], [0.0], [0.0]])]
    assert diagnose_rows(outs, {"x": np.array([[INF], [0.0], [0.0]])}, 8) == [0, 1]
    assert diagnose_rows([_out("a", [[0.0]] * 3)], {}, 2) == [0, 1]
    # two backends that returned more rows than the batch has (another shape: rng 2988's MultiHeadAttention)
    # name only rows of the batch, which the diagnosis slices the inputs by
    longer = [[0.0], [0.0], [0.0], [NAN]]
    assert diagnose_rows([_out("a", longer), _out("b", [[0.0]] * 4)], {"x": np.zeros((3, 1))}, 8) == [0, 1, 2]


# ---- (a)-(c) on real frameworks -----------------------------------------------------------------
SCRUB = "tests.plugins:NanScrubbingBackend"
SCRUB0 = "tests.plugins:FirstRowScrubbingBackend"


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends(f"jax,torch,{SCRUB},{SCRUB0}"), tmp_path_factory.mktemp("logs"), timeout=120) as p:
        assert p.start() == {}
        yield p


class _Only:
    """The module's pool seen as a pool of some of its backends."""

    def __init__(self, pool, labels: list[str]):
        self.pool, self.labels = pool, labels

    def build(self, spec, labels=None):
        return self.pool.build(spec, labels or self.labels)

    def run(self, *args, labels=None, **kwargs):
        return self.pool.run(*args, labels=labels or self.labels, **kwargs)

    def submit_run(self, *args, labels=None, **kwargs):
        return self.pool.submit_run(*args, labels=labels or self.labels, **kwargs)

    def collect_run(self, tickets):
        return self.pool.collect_run(tickets)

    @property
    def precisions(self):
        return {k: v for k, v in self.pool.precisions.items() if k in self.labels}

    def versions(self):
        return {k: v for k, v in self.pool.versions().items() if k in self.labels}


def _run(pool, labels: list[str], nan_rows: list[int]):
    """The tiny CNN on a batch of 4 with one NaN pixel in each of ``nan_rows``, on ``labels``."""
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.fuzz import result_row
    from tests.helpers import tiny_cnn, tiny_inputs

    x = tiny_inputs(4)
    for r in nan_rows:
        x["image"][r, 4 + r, 5, 0] = np.nan
    case = TestCase("nan-input", tiny_cnn(), {}, x)
    ex = Executor(_Only(pool, labels))
    ex.complete_weights(case, weight_seed=0)
    result = ex.run(case)
    assert np.isnan(case.inputs["image"]).sum() == len(nan_rows)  # nothing scrubbed the case itself
    return result, result_row(result, {}).to_json()


def _nan(result) -> Finding:
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    return f


def test_a_nan_input_one_backend_propagates_and_another_scrubs_is_flagged(pool):
    result, row = _run(pool, ["jax", SCRUB], [0])
    assert np.isnan(result.outcomes["jax"].output[0]).all()     # the worker path passed the NaN through
    assert np.isfinite(result.outcomes[SCRUB].output).all()
    f = _nan(result)
    assert f.kind == Kind.NAN and f.detail.strong and result.verdict.failed and row["nan_strong"]
    p = f.detail.patterns[f"jax|{SCRUB}"]
    assert p.example.index[0] == 0 and p.example.codes() == {"jax": "nan", SCRUB: "finite"}
    assert p.elements == 5
    assert p.first_layer == "conv" and p.first_layer_from == "layers"  # from per-layer masks
    assert p.layer_example.index[0] == 0
    # the NaN row is left to this oracle: no label flip is claimed on it
    assert not [g for g in result.verdict.findings if g.kind == Kind.INCONSISTENCY and 0 in g.detail.inputs]


def test_the_same_nan_input_propagated_identically_is_not_a_failure(pool, tmp_path):
    from audee.fuzz import case_record
    from audee.store import CaseRecord, save_case

    result, row = _run(pool, ["jax", "torch"], [0, 2])
    f = _nan(result)
    assert f.kind == Kind.NAN_PROPAGATED, f.detail.patterns
    assert not result.verdict.failed and result.verdict.status == "pass"
    assert row["propagated_nonfinite"] and not row["nan_strong"] and row["nan"] == {}
    assert np.isnan(result.outcomes["torch"].output[[0, 2]]).all() and np.isfinite(result.outcomes["torch"].output[1]).all()
    # a case file holding the information finding writes and reads back (a user's own NaN inputs)
    path = save_case(tmp_path / "p.pkl", case_record(result, pool, {}))
    assert CaseRecord.from_file(path).verdict_obj().kinds() == [Kind.NAN_PROPAGATED]


def test_nan_on_both_backends_at_different_places_is_flagged(pool):
    result, _ = _run(pool, ["jax", SCRUB0], [0, 1])  # both have NaN in row 1; only jax in row 0
    assert np.isnan(result.outcomes[SCRUB0].output[1]).all() and np.isfinite(result.outcomes[SCRUB0].output[0]).all()
    f = _nan(result)
    # SCRUB0 is finite in row 0 where jax is not: named, though both hold NaN somewhere
    assert f.kind == Kind.NAN and f.detail.strong and f.detail.finite_backends == [SCRUB0]
    p = f.detail.patterns[f"jax|{SCRUB0}"]
    assert p.elements == 5 and p.example.index[0] == 0
    assert p.layer_example.index[0] == 0


DIES_ONCE = "tests.plugins:DiesOnceScrubbing"
DIES_ALWAYS = "tests.plugins:DiesOnFewRowsScrubbing"


def test_a_backend_whose_worker_ends_during_the_nan_diagnosis_is_asked_again_or_set_aside(tmp_path):
    """The per-layer run of a NaN diagnosis on a worker that ends (exit code 9, the memory
    watchdog: JAX in the api-cpu campaign, rng 3027): a fresh worker is asked once more and
    its layers judge the pair; a backend whose per-layer run fails again leaves its pairs
    ``lost``, never a difference that stood, and its signature says the diagnosis was lost."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.triage.signature import DIAGNOSIS_LOST, signatures_of

    with Pool(parse_backends(f"jax,torch,{DIES_ONCE},{DIES_ALWAYS}"), tmp_path / "logs", timeout=120) as p:
        assert p.start() == {}
        result, _ = _run(p, ["jax", DIES_ONCE], [0])
        pattern = _nan(result).detail.patterns[f"jax|{DIES_ONCE}"]
        assert pattern.first_layer == "conv" and pattern.first_layer_from == "layers" and pattern.lost is None
        result, _ = _run(p, ["jax", "torch", DIES_ALWAYS], [0])
        f = _nan(result)
        assert f.kind == Kind.NAN and f.detail.strong
        for key in (f"jax|{DIES_ALWAYS}", f"torch|{DIES_ALWAYS}"):
            lost = f.detail.patterns[key].lost
            assert list(lost) == [DIES_ALWAYS] and "code 9" in lost[DIES_ALWAYS], lost
            assert f.detail.patterns[key].first_layer_from != "layers"
        assert f.detail.odd == [DIES_ALWAYS]   # the whole patterns still tell: jax and torch agree
        (sig,) = signatures_of(f, result.case.spec, {})
        assert DIAGNOSIS_LOST + DIES_ALWAYS in sig.context


# ---- the conditioning rule (audee.oracle.nan.condition_pattern) ----------------------------------
def test_overflow_scale_is_the_square_root_of_the_dtype_maximum():
    assert overflow_scale({"x": np.array([1.9e19], np.float32)})
    assert not overflow_scale({"x": np.array([1.7e19, NAN, INF], np.float32), "ids": np.array([10 ** 9])})
    assert overflow_scale({"x": np.array([300.0], np.float16)})  # float16: sqrt(65504) = 256


def test_same_overflow_from_an_overflow_scale_input_is_propagation_not_a_nan_bug():
    x = {"x": np.array([[3e38, 1.0]], np.float32)}
    (f,) = nan_findings([_out("a", [[INF, 1.0]]), _out("b", [[INF, 1.0]])], x)
    assert f.kind == Kind.NAN_PROPAGATED and f.detail.input_overflow_scale
    (g,) = nan_findings([_out("a", [[INF, 1.0]]), _out("b", [[INF, 1.0]])], {"x": np.array([[3e3, 1.0]], np.float32)})
    assert g.kind == Kind.NAN  # the paper's NaN oracle: Inf from ordinary finite inputs


def test_condition_pattern_clears_accumulated_overflow_and_ill_conditioned_differences_only():
    fed = {"x": np.array([[1.0, 2.0]], np.float32)}
    same = {"a": np.array([1.0, INF]), "b": np.array([1.0, INF])}
    differ = {"a": np.array([1.0, INF]), "b": np.array([1.0, 3e38])}
    assert condition_pattern(fed, same, None) == "accumulated"        # alone on one input they agree
    assert condition_pattern({"x": np.array([3e38], np.float32)}, differ, None) == "overflow"
    moved = {"a": np.array([1.0, 3e38]), "b": np.array([1.0, 3e38])}   # rounding noise moves a's pattern
    assert condition_pattern(fed, differ, moved) == "ill_conditioned"
    assert condition_pattern(fed, differ, differ) is None             # stable and own: it stands
    # a layer fed NaN/Inf is judged on what it does with them, whatever the scale of the rest
    assert condition_pattern({"x": np.array([3e38, NAN], np.float32)}, differ, differ) is None


def test_a_finding_whose_pairs_are_all_cleared_is_no_longer_strong():
    x = {"x": np.array([[3e38, 1.0]], np.float32)}
    (f,) = nan_findings([_out("a", [[INF, 1.0]]), _out("b", [[3e38, 1.0]])], x)
    assert f.kind == Kind.NAN and f.detail.strong
    f.detail.patterns["a|b"].cleared = "overflow"
    settle_conditioning(f)
    assert f.kind == Kind.NAN_PROPAGATED and not f.detail.strong
    (g,) = nan_findings([_out("a", [[INF, 1.0]]), _out("b", [[3e3, 1.0]])], {"x": np.array([[1.0, 1.0]], np.float32)})
    g.detail.patterns["a|b"].cleared = "ill_conditioned"
    settle_conditioning(g)
    assert g.kind == Kind.NAN and not g.detail.strong  # still the paper's NaN: Inf from a plain input


OVERFLOW = "tests.plugins:HalvedDenseJax"


def _dense_case(scale: float):
    """One Dense layer whose exact result is finite but whose float32 partial sums
    overflow at ``scale`` 1e38 (weights +1, +1, -1 on three equal inputs)."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "overflow", "inputs": [{"name": "x", "shape": [3], "range": [0, 1]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 1, "use_bias": False}, "inputs": ["x"]}],
        "output": "d", "logits": "d"})
    x = np.full((2, 3), scale, np.float32)
    return TestCase(f"overflow-{scale}", spec, {"d": [np.array([[1.0], [1.0], [-1.0]], np.float32)]}, {"x": x})


def test_overflow_decided_by_summation_order_is_cleared_end_to_end(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends(f"jax,{OVERFLOW}"), tmp_path_factory.mktemp("logs"), timeout=120) as p:
        assert p.start() == {}
        ex = Executor(p)
        big = ex.run(_dense_case(3e38))
        assert np.isinf(big.outcomes["jax"].output).all()               # plain float32: the partial sum overflows
        assert np.isfinite(big.outcomes[OVERFLOW].output).all()        # halved: finite, the exact 3e38
        (f,) = [f for f in big.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
        assert f.detail.patterns[f"jax|{OVERFLOW}"].cleared == "overflow"
        assert f.kind == Kind.NAN_PROPAGATED and not big.verdict.failed
        small = ex.run(_dense_case(1.0))
        assert small.verdict.findings == []


def test_an_activation_magnifying_a_rounding_difference_of_the_linear_part_is_cleared_only_then():
    """Split a layer into its linear part (``pre``) and its activation (``act[(backend, fed
    from)]``): the pattern difference is the activation's magnification of a difference
    inside tolerance only when both parts agree and the split computes what each whole
    layer computed (the api-cpu campaign, rng 2869: TensorFlow's float16 depthwise sum two
    ulps high, exp past float16's maximum)."""
    alone = {"a": np.array([[INF, 1.0]]), "b": np.array([[6e4, 1.0]])}
    pre = {"a": np.array([[11.09, 0.0]]), "b": np.array([[11.08, 0.0]])}
    act = {("a", "a"): alone["a"], ("b", "a"): alone["a"], ("b", "b"): alone["b"], ("a", "b"): alone["b"]}
    close, far = (lambda u, v: True), (lambda u, v: False)
    assert amplified_rounding(alone, pre, act, close)
    assert not amplified_rounding(alone, pre, act, far)                          # the linear parts disagree
    assert not amplified_rounding(alone, {**pre, "b": np.array([[NAN, 0.0]])}, act, close)
    fused = {**act, ("a", "a"): np.array([[6e4, 1.0]])}                          # a's whole layer is not its split
    assert not amplified_rounding(alone, pre, fused, close)
    own = {**act, ("b", "a"): np.array([[6e4, 1.0]])}                             # the activations differ on one input
    assert not amplified_rounding(alone, pre, own, close)
    assert not amplified_rounding(alone, pre, {k: v for k, v in act.items() if k != ("a", "b")}, close)


NUDGED, FUSED = "tests.plugins:NudgedDenseJax", "tests.plugins:FusedNanDenseJax"


def _exp_dense_case():
    """One Dense layer with an exponential activation fed 88.72: exp is 3.39e38, just below
    float32's maximum; 1e-4 more on its input (:class:`tests.plugins.NudgedDenseJax`)
    overflows it."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "exp-dense", "inputs": [{"name": "x", "shape": [1], "range": [0, 1]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 1, "use_bias": False,
                                                              "activation": "exponential"}, "inputs": ["x"]}],
        "output": "d", "logits": "d"})
    x = np.array([[88.72], [1.0]], np.float32)
    return TestCase("exp-dense", spec, {"d": [np.array([[1.0]], np.float32)]}, {"x": x})


def test_an_activation_carrying_a_rounding_difference_across_the_maximum_is_cleared_end_to_end(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    # TensorFlow recomputes the layer in float64 (JAX here cannot): exp(88.72) fits float32, so
    # the overflow-boundary rule does not take the difference first
    with Pool(parse_backends(f"tensorflow,{NUDGED},{FUSED}"), tmp_path_factory.mktemp("logs"), timeout=180) as p:
        assert p.start() == {}
        got = Executor(p).run(_exp_dense_case())
        assert np.isfinite(got.outcomes["tensorflow"].output).all()
        assert np.isinf(got.outcomes[NUDGED].output[0]).all() and np.isnan(got.outcomes[FUSED].output[0]).all()
        (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
        assert f.detail.patterns[f"tensorflow|{NUDGED}"].cleared == "amplified"
        # the fused kernel's NaN is its own: its split gives +inf, not the NaN its whole layer gave
        assert f.detail.patterns[f"tensorflow|{FUSED}"].cleared is None
        assert f.detail.patterns[f"tensorflow|{FUSED}"].own_layer == "d" and f.detail.strong


def test_a_recurrent_state_at_overflow_scale_before_the_differing_step_clears_only_then():
    """The state a recurrent layer carries into a step is that step's input: recomputed in
    float64 step by step (``states``: batch, steps, units), at overflow scale (>= 1.8e19 in
    float32) at an earlier step of the row, it explains a difference its saturated output
    hides (the api-cpu campaign, rngs 2851 and 2868: an LSTM's cell state past float32's
    range, selu bringing the output back)."""
    last = {"a": np.array([[1.0, NAN], [1.0, 1.0]], np.float32), "b": np.array([[1.0, -1.7], [1.0, 1.0]], np.float32)}
    states = {"x": np.array([[[1.0, 1.0], [1e24, 3.0], [1.0, 1e23]], [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]])}
    assert state_at_overflow_scale(last, states, sequences=False)
    calm = {"x": np.array([[[1.0, 1.0], [1e12, 3.0], [1.0, 1e23]], [[1.0, 1.0]] * 3])}
    assert not state_at_overflow_scale(last, calm, sequences=False)     # huge only at the last step itself
    assert not state_at_overflow_scale(last, {}, sequences=False)       # no float64 recomputation: no evidence
    seq = {"a": np.full((2, 3, 2), 1.0, np.float32), "b": np.full((2, 3, 2), 1.0, np.float32)}
    seq["a"][0, 1, 0] = NAN                                             # differs at step 1: before it, step 0 only
    assert not state_at_overflow_scale(seq, states, sequences=True)
    seq["a"][0, 1, 0], seq["a"][0, 2, 0] = 1.0, NAN                    # at step 2: step 1 held 1e24
    assert state_at_overflow_scale(seq, states, sequences=True)


HUGE = "tests.plugins:HugeStateNanJax"


def _rnn_case(recurrent: float):
    """A linear SimpleRNN of one unit over four steps of ones: its states are about 1, r,
    r^2 and r^3; with ``recurrent`` 1e10 the third step's 1e20 is at float32's overflow
    scale, with 1e5 none is.  :class:`tests.plugins.HugeStateNanJax` gives NaN for the last
    (1e30, 1e15) in both."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "rnn", "inputs": [{"name": "x", "shape": [4, 1], "range": [0, 1]}],
        "layers": [{"name": "r", "api": "SimpleRNN", "params": {"units": 1, "use_bias": False,
                                                                  "activation": "linear"}, "inputs": ["x"]}],
        "output": "r", "logits": "r"})
    weights = {"r": [np.array([[1.0]], np.float32), np.array([[recurrent]], np.float32)]}
    return TestCase(f"rnn-{recurrent}", spec, weights, {"x": np.ones((2, 4, 1), np.float32)})


def test_a_recurrent_state_at_overflow_scale_clears_a_difference_end_to_end(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    # TensorFlow recomputes the layer in float64 (JAX here cannot), and its states too
    with Pool(parse_backends(f"tensorflow,{HUGE}"), tmp_path_factory.mktemp("logs"), timeout=180) as p:
        assert p.start() == {}
        ex = Executor(p)
        big = ex.run(_rnn_case(1e10))              # last state 1e30, fed by a state of 1e20
        (f,) = [f for f in big.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
        assert f.detail.patterns[f"tensorflow|{HUGE}"].cleared == "overflow" and not f.detail.strong
        calm = ex.run(_rnn_case(1e5))              # last state 1e15, fed by states of 1e10 at most
        (g,) = [f for f in calm.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
        assert np.isfinite(calm.outcomes["tensorflow"].output).all() and np.isnan(calm.outcomes[HUGE].output).all()
        assert g.detail.patterns[f"tensorflow|{HUGE}"].cleared is None and g.detail.strong   # the plugin's own fault


def test_a_recurrent_state_at_overflow_scale_clears_a_difference_beside_a_nan_row(tmp_path_factory):
    """A special value placed in one batch row leaves the other rows' exploding state judgeable:
    a recurrent layer steps each row alone, so the float64 states of the rows the pair differs
    in are the same with the NaN row zeroed (:func:`audee.oracle.nan.rowwise_feed`; the api-cpu
    campaign, rng 3023: an Inf in row 0 of a ConvLSTM3D whose rows 1-7 overflowed).  Row 0's NaN
    is NaN on both; with it zeroed row 0 would differ too, so the difference is not the same on
    the cleaned input, and before, no state was recomputed at all."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor
    from audee.oracle.nan import rowwise_feed

    alone = {"a": np.array([[NAN, 1.0], [1.0, NAN]]), "b": np.array([[NAN, 1.0], [1.0, 2.0]])}
    fed = {"x": np.array([[NAN, 1.0], [1.0, 1.0]], np.float32)}
    assert rowwise_feed(fed, alone)["x"].tolist() == [[0.0, 1.0], [1.0, 1.0]]
    assert rowwise_feed({"x": np.array([[1.0, 1.0], [NAN, 1.0]], np.float32)}, alone) is None  # it differs there
    with Pool(parse_backends(f"tensorflow,{HUGE}"), tmp_path_factory.mktemp("logs"), timeout=180) as p:
        assert p.start() == {}
        ex = Executor(p)
        for recurrent, cleared in ((1e10, "overflow"), (1e5, None)):
            case = _rnn_case(recurrent)
            case.inputs["x"][0, 0] = NAN
            got = ex.run(case)
            (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
            assert f.detail.patterns[f"tensorflow|{HUGE}"].cleared == cleared, recurrent


def test_a_difference_no_nonfinite_input_reaches_is_judged_as_one_on_finite_values():
    """Values near float32's maximum in one window, an Inf in another: with the Inf set to 0
    the pair differs exactly as before, so the Inf is not what they differ on; where it
    reaches an element they differ at, the difference is not judged without it."""
    fed = {"x": np.array([[INF, 3e38, 3e38]], np.float32)}
    assert (without_nonfinite(fed)["x"] == np.array([[0.0, 3e38, 3e38]], np.float32)).all()
    assert without_nonfinite({"t": np.array([1, 2])})["t"].tolist() == [1, 2]
    alone = {"a": np.array([[INF, -INF]]), "b": np.array([[INF, NAN]])}
    assert same_difference(alone, {"a": np.array([[0.0, -INF]]), "b": np.array([[0.0, NAN]])})
    # the Inf reaches the element where they differ: with it gone they agree there, or differ otherwise
    assert not same_difference(alone, {"a": np.array([[0.0, 1.0]]), "b": np.array([[0.0, 1.0]])})
    assert not same_difference(alone, {"a": np.array([[0.0, -INF]]), "b": np.array([[0.0, INF]])})
    assert not same_difference(alone, {"a": np.array([[NAN, -INF]]), "b": np.array([[0.0, NAN]])})


def test_an_overflow_beside_an_inf_it_never_meets_is_cleared_end_to_end(tmp_path_factory):
    """:func:`_dense_case`'s overflow in one row, an Inf in the other: each row is its own sum,
    so the row of 3e38s overflows on plain float32 and not halved, as without the Inf."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    case = _dense_case(3e38)
    case.inputs["x"][0] = [INF, 1.0, 1.0]
    with Pool(parse_backends(f"jax,{OVERFLOW}"), tmp_path_factory.mktemp("logs"), timeout=120) as p:
        assert p.start() == {}
        got = Executor(p).run(case)
    assert np.isinf(got.outcomes["jax"].output).all() and np.isfinite(got.outcomes[OVERFLOW].output[1]).all()
    (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    assert f.detail.patterns[f"jax|{OVERFLOW}"].cleared == "overflow" and not f.detail.strong


def test_a_difference_only_the_whole_batch_shows_is_diagnosed_on_it(tmp_path_factory):
    """:class:`tests.plugins.BatchNanJax` makes its NaN only in a batch of more than four rows;
    the diagnosis re-runs the one row that differs (:func:`audee.oracle.nan.diagnose_rows`),
    where the pair agrees everywhere, so the whole batch is diagnosed, and there the
    difference stands at its layer (not ``unstable``)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    case = _dense_case(1.0)
    case.inputs["x"] = np.ones((8, 3), np.float32)
    batched = "tests.plugins:BatchNanJax"
    with Pool(parse_backends(f"jax,{batched}"), tmp_path_factory.mktemp("logs"), timeout=120) as p:
        assert p.start() == {}
        got = Executor(p).run(case)
    assert np.isnan(got.outcomes[batched].output[0]).all() and np.isfinite(got.outcomes["jax"].output).all()
    (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    p = f.detail.patterns[f"jax|{batched}"]
    assert p.cleared is None and p.first_layer_from == "layers" and p.own_layer == "d", p
    assert got.verdict.failed


def test_a_difference_the_same_inputs_do_not_show_again_is_cleared_as_unstable(tmp_path_factory):
    """:class:`tests.plugins.OnceNanJax` puts its NaN in the case's run only: re-run on the
    rows that differed and then on the whole batch, every layer agrees, so the pair is cleared
    ``unstable``: a weak finding, no backend named odd."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    case = _dense_case(1.0)
    case.inputs["x"] = np.ones((8, 3), np.float32)
    once = "tests.plugins:OnceNanJax"
    with Pool(parse_backends(f"jax,{once}"), tmp_path_factory.mktemp("logs"), timeout=120) as p:
        assert p.start() == {}
        got = Executor(p).run(case)
    assert np.isnan(got.outcomes[once].output[0]).all() and np.isfinite(got.outcomes["jax"].output).all()
    (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    p = f.detail.patterns[f"jax|{once}"]
    assert p.cleared == "unstable" and p.first_layer_from == "output", p
    assert not f.detail.strong


def test_diagnose_rows_take_the_rows_whose_patterns_differ_first():
    x = np.zeros((12, 2), np.float32)
    x[:10, 0] = NAN                                 # ten rows carry a NaN, propagated alike...
    a, b = x.copy(), x.copy()
    b[11, 1] = INF                                  # ...and row 11 differs
    rows = diagnose_rows([_out("a", a), _out("b", b)], {"x": x}, 4)
    assert 11 in rows and len(rows) == 4


def test_one_test_of_a_nonfinite_array_for_every_module_bfloat16_included():
    """A training step's gradients, a layer's output and a case's inputs are asked the same
    question: NaN or Inf among floats, ml_dtypes' bfloat16 included; integers never."""
    import ml_dtypes

    from audee.core.floats import holds_nonfinite

    assert holds_nonfinite(np.array([1.0, INF], np.float32).astype(ml_dtypes.bfloat16))
    assert not holds_nonfinite(np.ones(3, np.float32).astype(ml_dtypes.bfloat16))
    assert holds_nonfinite(np.array([NAN])) and not holds_nonfinite(np.arange(3)) and not holds_nonfinite(None)


FORWARD, INTERLEAVED, UNDIVIDED = ("tests.plugins:ForwardSumPoolJax", "tests.plugins:InterleavedSumPoolJax",
                                   "tests.plugins:UndividedPoolJax")


def test_an_intermediate_float32_overflow_of_one_summation_order_is_cleared_end_to_end(tmp_path_factory):
    """Average pooling of three windows in two orders of a float32 sum, first to last
    (:class:`tests.plugins.ForwardSumPoolJax`) and interleaved
    (:class:`tests.plugins.InterleavedSumPoolJax`): -3e38, inf, -3e38, 1 is inf one way and
    -inf + inf = NaN the other; 3e38, 3e38, -3e38, -3e38 is inf one way and 0 the other; 1, 2,
    3, 4 is 2.5 both ways.  The Inf keeps the finite-input overflow rule away, and without it
    the first window no longer differs.  Scaled by 2^-68 both give inf, 0 and 2.5 * 2^-68, and
    TensorFlow's float64 pooling is homogeneous: an intermediate overflow (the api-cpu
    campaign, rng 2873: an AveragePooling3D of near-maximal values of both signs beside an Inf,
    -inf on three backends, NaN on onnxruntime).  A pooling dividing by 2 differs at any scale
    and stands."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({
        "name": "pool", "inputs": [{"name": "x", "shape": [12, 1], "range": [0, 1]}],
        "layers": [{"name": "p", "api": "AveragePooling1D", "params": {"pool_size": 4, "strides": 4},
                    "inputs": ["x"]}], "output": "p", "logits": "p"})
    row = [-3e38, INF, -3e38, 1.0, 3e38, 3e38, -3e38, -3e38, 1.0, 2.0, 3.0, 4.0]
    x = np.array([row] * 2, np.float32)[..., None]
    with Pool(parse_backends(f"tensorflow,{FORWARD},{INTERLEAVED},{UNDIVIDED}"), tmp_path_factory.mktemp("logs"),
              timeout=180) as p:
        assert p.start() == {}
        got = Executor(p).run(TestCase("pool", spec, {}, {"x": x}))
    assert got.outcomes[FORWARD].output[0, :2, 0].tolist() == [INF, INF]
    assert np.isnan(got.outcomes[INTERLEAVED].output[0, 0, 0]) and got.outcomes[INTERLEAVED].output[0, 1, 0] == 0.0
    (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    order = f.detail.patterns[f"{FORWARD}|{INTERLEAVED}"]
    assert (order.cleared, order.overflow_evidence, order.own_layer) == ("overflow", "scaled", None)
    fault = f.detail.patterns[f"{FORWARD}|{UNDIVIDED}"]
    assert fault.cleared is None and fault.own_layer == "p"


HALVED, NEG_INF_NAN, NAN_DROP = ("tests.plugins:HalvedLinearDenseJax", "tests.plugins:NegInfToNanLinearDenseJax",
                                 "tests.plugins:NanDroppingActivationDenseJax")


def test_an_overflow_beside_an_inf_in_a_layer_with_a_bias_and_an_activation_is_judged_by_its_linear_part(
        tmp_path_factory):
    """A Dense with a bias and hard_sigmoid on 3e38, 1, -Inf (kernel 1.5, 1, 1): plain float32
    rounds 4.5e38 to Inf and sums Inf + -Inf = NaN, NaN after hard_sigmoid; a backend whose
    products stay finite (:class:`tests.plugins.HalvedLinearDenseJax`, as a fused multiply-add
    chain holding the -Inf first) gives the exact -Inf, 0 after it (the api-cpu campaign, rng
    2939: onnxruntime's Conv2D with hard_sigmoid, NaN where three frameworks gave 0 or 1).
    The layer is not homogeneous, its linear part is: scaled into range both give -Inf, an
    overflow of the sum.  A linear part that makes -Inf NaN at any scale stands, and so does
    a fused activation dropping a NaN its linear part shares with plain float32's, which the
    whole layer judged alone cleared (hard_sigmoid saturated at 0 looks homogeneous)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({
        "name": "lin", "inputs": [{"name": "x", "shape": [3], "range": [0, 1]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 1, "activation": "hard_sigmoid"},
                    "inputs": ["x"]}], "output": "d", "logits": "d"})
    x = np.array([[3e38, 1.0, -INF], [0.1, 0.2, 0.3]], np.float32)
    weights = {"d": [np.array([[1.5], [1.0], [1.0]], np.float32), np.array([0.5], np.float32)]}
    with Pool(parse_backends(f"tensorflow,jax,{HALVED},{NEG_INF_NAN},{NAN_DROP}"), tmp_path_factory.mktemp("logs"),
              timeout=180) as p:
        assert p.start() == {}
        got = Executor(p).run(TestCase("lin", spec, weights, {"x": x}))
    assert np.isnan(got.outcomes["jax"].output[0, 0]) and got.outcomes[HALVED].output[0, 0] == 0.0
    (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    order = f.detail.patterns[f"jax|{HALVED}"]
    assert (order.cleared, order.overflow_evidence, order.own_layer) == ("overflow", "scaled", None)
    for fault in (f"{HALVED}|{NEG_INF_NAN}", f"jax|{NAN_DROP}"):
        assert f.detail.patterns[fault].cleared is None and f.detail.patterns[fault].own_layer == "d", fault


def test_a_linear_part_must_differ_wherever_its_layer_does():
    """A bias add and an activation act element by element: a whole-layer difference where
    the linear parts agree (a fused activation's) is not theirs to explain."""
    from audee.oracle.nan import part_differs_there

    alone = {"a": np.array([[NAN, 1.0]]), "b": np.array([[0.0, 1.0]])}
    assert part_differs_there(alone, {"a": np.array([[NAN, 3.0]]), "b": np.array([[-INF, 3.0]])})
    assert not part_differs_there(alone, {"a": np.array([[NAN, 3.0]]), "b": np.array([[NAN, 3.0]])})
    assert not part_differs_there(alone, {"a": np.array([[NAN, 3.0]])})
    assert not part_differs_there(alone, {"a": np.array([NAN]), "b": np.array([-INF])})


def test_the_linear_part_of_a_layer_takes_off_its_bias_and_activation_only():
    from audee.cases.spec import ModelSpec, linear_part

    def spec(params):
        return ModelSpec.from_json({"name": "m", "inputs": [{"name": "x", "shape": [3]}],
                                    "layers": [{"name": "d", "api": "Dense", "params": params, "inputs": ["x"]}],
                                    "output": "d", "logits": "d"})

    kernel, bias = np.ones((3, 2), np.float32), np.zeros(2, np.float32)
    override, weights = linear_part(spec({"units": 2, "activation": "relu"}), {"d": [kernel, bias]}, "d")
    assert override == {"activation": "linear", "use_bias": False} and len(weights["d"]) == 1
    override, weights = linear_part(spec({"units": 2, "use_bias": False, "activation": "relu"}), {"d": [kernel]}, "d")
    assert override == {"activation": "linear"} and len(weights["d"]) == 1
    assert linear_part(spec({"units": 2, "use_bias": False}), {"d": [kernel]}, "d") is None


def test_an_input_its_readers_cast_makes_inf_is_a_nonfinite_input():
    """1.3e5 read by a float16 layer is Inf before any arithmetic (the api-cpu campaign, rng
    2887: a float16 Resizing of a batch-offset row, JAX's einsum resize spreading 0 * Inf over
    every row): the finding's input is non-finite, as with a literal Inf.  Read in float32,
    or at 65519 (which float16 rounds to its maximum), it is not."""
    from audee.oracle.nan import beyond_range

    x = {"x": np.full((2, 3), 1.3e5, np.float32)}
    assert beyond_range(x, {"x": "float16"}) and not beyond_range(x, {"x": "float32"}) and not beyond_range(x)
    assert not beyond_range({"x": np.full((1, 2), 65519.0, np.float32)}, "float16")
    assert beyond_range({"x": np.full((1, 2), 65520.0, np.float32)}, "float16")
    outs = [_out("tensorflow", [[1.0, INF]], ["r"]), _out("jax", [[NAN, NAN]], ["r"])]
    (f,) = nan_findings(outs, x, {"x": "float16"})
    assert f.detail.input_nonfinite
    (g,) = nan_findings(outs, x, {"x": "float32"})
    assert not g.detail.input_nonfinite


LAST_ROW = "tests.plugins:LastRowNanDenseJax"


def _last_row_nan(layers, logs):
    """The NaN finding of a Dense model whose input's row 0 holds a NaN, run on TensorFlow,
    torch and :class:`tests.plugins.LastRowNanDenseJax` (its layer ``d``'s own NaN on the last,
    finite row); with the model's spec and its case's special-input record."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor

    spec = ModelSpec.from_json({"name": "dense", "inputs": [{"name": "x", "shape": [3]}], "layers": layers,
                                "output": "d", "logits": "d"})
    x = np.random.default_rng(0).uniform(-1, 1, (4, 3)).astype(np.float32)
    x[0, 1] = np.nan
    case = TestCase("dense-nan-rows", spec, {}, {"x": x})
    with Pool(parse_backends(f"tensorflow,torch,{LAST_ROW}"), logs, timeout=180) as p:
        assert p.start() == {}
        ex = Executor(p)
        ex.complete_weights(case, weight_seed=0)
        got = ex.run(case)
    (f,) = [f for f in got.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    return spec, f, {"special_inputs": [{"input": "x", "row": 0, "kind": "nan"}]}


def test_a_nan_made_on_a_row_whose_input_is_finite_is_no_answer_to_another_rows_nan(tmp_path_factory):
    """A layer computes each row of a batch alone: a backend's NaN on a finite row is its own,
    whatever NaN another row of the input holds (rng 2909: TensorFlow's graph made a NaN in a
    ConvLSTM1D's finite row, filed undefined for a NaN in another row).  The NaN the input's
    first row holds still makes a difference there undefined."""
    from audee.triage.rootcause import classify
    from audee.triage.signature import _differing_rows, _input_elsewhere, signatures_of

    spec, f, meta = _last_row_nan([{"name": "d", "api": "Dense", "params": {"units": 2}, "inputs": ["x"]}],
                                  tmp_path_factory.mktemp("logs"))
    assert f.detail.input_nonfinite and f.detail.input_nonfinite_rows == [0]
    assert {tuple(p.rows) for p in f.detail.patterns.values() if p.rows} == {(3,)}, f.detail.patterns
    (sig,) = signatures_of(f, spec, meta)
    assert "nonfinite_input" not in sig.context and classify(sig, None)[0] == "bug", (sig, classify(sig, None))
    # the same difference on the row that holds the NaN, or rows unknown (an older record): undefined
    on_it = f.detail.model_copy(update={"input_nonfinite_rows": [3]})
    assert not _input_elsewhere(on_it, _differing_rows(on_it))
    older = f.detail.model_copy(update={"input_nonfinite_rows": None})
    assert not _input_elsewhere(older, _differing_rows(older))
    assert _input_elsewhere(f.detail, _differing_rows(f.detail))


def test_a_nan_on_a_finite_row_behind_a_layer_the_input_made_non_finite_elsewhere_is_its_own(tmp_path_factory):
    """The same behind an earlier layer: the input's NaN in row 0 makes the first Dense
    non-finite on every backend, which, layer by layer, reads as the second layer carrying a
    non-finite value it was given; on the last row nothing non-finite reached it (rng 2909's
    ConvLSTM1D behind an AveragePooling2D)."""
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    spec, f, meta = _last_row_nan([{"name": "a", "api": "Dense", "params": {"units": 3}, "inputs": ["x"]},
                                   {"name": "d", "api": "Dense", "params": {"units": 2}, "inputs": ["a"]}],
                                  tmp_path_factory.mktemp("logs"))
    (sig,) = signatures_of(f, spec, meta)
    assert sig.layer == "Dense" and "nonfinite_input" not in sig.context, sig
    assert classify(sig, None)[0] == "bug", classify(sig, None)
