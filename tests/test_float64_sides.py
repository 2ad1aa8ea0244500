"""A float16 layer's deviation judged against the layer recomputed in float64
(``Executor._float64_sides``, ``DeviationDetail.float64_within``, the signature fact
``odd_off_float64``): onnxruntime running a float16 node in float32 lands on the float64
result, which is onnxruntime's float16 entry; a conversion computing something else does not,
and that entry, whose rule names only the policy, no longer claims it.  And the better side's
distance from that float64 result is part of the layer's self score
(:func:`audee.oracle.deviation.float64_floor`): a bfloat16 layer both sides compute off the
exact result by about what they are apart is no evidence against either."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from audee.cases.case import Finding, Kind
from audee.triage.known import load_known_issues, match_known
from audee.triage.signature import ODD_OFF_FLOAT64, Signature, signatures_of


def _case(name: str, layer: dict, x: np.ndarray, dtype: str = "float32"):
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": name, "inputs": [{"name": "x", "shape": list(x.shape[1:]), "dtype": dtype}],
        "layers": [{"name": "t", **layer, "inputs": ["x"]}], "output": "t", "logits": "t"})
    return TestCase(name, spec, {}, {"x": x})


def test_a_float16_layer_is_recomputed_in_float64_and_the_conversion_off_it_is_named(tmp_path):
    """UnitNormalization under mixed_float16 on values of 300: TensorFlow's float16 sum of
    squares overflows (output 0), onnxruntime computes it in float32 (on the float64 result).
    CategoryEncoding one_hot on id -5: tf2onnx's OneHot counts it from the end (a 1 at 4),
    TensorFlow's row is zeros, as its float64 recomputation is (the api-cpu campaign, rng 2877)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    norm = _case("unit-norm", {"api": "UnitNormalization", "params": {"axis": -1, "dtype": "mixed_float16"}},
                 np.full((4, 6), 300.0, np.float32))
    ids = np.array([[1], [-5], [3], [2]], np.int32)
    hot = _case("one-hot", {"api": "CategoryEncoding",
                            "params": {"num_tokens": 9, "output_mode": "one_hot", "dtype": "float16"}}, ids, "int32")
    with Pool(parse_backends("tensorflow,onnxruntime"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        got = {c.id: ex.run(c) for c in (norm, hot)}
    facts = {}
    for cid, result in got.items():
        (f,) = [f for f in result.verdict.findings if f.kind == Kind.DEVIATION]
        assert f.detail.own_layers == ["t"] and f.detail.float64_within is not None, (cid, f.detail)
        (sig,) = signatures_of(f, result.case.spec, {"api": result.case.spec.layers[0].api})
        facts[cid] = (f.detail.float64_within, sig.odd, ODD_OFF_FLOAT64 in sig.context)
    within, odd, off = facts["unit-norm"]
    assert odd == ("onnxruntime",) and "tensorflow" in within["onnxruntime"] and not off
    within, odd, off = facts["one-hot"]
    assert odd == ("onnxruntime",) and within["onnxruntime"] == ["onnxruntime"] and off


def test_a_reduced_precision_pair_without_float64_runs_of_its_own_is_judged_by_an_independent_one(tmp_path):
    """A bfloat16 DepthwiseConv2D of strides (1, 2): TensorFlow refuses it in float64 ("only
    supports equal length strides"), JAX computes float64 in float32; the pair of them got no
    float64 result and no side, where oneDNN's garbage on TensorFlow and torch outvoted JAX (the
    api-cpu campaign, rng 3033).  Torch's float64 recomputation judges it: TensorFlow on it,
    the doubled layer off."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    doubled = "tests.plugins:DoubledDepthwiseJax"
    x = np.random.default_rng(0).normal(size=(4, 3, 6, 4)).astype(np.float32)
    case = _case("depthwise", {"api": "DepthwiseConv2D", "params": {
        "kernel_size": 2, "strides": [1, 2], "data_format": "channels_first", "dtype": "bfloat16"}}, x)
    with Pool(parse_backends(f"tensorflow,torch,{doubled}"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        ex.complete_weights(case, 0)
        result = ex.run(case)
    devs = {f.detail.pair: f for f in result.verdict.findings if f.kind == Kind.DEVIATION}
    f = devs[f"tensorflow|{doubled}"]
    assert f.detail.own_layers == ["t"] and f.detail.float64_within is not None, f.detail
    assert f.detail.float64_within["tensorflow"] and not f.detail.float64_within[doubled]


def test_onnxruntimes_float16_entry_leaves_a_deviation_off_the_float64_result():
    """The entry's value rule: a float16 onnxruntime deviation is its own unless onnxruntime is
    off the float64 result its opponent is on."""
    f = Finding(Kind.DEVIATION, ["onnxruntime", "tensorflow"], {
        "pair": "onnxruntime|tensorflow", "own_layers": ["t"], "odd": ["onnxruntime"],
        "float64_within": {"onnxruntime": ["tensorflow", "onnxruntime"], "tensorflow": ["onnxruntime"]}})
    spec = {"layers": [{"name": "t", "api": "Dot", "params": {"axes": -1, "dtype": "mixed_float16"}}]}
    (sig,) = signatures_of(f, spec, {"api": "Dot"})
    assert ODD_OFF_FLOAT64 not in sig.context
    assert match_known(sig, load_known_issues()).id == "ort-fp16-cast-roundtrip-elided"
    off: Signature = replace(sig, context=(*sig.context, ODD_OFF_FLOAT64))
    assert match_known(off, load_known_issues()) is None
    f.detail.float64_within = {"onnxruntime": ["onnxruntime"], "tensorflow": ["tensorflow"]}
    (sig,) = signatures_of(f, spec, {"api": "Dot"})
    assert ODD_OFF_FLOAT64 in sig.context


#: one image of the api-cpu campaign's rng 2921 (a bfloat16 Dense's outputs, exact in bfloat16):
#: AutoContrast maps it to [0, 255] (x * 42.5 + 127.5, at a spacing of 1 there), then computes
#: ``x * scale - low * scale`` near 3200, at a spacing of 16
_AUTOCONTRAST_IMAGE = [0.05908203, 0.0039978, 0.15917969, 0.01165771, 0.01306152, -0.04052734, -0.04956055,
                       0.03027344, 0.03613281, -0.07958984, 0.0222168, -0.05615234, -0.00411987, -0.03039551,
                       0.06103516, -0.02685547, 0.02282715, 0.01269531, 0.02648926, 0.0246582]


def _autocontrast(x: np.ndarray):
    return _case("autocontrast", {"api": "AutoContrast", "params": {"value_range": [-3.0, 3.0], "dtype": "bfloat16"}},
                 x.astype(np.float32))


def test_a_bfloat16_layer_both_sides_compute_off_its_float64_result_is_not_blamed(tmp_path):
    """TensorFlow and torch round AutoContrast's cancelling offset each its own way in bfloat16:
    0.77 apart on a [-3, 3] range, and each as far from the float64 result (TensorFlow 2.6 in
    score, torch 4.0; 4.7 apart).  The input probe shows nothing (a quantized output does not
    move), the float64 floor does: the deviation is accumulated rounding, the layer
    ill-conditioned.  A torch whose AutoContrast is 1.5 times off, on an image the dtype
    computes nearly exactly, stays blamed."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    cancelling = _autocontrast(np.array(_AUTOCONTRAST_IMAGE).reshape(1, 4, 5, 1))
    with Pool(parse_backends("tensorflow,torch"), tmp_path / "real", timeout=300) as pool:
        assert pool.start() == {}
        result = Executor(pool).run(cancelling)
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.DEVIATION, Kind.DEVIATION_ACCUMULATED)]
    assert f.kind == Kind.DEVIATION_ACCUMULATED and f.detail.ill_conditioned == ["t"], f.detail
    assert f.detail.own["t"].score > 1.0 and f.detail.own["t"].self_score > 1.0

    spread = _autocontrast(np.linspace(-3.0, 3.0, 20).reshape(1, 4, 5, 1))
    faulty = "tests.plugins:ScaledTTorch"
    with Pool(parse_backends(f"tensorflow,{faulty}"), tmp_path / "faulty", timeout=300) as pool:
        assert pool.start() == {}
        result = Executor(pool).run(spread)
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.DEVIATION, Kind.DEVIATION_ACCUMULATED)]
    assert f.kind == Kind.DEVIATION and f.detail.own_layers == ["t"], f.detail
    assert f.detail.float64_within is not None and f.detail.float64_within["tensorflow"], f.detail


def test_the_float64_floor_is_the_better_sides_distance():
    """The smallest score of either side against any float64 result; 0 where none was computed."""
    from audee.oracle.deviation import float64_floor

    assert float64_floor(None) == 0.0 and float64_floor({}) == 0.0
    assert float64_floor({"tensorflow": {"tensorflow": 2.5}, "torch": {"tensorflow": 4.0}}) == 2.5
    assert float64_floor({"onnxruntime": {"tensorflow": 0.0}, "tensorflow": {"tensorflow": 40.0}}) == 0.0


#: row 0 of the api-cpu campaign's rng 2943 ConvLSTM1D (8 steps of 8 values), and its kernels
_CONVLSTM_ROW = [
    -0.10761999, -0.1681948, 0.15626748, 0.46033937, -0.47887975, -0.43488702, -0.040958956, 0.23413095,
    0.7188465, 0.8180338, -0.29228973, 0.34440327, 0.122643694, 0.13061188, 0.89329803, -3.326349,
    -2.2513402, 0.12673116, 1.9495655, 0.2717857, 1.5557263, 1.1577829, 0.09908373, 1.0223776,
    -0.271354, 0.084554486, -2.3612406, -0.040298335, 1.5741996, -0.9203142, 1.00318, -0.55935836,
    -0.47865385, -1.7111993, -0.11545532, -0.7638109, 0.88733137, -0.6659391, -1.4318285, -0.4241323,
    1.3854407, 1.5888851, 0.57954544, -2.4177775, 0.8454987, -1.352445, 1.5020527, 1.6277546,
    0.563722, -0.6791964, -1.1140399, -0.28873715, 1.772641, -0.17428805, 1.6329794, -1.7862371,
    0.83152175, -1.6983438, 0.5748514, 0.25595033, -0.44232532, -0.77271616, -0.65343523, -0.5543988]
_CONVLSTM_KERNELS = [
    [-0.60679275, -1.042433, 1.8386438, 0.87376106, 1.4938732, 0.43243378, -0.26317266, -1.3245353],
    [-0.9548816, -0.41129145, -1.3716404, -0.11642493, -0.4959553, 1.6038309, 0.68699276, -0.5465154]]


def _convlstm(scale: float):
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "convlstm", "inputs": [{"name": "x", "shape": [8, 8, 1]}],
        "layers": [{"name": "t", "api": "ConvLSTM1D", "inputs": ["x"], "params": {
            "filters": 1, "kernel_size": [2], "strides": 2, "padding": "valid", "activation": "squareplus",
            "recurrent_activation": "linear", "use_bias": False, "unit_forget_bias": False}}],
        "output": "t", "logits": "t"})
    weights = {"t": [np.array(k, np.float32).reshape(2, 1, 4) for k in _CONVLSTM_KERNELS]}
    x = (np.array(_CONVLSTM_ROW, np.float32) * np.float32(scale)).reshape(1, 8, 8, 1)
    return TestCase(f"convlstm-{scale}", spec, weights, {"x": x})


def test_a_float32_layer_every_backend_computes_off_its_float64_result_is_not_blamed(tmp_path):
    """A float32 ConvLSTM1D with linear gates and squareplus (the api-cpu campaign, rng 2943):
    its state grows to 1e3 in four steps and squareplus cancels, so TensorFlow (1153.8) and
    onnxruntime (1187.2) land 3 % apart and each 1-2 % off the float64 result (1174.3,
    TensorFlow's and torch's float64 kernels).  The input probe moves them less than
    a tenth of that; the float64 floor shows it: the layer is ill-conditioned, not one
    backend's fault.  On the input scaled by 0.1 the layer is well-conditioned, and a torch
    whose layer is 1.5 times off stays blamed, TensorFlow within torch's float64 result."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends("tensorflow,torch,onnxruntime"), tmp_path / "real", timeout=300) as pool:
        assert pool.start() == {}
        result = Executor(pool).run(_convlstm(1.0))
    devs = [f for f in result.verdict.findings if f.kind in (Kind.DEVIATION, Kind.DEVIATION_ACCUMULATED)]
    # which pairs part is the CPU's (oneDNN's AVX-512 and AVX2 kernels round this chaotic layer apart): each is
    # the layer's conditioning
    assert len(devs) >= 2, devs
    for f in devs:  # the floor reads every float64 result: the pair's own too
        assert f.kind == Kind.DEVIATION_ACCUMULATED and f.detail.ill_conditioned == ["t"], f.detail
        assert f.detail.own["t"].score > 10.0 and f.detail.own["t"].self_score > 1.0

    faulty = "tests.plugins:ScaledTTorch"
    with Pool(parse_backends(f"tensorflow,torch,{faulty}"), tmp_path / "faulty", timeout=300) as pool:
        assert pool.start() == {}
        result = Executor(pool).run(_convlstm(0.1))
    (f,) = [f for f in result.verdict.findings if f.kind in (Kind.DEVIATION, Kind.DEVIATION_ACCUMULATED)
            and f.detail.pair == f"tensorflow|{faulty}"]
    assert f.kind == Kind.DEVIATION and f.detail.own_layers == ["t"], f.detail
    assert f.detail.float64_within == {"tensorflow": ["torch"], faulty: []}, f.detail  # torch's: outside the pair
