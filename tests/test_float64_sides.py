"""A float16 layer's deviation judged against the layer recomputed in float64
(``Executor._float64_sides``, ``DeviationDetail.float64_within``, the signature fact
``odd_off_float64``): onnxruntime running a float16 node in float32 lands on the float64
result, which is onnxruntime's float16 entry; a conversion computing something else does not,
and that entry, whose rule names only the policy, no longer claims it."""
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
