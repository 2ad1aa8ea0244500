"""An overflow the compute dtype's scale "explains" is still a finding where the math does
not force it: a float16 layer fed values at float16's (not float32's) overflow scale that
overflows on one backend and stays finite on another, its exact result representable in
float16 (audee.oracle.nan.unforced_narrow_overflow, audee.oracle.compute_dtype.narrow_range).

The rule's cases need no framework; the end-to-end test runs real TensorFlow, PyTorch and
JAX: Keras's AveragePooling1D under the ``float16`` policy sums each window in float16 on
TensorFlow and JAX (eight values near 17000 make +Inf) while PyTorch keeps the window's sum
finite; the mean, about 17000, fits in float16.
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Kind
from audee.oracle.compute_dtype import narrow_range
from audee.oracle.nan import condition_pattern, overflow_boundary, unforced_narrow_overflow
from audee.cases.spec import ModelSpec

INF = float("inf")


# ---- the rule, no framework -----------------------------------------------------------------------
def test_only_a_dtype_that_overflows_before_float32_is_narrow():
    assert narrow_range("float16") and not narrow_range("bfloat16") and not narrow_range("float32")


def test_a_narrow_overflow_the_float64_result_does_not_force_stands():
    fed = {"x": np.full((1, 8), 20000.0, np.float32)}            # float16's overflow scale, not float32's
    alone = {"tf": np.array([[INF]], np.float16), "torch": np.array([[17000.0]], np.float16)}
    fits, beyond = {"tf": np.array([[17000.0]])}, {"tf": np.array([[7e4]])}
    assert unforced_narrow_overflow(fed, alone, fits, "float16")
    assert condition_pattern(fed, alone, alone, "float16", fits) is None          # it stands...
    assert not overflow_boundary(fed, alone, fits, "float16")                      # ...and is no boundary
    assert condition_pattern(fed, alone, alone, "float16", beyond) == "overflow"   # forced: cleared as before
    # without float64: the finite backend's value far below the maximum shows it fits
    assert condition_pattern(fed, alone, alone, "float16", None) is None
    near = {"tf": alone["tf"], "torch": np.array([[60000.0]], np.float16)}
    assert condition_pattern(fed, near, near, "float16", None) == "overflow"
    # float32 keeps the order-of-operations rule; so does a float16 input at float32's scale
    big = {"x": np.full((1, 8), 2e19, np.float32)}
    assert condition_pattern(big, alone, alone, "float16", fits) == "overflow"
    wide32 = {"a": np.array([[INF]], np.float32), "b": np.array([[3e38]], np.float32)}
    assert condition_pattern({"x": np.full((1, 3), 3e38, np.float32)}, wide32, wide32, "float32",
                             {"c": np.array([[3e38]])}) == "overflow"


# ---- on real frameworks ------------------------------------------------------------------------
def _pooling_case():
    from audee.cases.case import TestCase

    spec = ModelSpec.from_json({
        "name": "f16pool", "inputs": [{"name": "x", "shape": [16, 4]}],
        "layers": [{"name": "p", "api": "AveragePooling1D", "params": {"pool_size": 8, "dtype": "float16"},
                    "inputs": ["x"]}],
        "output": "p", "logits": "p"})
    x = np.random.default_rng(0).uniform(16000.0, 18000.0, (4, 16, 4)).astype(np.float32)
    return TestCase("f16pool", spec, {}, {"x": x})


def test_a_float16_pooling_overflowing_where_another_backend_stays_finite_is_a_finding(tmp_path):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        result = Executor(p).run(_pooling_case())
    finite = {b: bool(np.isfinite(o.output).all()) for b, o in result.outcomes.items()}
    assert finite == {"tensorflow": False, "torch": True, "jax": False}, finite  # the frameworks as measured
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    assert f.kind == Kind.NAN and f.detail.strong and not f.detail.overflow_boundary, f.detail
    assert f.detail.input_overflow_scale and f.detail.finite_backends == ["torch"]
    standing = {k: pt for k, pt in f.detail.patterns.items() if not pt.cleared}
    assert set(standing) == {"tensorflow|torch", "torch|jax"}, f.detail.patterns
    assert all(pt.own_layer == "p" and pt.overflow_evidence == "float64" for pt in standing.values())
    assert result.verdict.failed
    # two against one, the majority would name torch; the float64 result names the two losing the mean
    assert f.detail.odd == ["jax", "tensorflow"], (f.detail.odd, f.detail.odd_rule)
    assert all(pt.float64_within and pt.float64_within["torch"] for pt in standing.values()), standing


FLOAT32_POOL = "tests.plugins:Float32PoolJax"


def test_the_float64_reference_decides_where_no_run_backend_computes_float64(tmp_path):
    """JAX and a JAX plugin whose pooling keeps its sum in float32: neither computes the layer
    in float64 in the run's workers (JAX without x64), so alone the rule reads the finite
    side's value (``scale``); with ``--reference float64`` the reference's ``jax-x64``
    worker recomputes the layer, and its float64 mean decides (``float64``)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor
    from audee.reference.run import Reference, reference_refs

    refs = parse_backends(f"jax,{FLOAT32_POOL}")
    got = {}
    with Pool(refs, tmp_path, timeout=300, reference=reference_refs(refs)) as p:
        assert p.start() == {}
        for name, ref in (("alone", None), ("reference", Reference())):
            result = Executor(p, reference=ref).run(_pooling_case())
            outs = result.outcomes
            assert np.isinf(outs["jax"].output).any() and np.isfinite(outs[FLOAT32_POOL].output).all()
            (got[name],) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    for name, f in got.items():
        assert f.kind == Kind.NAN and f.detail.strong and not f.detail.overflow_boundary, (name, f.detail)
    (alone,), (ref,) = got["alone"].detail.patterns.values(), got["reference"].detail.patterns.values()
    assert alone.own_layer == ref.own_layer == "p"
    assert alone.overflow_evidence == "scale" and ref.overflow_evidence == "float64", (alone, ref)


def test_the_cast_overflow_threshold_of_every_float_dtype_without_a_warning():
    """The smallest magnitude a cast rounds to Inf: float16's 65520 (65519 rounds down to
    65504), float32's and bfloat16's half a spacing past their maxima; float64's is past every
    finite double (Inf), found without overflowing a power of two on the way (log2 of
    float64's maximum rounds up to 1024)."""
    import warnings

    from audee.oracle.compute_dtype import cast_overflow_min

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = {d: cast_overflow_min(d) for d in ("float16", "bfloat16", "float32", "float64")}
    assert got["float16"] == 65520.0
    assert np.float32(np.nextafter(got["float32"], 0.0)) == np.finfo(np.float32).max
    assert got["bfloat16"] > 3.389e38 and got["float64"] == float("inf")


def test_a_layer_that_is_not_homogeneous_past_float64s_range_is_no_intermediate_overflow():
    """Scaled back up by ``2^k``, a float64 result past float64's range is an Inf where the
    layer at full scale was finite: the layer is not homogeneous on that input, and the
    overflow of the comparison is no warning in a campaign's log."""
    import warnings

    from audee.oracle.nan import intermediate_overflow

    wide = {"y": np.array([1.0, 2.0])}
    wide_scaled = {"y": np.array([1e300, 2.0 ** -100])}         # an exp of the scaled input, say
    alone = {"a": np.array([1.0, 2.0], np.float32), "b": np.array([1.0, 2.0], np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not intermediate_overflow(wide, wide_scaled, 100, alone, lambda u, v: bool(np.allclose(u, v)))


def test_a_pair_that_both_overflow_where_the_result_fits_keeps_narrow_intermediates_alike():
    """Each backend non-finite at some element whose float64 result fits float16: neither kept
    a wider intermediate, so where each overflows is its order of operations; one backend
    finite wherever the result fits is still the finding above."""
    from audee.oracle.nan import both_overflow_narrow

    fed = {"x": np.full((1, 8), 40000.0, np.float32)}
    fits = {"ref": np.array([[10000.0, 10000.0]])}
    one_way = {"a": np.array([[10000.0, INF]], np.float16), "b": np.array([[INF, 10000.0]], np.float16)}
    assert unforced_narrow_overflow(fed, one_way, fits, "float16")        # the pair rule alone lets it stand
    assert both_overflow_narrow(fed, one_way, fits, "float16")
    wider = {"a": one_way["a"], "torch": np.array([[10000.0, 10000.0]], np.float16)}
    assert not both_overflow_narrow(fed, wider, fits, "float16")         # torch never overflows: a finding
    assert not both_overflow_narrow(fed, one_way, None, "float16")        # no float64 result: no evidence
    assert not both_overflow_narrow(fed, one_way, {"ref": np.array([[7e4, 7e4]])}, "float16")  # forced
    big = {"x": np.full((1, 8), 2e19, np.float32)}
    assert not both_overflow_narrow(big, one_way, fits, "float16")       # float32's scale: the order rule's


FORWARD16, INTERLEAVED16 = "tests.plugins:ForwardSumPoolJax", "tests.plugins:InterleavedSumPoolJax"


def test_two_float16_sums_overflowing_in_their_own_orders_are_cleared_and_named_against_the_float32_sum(tmp_path):
    """A float16 AveragePooling1D summed in float16 first to last and interleaved (two JAX
    plugins) and by PyTorch, which keeps the window's sum finite.  One window overflows only
    first to last, ``40000 + 40000``, the other only interleaved; every mean is 10000.  The
    plugins' pair is cleared (``overflow``, float64 evidence); each one's pair with PyTorch
    stands, PyTorch finite where the float64 result (PyTorch's own, no reference run) fits
    float16.  Those pairs alone would name PyTorch, the one backend in both; the float64
    evidence names the two that lost a value float16 holds."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.oracle.pairs import NAN_OFF_FLOAT64_RULE

    spec = ModelSpec.from_json({
        "name": "f16orders", "inputs": [{"name": "x", "shape": [8, 1]}],
        "layers": [{"name": "p", "api": "AveragePooling1D",
                    "params": {"pool_size": 4, "strides": 4, "dtype": "float16"}, "inputs": ["x"]}],
        "output": "p", "logits": "p"})
    row = [40000.0, -40000.0, 40000.0, 0.0, 40000.0, 40000.0, -40000.0, 0.0]
    case = TestCase("f16orders", spec, {}, {"x": np.array([row, row], np.float32)[..., None]})
    with Pool(parse_backends(f"torch,{FORWARD16},{INTERLEAVED16}"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        result = Executor(p).run(case)
    finite = {b: np.isfinite(o.output).reshape(2, -1)[0].tolist() for b, o in result.outcomes.items()}
    assert finite == {"torch": [True, True], FORWARD16: [True, False], INTERLEAVED16: [False, True]}, finite
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    assert f.kind == Kind.NAN and f.detail.strong, f.detail
    both = f.detail.patterns[f"{FORWARD16}|{INTERLEAVED16}"]
    assert both.cleared == "overflow" and both.overflow_evidence == "float64", both
    standing = {k: pt for k, pt in f.detail.patterns.items() if not pt.cleared}
    assert set(standing) == {f"torch|{FORWARD16}", f"torch|{INTERLEAVED16}"}, f.detail.patterns
    for key, pt in standing.items():
        assert pt.float64_within == {"torch": ["torch"], key.split("|")[1]: []}, (key, pt)
    assert f.detail.odd == sorted([FORWARD16, INTERLEAVED16]), (f.detail.odd, f.detail.odd_rule)
    assert f.detail.odd_rule == NAN_OFF_FLOAT64_RULE.format(right="torch")


def test_the_float64_sides_of_a_nan_pair_and_the_odd_backends_they_name():
    """A side finite where the pair differs and the float64 result fits is on it, one
    non-finite there is off; no such element, no evidence.  The backends only off it are odd
    where the named ones include one only on it, or none are named."""
    from audee.oracle.nan import float64_nan_within
    from audee.oracle.pairs import nonfinite_off_float64

    alone = {"a": np.array([1.0, INF, 3.0], np.float16), "b": np.array([1.0, 2.0, np.nan], np.float16)}
    fits = {"t": np.array([1.0, 2.0, 3.0])}
    assert float64_nan_within(alone, fits, "float16") == {"a": [], "b": []}       # each loses one
    assert float64_nan_within({"a": alone["a"], "b": np.array([1.0, 2.0, 3.0], np.float16)}, fits,
                              "float16") == {"a": [], "b": ["t"]}
    beyond = {"t": np.array([1.0, 7e4, 3.0])}                                       # forced where a is Inf
    assert float64_nan_within({"a": alone["a"], "b": np.array([1.0, 2.0, 3.0], np.float16)}, beyond,
                              "float16") is None
    assert float64_nan_within(alone, {"t": fits["t"].astype(np.float32)}, "float16") is None  # no float64
    # on an input holding NaN/Inf, one framework's float64 kernel is not enough: two programs
    assert float64_nan_within(alone, {"torch": fits["t"]}, "float16", programs=2) is None
    assert float64_nan_within(alone, {"torch": fits["t"], "jax-x64": fits["t"]}, "float16", programs=2) == \
        {"a": [], "b": []}
    on, off, ran = {"torch"}, {"jax", "tensorflow"}, ["tensorflow", "torch", "jax", "onnxruntime"]
    assert nonfinite_off_float64(on, off, ran, ["torch"])[0] == ["jax", "tensorflow"]
    assert nonfinite_off_float64(on, off, ran, [])[0] == ["jax", "tensorflow"]
    assert nonfinite_off_float64(on, off, ran, ["jax"]) is None                        # the majority is right
    assert nonfinite_off_float64(on | {"jax"}, off, ran, ["torch"])[0] == ["tensorflow"]  # jax on and off: not odd
    assert nonfinite_off_float64(set(), off, ran, []) is None
    # a conversion finite where its program overflows is on no one's behalf; alone, it is no evidence
    assert nonfinite_off_float64({"onnxruntime"}, {"tensorflow", "torch"}, ran, ["onnxruntime"]) is None
    assert nonfinite_off_float64({"onnxruntime", "torch"}, off, ran, ["onnxruntime", "torch"])[0] == \
        ["jax", "tensorflow"]
    # float32: an intermediate sum overflowing on the way to a result float32 holds is no side
    wide32 = {"a": np.array([1.0, INF], np.float32), "b": np.array([1.0, 2.0], np.float32)}
    assert float64_nan_within(wide32, {"t": np.array([1.0, 2.0])}, "float32") is None


def test_the_float64_sides_read_the_elements_no_inf_of_the_input_reaches(tmp_path):
    """Keras' float16 AveragePooling1D on TensorFlow, torch and JAX, one window holding +-Inf
    (NaN on every backend) and one summing past float16's maximum on TensorFlow and JAX alone
    (the mean, 20000, fits).  With the Inf set to 0 the first window would differ too, so the
    layer's input keeps its Inf, and only TensorFlow's and torch's float64 results together
    (two programs) say where the exact result fits: the two that lose it are odd, not torch."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import TestCase
    from audee.engine.execute import Executor
    from audee.oracle.pairs import NAN_OFF_FLOAT64_RULE

    spec = ModelSpec.from_json({
        "name": "f16inf", "inputs": [{"name": "x", "shape": [8, 1]}],
        "layers": [{"name": "p", "api": "AveragePooling1D",
                    "params": {"pool_size": 4, "strides": 4, "dtype": "float16"}, "inputs": ["x"]}],
        "output": "p", "logits": "p"})
    row = [INF, 40000.0, 40000.0, -INF, 40000.0, 40000.0, 0.0, 0.0]
    case = TestCase("f16inf", spec, {}, {"x": np.array([row, row], np.float32)[..., None]})
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        result = Executor(p).run(case)
    codes = {b: [str(float(v)) for v in o.output.reshape(2, -1)[0]] for b, o in result.outcomes.items()}
    assert codes == {"tensorflow": ["nan", "inf"], "torch": ["nan", "20000.0"], "jax": ["nan", "inf"]}, codes
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    assert f.kind == Kind.NAN and f.detail.strong and f.detail.input_nonfinite, f.detail
    standing = {k: pt for k, pt in f.detail.patterns.items() if not pt.cleared}
    assert set(standing) == {"tensorflow|torch", "torch|jax"}, f.detail.patterns
    assert all(sorted(pt.float64_within["torch"]) == ["tensorflow", "torch"] for pt in standing.values()), standing
    assert f.detail.odd == ["jax", "tensorflow"], (f.detail.odd, f.detail.odd_rule)
    assert f.detail.odd_rule == NAN_OFF_FLOAT64_RULE.format(right="torch")


# ---- an intermediate the formula stores past float16's maximum ------------------------------------
def test_a_difference_is_forced_where_a_contraction_overflows_in_every_row_it_differs_in():
    """By row: each differing row must hold a stored contraction value past float16's maximum
    (a softmax of overflowing scores fits); one differing row without it keeps the finding."""
    from audee.oracle.nan import contraction_overflow

    fed = {"x": np.full((2, 4), 40000.0, np.float32)}                      # float16's overflow scale
    alone = {"tf": np.array([[np.nan, np.nan], [1.0, 2.0]], np.float16),
             "torch": np.array([[2.0, 2.0], [1.0, 2.0]], np.float16)}
    assert contraction_overflow(fed, alone, [np.array([1.2e5, 10.0])], "float16")
    assert not contraction_overflow(fed, alone, [np.array([5e4, 1e6])], "float16")     # row 0's scores fit
    assert not contraction_overflow(fed, alone, [], "float16")                           # no trace: no evidence
    assert not contraction_overflow(fed, alone, [np.array([1.2e5, 10.0]), np.array([5e4, 1e6])], "float16")
    assert not contraction_overflow(fed, alone, [np.array([1.2e5])], "float16")          # another batch
    assert not contraction_overflow(fed, alone, [np.array([1.2e5, 10.0])], "float32")    # float32: the order rules
    assert not contraction_overflow({"x": np.full((2, 4), 2e19, np.float32)}, alone,     # float32's scale
                                    [np.array([1.2e5, 10.0])], "float16")


def test_contraction_peaks_read_the_stored_result_at_its_smaller_scale():
    """JAX's trace evaluated op by op: a matmul's output per batch row, or that output scaled
    by a scalar right after, whichever is smaller (Keras scales attention's query before the
    scores on one backend and the scores after on another); a weight's product and the ops
    that are not contractions (a sum of squares) do not count."""
    import jax.numpy as jnp

    from audee.backends.jax_trace import contraction_row_peaks

    w = jnp.ones((3, 2), jnp.float32)

    def f(x, y):
        scores = (x @ w) * 0.5                   # stored 3e5 in row 0, scaled to 1.5e5
        g = w.T @ w                              # no batch axis
        return jnp.sum(scores, -1) + jnp.sum(y * y, -1) + g[0, 0]

    x = np.array([[1e5, 1e5, 1e5], [1.0, 2.0, 3.0]], np.float32)
    y = np.full((2, 3), 1e4, np.float32)                                 # squares past 65504: not a contraction
    peaks = contraction_row_peaks(f, (x, y), 2)
    assert np.allclose(peaks, [1.5e5, 3.0]), peaks
    assert contraction_row_peaks(lambda x, y: x + y, (x, y), 2) is None


def _attention_case(query_row: list[float]):
    """Keras' float16 MultiHeadAttention, one query and one key, every projection the
    identity: the score is query_row . (2, 2, 2, 2) / 2, and the output the value, 2."""
    from audee.cases.case import TestCase

    spec = ModelSpec.from_json({
        "name": "f16mha", "inputs": [{"name": "q", "shape": [1, 4]}, {"name": "v", "shape": [1, 4]}],
        "layers": [{"name": "a", "api": "MultiHeadAttention",
                    "params": {"num_heads": 1, "key_dim": 4, "use_bias": False, "dtype": "float16"},
                    "inputs": ["q", "v"]}],
        "output": "a", "logits": "a"})
    eye = np.eye(4, dtype=np.float32)
    weights = {"a": [eye[:, None, :], eye[:, None, :], eye[:, None, :], eye[None, :, :]]}
    q = np.array([[query_row], [[1.0, 2.0, 3.0, 4.0]]], np.float32)
    return TestCase("f16mha", spec, weights, {"q": q, "v": np.full((2, 1, 4), 2.0, np.float32)})


def test_attention_scores_past_float16_are_forced_and_a_half_sum_past_it_is_not(tmp_path):
    """TensorFlow's float16 attention NaN, torch's fused attention finite (it keeps the scores
    in float32), JAX refusing float16 attention on the CPU but tracing the float64 formula.
    Scores of 120000 exactly cannot be float16: the NaN is the input's (``overflow``).  A
    score of 50000 exactly, summed 40000 + 40000 in TensorFlow's half einsum, fits: the
    finding stands and names TensorFlow (findings row 106's face)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    got = {}
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path, timeout=300) as p:
        assert p.start() == {}
        for name, row in (("forced", [40000.0, 40000.0, 40000.0, 0.0]), ("fits", [40000.0, 40000.0, -30000.0, 0.0])):
            result = Executor(p).run(_attention_case(row))
            finite = {b: bool(np.isfinite(o.output[0]).all()) for b, o in result.outcomes.items() if o.ok}
            assert finite == {"tensorflow": False, "torch": True}, (name, finite)   # the frameworks as measured
            (got[name],) = [f for f in result.verdict.findings if f.kind in (Kind.NAN, Kind.NAN_PROPAGATED)]
    forced, fits = got["forced"].detail.patterns["tensorflow|torch"], got["fits"].detail.patterns["tensorflow|torch"]
    assert got["forced"].kind == Kind.NAN_PROPAGATED and forced.cleared == "overflow", forced
    assert got["fits"].kind == Kind.NAN and fits.cleared is None and fits.own_layer == "a", fits
    assert got["fits"].detail.odd == ["tensorflow"], got["fits"].detail
