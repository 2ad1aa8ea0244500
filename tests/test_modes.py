"""Execution modes as backends (audee/backends/modes.py): the other mode of each framework
runs a real model and agrees with its reference, and a fault in one op of one compiled
mode is flagged between the framework's two modes and localized to its layer."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from audee.backends.info import BUILTIN_INFO
from audee.backends.registry import BUILTIN, parse_backends
from tests.helpers import tiny_cnn

#: every other execution mode of a framework (audee/backends/modes.py), read from the descriptions:
#: a mode added there is run by the LeNet-5 test below without a line here
MODES = tuple(n for n, i in BUILTIN_INFO.items() if i.target.startswith("audee.backends.modes:"))
CONVERTERS = ("openvino", "litert", "torch-onnx")
FAULT = "tests.plugins:ScaledXlaConv"  # tensorflow-xla with layer conv's output times 1.05


def test_every_mode_and_converter_is_a_named_builtin_backend():
    assert {"tensorflow-eager", "tensorflow-xla", "tensorflow-noonednn", "torch-compile", "jax-eager",
            "jax-x64"} <= set(MODES)
    refs = parse_backends(",".join(MODES + CONVERTERS))
    assert [r.label for r in refs] == list(MODES + CONVERTERS)
    assert all(r.target == BUILTIN[r.label] for r in refs)
    assert all(r.target.startswith("audee.backends.modes:") for r in refs[:len(MODES)])


@pytest.mark.slow
def test_each_mode_and_converter_runs_lenet5_and_agrees_with_its_reference(tmp_path):
    """LeNet-5 (the seed, its shipped weights and inputs) on the three default Keras
    backends, every other mode and the three converters: one case, every backend ran
    it, no finding; torch.compile spent its compile in ``compile``, not in ``run``; each
    converter spent time converting."""
    backends = ",".join(("tensorflow", "torch", "jax") + MODES + CONVERTERS)
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "audee", "fuzz", "--seed", "lenet5", "--variants", "0",
                        "--backends", backends, "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["status"] == "pass", row
    assert set(row["backends"]) == set(backends.split(",")) and set(row["backends"].values()) == {"ok"}
    assert row["phases"]["torch-compile"]["compile"] > row["phases"]["torch-compile"]["run"]
    assert all(row["phases"][c]["convert"] > 0 for c in CONVERTERS)


@pytest.fixture(scope="module")
def converters_pool(tmp_path_factory):
    from audee.backends.pool import Pool

    with Pool(parse_backends(",".join(("tensorflow",) + CONVERTERS)), tmp_path_factory.mktemp("logs"),
              timeout=300) as pool:
        assert pool.start() == {}
        yield pool


def _run(pool, case):
    from audee.engine.execute import Executor

    ex = Executor(pool)
    ex.complete_weights(case, 0)
    return ex.run(case)


def test_each_converter_runs_a_cnn_and_agrees_with_tensorflow(converters_pool):
    """The default suite's check of the converters (LeNet-5 on every mode: the slow test
    above): a small CNN through OpenVINO, the TFLite converter + LiteRT and PyTorch's ONNX
    exporter agrees with TensorFlow, each having converted it."""
    from audee.cases.case import TestCase

    x = np.random.default_rng(0).random((8, 12, 12, 1), dtype=np.float32)
    result = _run(converters_pool, TestCase("cnn", tiny_cnn(), {}, {"image": x}))
    assert not result.verdict.findings, result.verdict.to_json()
    assert all(o.ok for o in result.outcomes.values())
    assert all(result.phases[c].get("convert", 0) > 0 for c in CONVERTERS), result.phases


def test_an_op_the_tflite_converter_has_no_builtin_for_is_a_limitation(converters_pool):
    """A bfloat16 average pooling: TensorFlow runs it, the TFLite converter (builtin ops
    only) refuses ``tf.AvgPool`` in bfloat16 with its explicit "neither a custom op nor a
    flex op": a divergent acceptance on litert, attributed to the converter's phase, classed
    as a limitation, not a bug."""
    from audee.cases.case import Kind, TestCase
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "pool16", "inputs": [{"name": "x", "shape": [8, 8, 2], "range": [0, 1]}],
        "layers": [{"name": "pool", "api": "AveragePooling2D", "params": {"pool_size": 2, "dtype": "bfloat16"},
                    "inputs": ["x"]}],
        "output": "pool", "logits": "pool"})
    x = np.random.default_rng(0).random((2, 8, 8, 2), dtype=np.float32)
    result = _run(converters_pool, TestCase("pool16", spec, {}, {"x": x}))
    (f,) = [f for f in result.verdict.findings if f.is_failure]
    assert f.kind == Kind.DIVERGENT_ACCEPTANCE and "litert" in f.backends
    assert f.detail.errors["litert"].phase == "convert" and "neither a custom op" in f.detail.errors["litert"].message
    (sig,) = [s for s in case_signatures(result.verdict, spec, {}) if s.backends == ("litert",)]
    assert sig.op == "AvgPool" and classify(sig)[0] == "limitation"


def _bfloat16_rescaling(pool):
    """A one-layer bfloat16 Rescaling run on ``pool``: (its spec, the judged result).  tf2onnx
    writes a Mul of a float16 tensor and a bfloat16 constant for it."""
    from audee.cases.case import TestCase
    from audee.cases.spec import ModelSpec

    spec = ModelSpec.from_json({
        "name": "scale16", "inputs": [{"name": "x", "shape": [6, 3], "range": [-1, 1]}],
        "layers": [{"name": "scale", "api": "Rescaling", "params": {"scale": 0.5, "offset": 0.1, "dtype": "bfloat16"},
                    "inputs": ["x"]}],
        "output": "scale", "logits": "scale"})
    x = np.random.default_rng(0).standard_normal((2, 6, 3)).astype(np.float32)
    return spec, _run(pool, TestCase("scale16", spec, {}, {"x": x}))


def test_openvino_refusing_an_invalid_converted_graph_blames_the_converter(converters_pool):
    """A bfloat16 Rescaling: tf2onnx writes a Mul of a float16 tensor and a bfloat16
    constant; OpenVINO's frontend refuses it, and so does the ONNX checker: the refusal names
    the checker's verdict and tf2onnx as the failing component (the known
    tensorflow-onnx#2337), not OpenVINO."""
    from audee.cases.case import Kind
    from audee.triage.known import load_known_issues, match_known
    from audee.triage.signature import case_signatures

    spec, result = _bfloat16_rescaling(converters_pool)
    (f,) = [f for f in result.verdict.findings if f.kind == Kind.DIVERGENT_ACCEPTANCE and "openvino" in f.backends]
    err = f.detail.errors["openvino"]
    assert err.phase == "convert" and err.message.startswith("tf2onnx produced an invalid ONNX graph (onnx.checker:")
    (sig,) = [s for s in case_signatures(result.verdict, spec, {}) if s.backends == ("openvino",)]
    assert sig.component == "tf2onnx" and sig.op == "Mul"
    assert match_known(sig, load_known_issues()).id == "tf2onnx-bfloat16-mixed-types"


@pytest.mark.slow
def test_a_converter_failure_repro_script_runs_each_converter_and_reproduces_alone(converters_pool, tmp_path):
    """A bfloat16 Rescaling fails on OpenVINO (tf2onnx's invalid graph) and on torch-onnx (the
    exporter's); the repro script runs OpenVINO through tf2onnx, LiteRT through the TFLite
    converter and torch-onnx through torch.onnx (not Keras' own backends of those names, nor
    eager torch), and reproduces alone: exit 0."""
    from audee.fuzz import case_record
    from audee.repro import write_repro
    from tests.test_repro import run_alone

    _, result = _bfloat16_rescaling(converters_pool)
    assert result.verdict.failed, result.verdict.to_json()
    rep = write_repro(case_record(result, converters_pool, {"seed": "tiny"}), tmp_path, "scale16")
    got = run_alone(rep.script, tmp_path)
    assert got.returncode == 0, got.stdout + got.stderr[-3000:]
    assert "REPRODUCED" in got.stdout and "openvino 20" in got.stdout and "ai_edge_litert" in got.stdout, got.stdout
    assert "onnxscript" in got.stdout, got.stdout


@pytest.fixture(scope="module")
def fault_pool(tmp_path_factory):
    from audee.backends.pool import Pool

    with Pool(parse_backends(f"tensorflow,{FAULT}"), tmp_path_factory.mktemp("logs"), timeout=300) as pool:
        assert pool.start() == {}
        yield pool


def test_a_fault_in_one_compiled_mode_is_flagged_between_the_two_modes_and_localized(fault_pool, tmp_path):
    from audee.cases.case import Kind, TestCase
    from audee.engine.execute import Executor
    from audee.fuzz import case_record
    from audee.localize.run import localize_case
    from audee.settings import LocalizeSettings
    from audee.store import save_case

    ex = Executor(fault_pool)
    x = np.random.default_rng(0).random((8, 12, 12, 1), dtype=np.float32)
    case = TestCase("xla-fault", tiny_cnn(), {}, {"image": x})
    ex.complete_weights(case, 0)
    result = ex.run(case)
    failures = [f for f in result.verdict.findings if f.is_failure]
    assert failures and all(set(f.backends) == {"tensorflow", FAULT} for f in failures), result.verdict.to_json()
    assert {f.kind for f in failures} <= {Kind.DEVIATION, Kind.INCONSISTENCY}
    (dev,) = [f for f in failures if f.kind == Kind.DEVIATION]
    assert dev.detail.first_layer == "conv" and dev.detail.own_layers == ["conv"]  # pool, flat, logits carry it
    path = save_case(tmp_path / "xla-fault.pkl", case_record(result, fault_pool, {"seed": "tiny"}))
    report = localize_case(path, LocalizeSettings(ga_iter=2), pool=fault_pool)
    # the one-layer model of conv, run in both modes, still deviates: the fault is the layer's
    # own (no parameter value fixes a scaled output, so no (layer, parameter) pair is named)
    assert report.rounds[0].layer == "conv" and report.rounds[0].baseline_rate > 1, report.to_json()


@pytest.mark.slow  # an Inductor compile in a fresh worker; a worker's temp dir: tests/test_keras_import.py
@pytest.mark.fresh_workers  # its worker's own temp dir is watched as it ends
def test_a_compiled_torch_worker_leaves_nothing_in_tmpdir(tmp_path, monkeypatch):
    """torch.compile's Inductor writes its cache under the temp dir (``torchinductor_<user>``):
    each worker gets a temp dir of its own, removed when the worker stops, so the user's
    TMPDIR is left as it was."""
    import tempfile

    from audee.backends.pool import Pool
    from audee.cases.case import TestCase

    tmp = tmp_path / "tmp"  # the run's TMPDIR (the parent's and, without a dir of its own, the worker's)
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    x = np.random.default_rng(0).random((4, 12, 12, 1), dtype=np.float32)
    with Pool(parse_backends("torch-compile"), tmp_path / "logs", timeout=300) as pool:
        assert pool.start() == {}
        result = _run(pool, TestCase("cnn", tiny_cnn(), {}, {"image": x}))
        assert result.outcomes["torch-compile"].ok, result.verdict.to_json()
        own = pool.workers["torch-compile"].tmp
        assert own is not None and own.parent == tmp
        assert any(p.name.startswith("torchinductor_") for p in own.iterdir())  # Inductor wrote there
    assert not own.exists() and list(tmp.iterdir()) == []
