"""The declared-output oracle (audee/oracle/declared.py): a layer's computed output against the
output Keras declares for it in the functional model.

(a) Keras 3.15's MelSpectrogram declares ``(L + stride + 1) // stride`` frames and computes
    ``L // stride + 1`` (findings row 114): TensorFlow, torch and JAX all compute the same
    frames, so no comparison between them sees it; the oracle names every backend, no odd
    one, the layer, and Keras as the component; its standalone script reproduces it;
(b) CategoryEncoding under mixed_float16 declares float16 and returns float32 (row 115): the
    dtype face;
(c) a model whose layers compute what they declare gives no finding, and onnxruntime, which
    runs a converted graph and no Keras model, declares nothing;
(d) the oracle and its odd rule on their own: the first layer in model order, the minority
    of the backends that ran a Keras model.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.backends.worker import _undeclared
from audee.cases.case import Finding, Kind, Outcome, TestCase
from audee.cases.spec import ModelSpec
from audee.engine.execute import Executor
from audee.oracle.declared import declared_findings
from audee.oracle.odd import mark_odd
from audee.repro import write_repro
from audee.store.caserecord import CaseRecord
from audee.triage.rootcause import classify, root_key
from audee.triage.signature import signatures_of
from tests.test_repro import load_module, run_alone


def _one_layer(api: str, params: dict, shape: list, dtype: str = "float32") -> ModelSpec:
    return ModelSpec.from_json({
        "name": api.lower(), "inputs": [{"name": "x", "shape": shape, "dtype": dtype}],
        "layers": [{"name": "layer", "api": api, "params": params, "inputs": ["x"]}], "output": "layer"})


def _run(labels: str, spec: ModelSpec, inputs: dict[str, np.ndarray]):
    with tempfile.TemporaryDirectory() as tmp, Pool(parse_backends(labels), Path(tmp)) as pool:
        pool.start_or_fail()
        ex = Executor(pool)
        case = TestCase("t", spec, {}, inputs)
        ex.complete_weights(case, 0)
        return case, ex.run(case)


MEL = {"fft_length": 4, "sequence_stride": 1, "num_mel_bins": 8, "sampling_rate": 16000}


def test_a_layer_declaring_another_shape_on_every_backend_is_one_keras_bug(tmp_path):
    x = {"x": np.random.default_rng(0).normal(size=(4, 32)).astype(np.float32)}
    case, result = _run("tensorflow,torch,jax", _one_layer("MelSpectrogram", MEL, [32]), x)
    found = [f for f in result.verdict.findings if f.kind == Kind.DECLARED_OUTPUT]
    assert len(found) == 1, [f.to_json() for f in result.verdict.findings]
    f = found[0]
    assert sorted(f.backends) == ["jax", "tensorflow", "torch"]
    d = f.detail
    assert d.layer == "layer" and d.declared == [[None, 8, 34], "float32"], d.to_json()
    assert d.computed == {b: [[4, 8, 33], "float32"] for b in ("tensorflow", "torch", "jax")}
    assert d.odd == [] and d.odd_rule == "all 3 alike"  # the declaration is wrong, not one backend
    assert not any(g.kind in (Kind.DEVIATION, Kind.INCONSISTENCY) for g in result.verdict.findings)
    [sig] = signatures_of(f, case.spec, {"api": "MelSpectrogram"})
    assert (sig.layer, sig.component) == ("MelSpectrogram", "keras")
    assert classify(sig)[0] == "bug" and root_key(sig).startswith("declared_output")

    record = CaseRecord(id="mel", spec=case.spec.to_json(), weights=case.weights, inputs=case.inputs,
                        backends=parse_backends("tensorflow,torch,jax"), verdict=result.verdict.to_json(),
                        versions={})
    rep = write_repro(record, tmp_path, "mel")
    done = run_alone(rep.script, tmp_path)
    assert done.returncode == 0 and "REPRODUCED" in done.stdout, done.stdout + done.stderr
    assert "declared (None, 8, 34) float32, computed (4, 8, 33) float32" in done.stdout

    # a bfloat16 output is written to the child's file as float32: the script judges the dtype it computed
    script = load_module(rep.script)
    bf16 = {"declared": {"layer": [[None, 8, 33], "bfloat16"]}, "dtypes": {"layer": "bfloat16"}}
    ran = {b: {"layer": np.zeros((4, 8, 33), np.float32)} for b in ("tensorflow", "torch", "jax")}
    hit, lines = script.judge_declared({b: bf16 for b in ran}, ran, [])
    assert not hit and "computed (4, 8, 33) bfloat16" in lines[0], lines
    # the script's rule is the worker's: a declared None takes any length, the rank and dtype must agree
    for shape, dtype in (([None, 8, 33], "float32"), ([None, 8, 34], "float32"), ([None, None, 33], "float32"),
                         ([None, 8], "float32"), ([None, 8, 33], "float16")):
        one = {"declared": {"layer": [shape, dtype]}, "dtypes": {"layer": "float32"}}
        hit, _ = script.judge_declared({b: one for b in ran}, ran, [])
        assert hit == ("layer" in _undeclared(["layer"], [(shape, dtype)], [ran["jax"]["layer"]])), (shape, dtype)


def test_a_layer_returning_another_dtype_than_it_declares_is_found_too():
    spec = _one_layer("CategoryEncoding", {"num_tokens": 5, "output_mode": "multi_hot", "dtype": "mixed_float16"},
                      [3], dtype="int32")
    x = {"x": np.random.default_rng(0).integers(0, 5, size=(4, 3)).astype(np.int32)}
    _, result = _run("torch,jax", spec, x)
    [f] = [f for f in result.verdict.findings if f.kind == Kind.DECLARED_OUTPUT]
    assert f.detail.declared == [[None, 5], "float16"]
    assert f.detail.computed == {"torch": [[4, 5], "float32"], "jax": [[4, 5], "float32"]}, f.detail.to_json()


def test_layers_computing_what_they_declare_give_no_finding_and_a_converter_declares_nothing():
    spec = ModelSpec.from_json({
        "name": "ok", "inputs": [{"name": "x", "shape": [6]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 4, "activation": "relu"}, "inputs": ["x"]},
                   {"name": "mel", "api": "MelSpectrogram",
                    "params": dict(MEL, sequence_stride=2, fft_length=2), "inputs": ["d"]}],
        "output": "mel"})
    x = {"x": np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)}
    _, result = _run("tensorflow,onnxruntime", spec, x)  # 4 samples, stride 2: 3 frames declared and computed
    assert not [f for f in result.verdict.findings if f.kind == Kind.DECLARED_OUTPUT]
    assert result.outcomes["tensorflow"].declared == {}
    assert result.outcomes["onnxruntime"].declared is None


def test_the_worker_compares_shape_and_dtype_an_open_length_taking_any():
    outs = [np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float16), np.zeros((4, 5), np.float32)]
    declared = [([None, 3], "float32"), ([None, None], "float32"), ([None, 6], "float32")]
    assert _undeclared(["a", "b", "c"], declared, outs) == {
        "b": [[[None, None], "float32"], [[4, 2], "float16"]],
        "c": [[[None, 6], "float32"], [[4, 5], "float32"]]}


def _outcome(backend: str, declared: dict | None) -> Outcome:
    return Outcome(backend, logits=np.zeros((2, 2)), output=np.zeros((2, 2)), declared=declared)


def test_the_first_layer_in_model_order_is_found_and_a_lone_backend_is_odd():
    off = {"b": [[[None, 4], "float32"], [[2, 3], "float32"]], "a": [[[None, 2], "float32"], [[2, 2], "float16"]]}
    outcomes = [_outcome("tensorflow", {}), _outcome("torch", {}), _outcome("jax", off),
                _outcome("onnxruntime", None)]
    [f] = declared_findings(outcomes, ["a", "b"])
    assert f.backends == ["jax"] and f.detail.layer == "a"
    assert f.detail.declaring == ["tensorflow", "torch", "jax"]
    mark_odd(outcomes, [f])
    assert (f.detail.odd, f.detail.odd_rule) == (["jax"], "minority of 3")
    assert declared_findings([_outcome("tensorflow", {}), _outcome("onnxruntime", None)], ["a"]) == []
    assert isinstance(f, Finding) and f.is_failure
