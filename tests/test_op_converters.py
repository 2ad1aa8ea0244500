"""Op cases through the ONNX converters: ``onnxruntime`` (and ``openvino``, on the same graph)
runs a ``keras.ops`` call as it runs a model: the call traced by TensorFlow with its tensors
as the inputs, converted by tf2onnx, run by the runtime; judged against ``tensorflow``, the
program before conversion (``torch-onnx``: the call on torch, exported by torch's dynamo
exporter, judged against ``torch``).  A converter's refusal is a limitation in phase
``convert``, a converted side that maps a NaN to a finite value is a bug of the converter,
and the op script converts the call too and reproduces a converter's finding standalone.

The real-framework tests start TensorFlow, onnxruntime, OpenVINO and a plugin on
onnxruntime's path (four TensorFlow workers), and torch with torch-onnx: slow."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from audee.cases.case import Kind
from audee.cases.opcase import OpCase

PLUGIN = "tests.plugins:NanFiniteOnnxOps"
NO_PYTHONPATH = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _case(op, tensors, args, kwargs=None):
    return OpCase(op, args, kwargs or {}, tensors, {k: str(v.dtype) for k, v in tensors.items()})


# ---- no framework --------------------------------------------------------------------------------
def test_the_onnx_converters_run_ops_and_their_script_lines_convert_the_call():
    """``onnxruntime``, ``onnxruntime-fed``, ``openvino`` and ``torch-onnx`` call ops
    (description and class agree; ``torch-onnx-ts`` runs models only); their op script lines convert the call with the worker's
    own functions, carried verbatim; the gradient phase leaves them out."""
    from audee.backends.info import BUILTIN_INFO
    from audee.backends.onnx_backend import OnnxRuntimeBackend, OnnxRuntimeFedBackend
    from audee.backends.openvino_backend import OpenVinoBackend
    from audee.backends.torch_onnx_backend import TorchOnnxBackend, TorchOnnxTsBackend
    from audee.repro.ops import op_code

    for cls in (OnnxRuntimeBackend, OnnxRuntimeFedBackend, OpenVinoBackend, TorchOnnxBackend):
        assert cls.runs_ops and BUILTIN_INFO[cls.name].runs_ops and not hasattr(cls, "run_op_grad")
    assert not TorchOnnxTsBackend.runs_ops and not BUILTIN_INFO["torch-onnx-ts"].runs_ops  # models only
    labels = ["tensorflow", "onnxruntime", "openvino", "torch-onnx"]
    code = op_code(labels)
    ns: dict = {}
    exec(compile(code, "op_code", "exec"), ns)  # defines functions only: no framework imported
    assert len({ns["OP_CALLS"][n] for n in labels}) == 4
    for name in ("split_tensors", "_flat", "tf_traced_call", "check_graph_dtypes", "tf2onnx_call", "torch_onnx_call",
                 "numpy_to_ort", "ort_to_numpy", "_torch_to_numpy"):
        assert code.count(f"def {name}(") == 1, name
    assert "ort.InferenceSession(" in code and "core.compile_model(" in code


# ---- real frameworks -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends(f"tensorflow,onnxruntime,openvino,{PLUGIN}"), tmp_path_factory.mktemp("logs"), threads=1,
              timeout=600) as p:
        p.start_or_fail()
        yield p


def _sigs(result, op):
    from audee.triage.signature import case_signatures

    return case_signatures(result.verdict, None, {"op": op, "api": op})


@pytest.mark.slow
def test_an_op_call_through_onnxruntime_agrees_with_tensorflow(pool):
    """``add`` and ``max`` over an axis, converted by tf2onnx and run by onnxruntime and by
    OpenVINO, equal TensorFlow's traced call on finite values; the gradient phase asks no
    converter."""
    from audee.engine.opexec import OpExecutor

    assert pool.op_labels == ["tensorflow", "onnxruntime", "openvino", PLUGIN]
    assert pool.op_grad_labels == ["tensorflow"]
    ex = OpExecutor(pool)
    x = np.array([[1.5, -2.0, 3.25], [4.0, 5.5, -1.0]], np.float32)
    y = np.array([0.5, 2.0, -3.0], np.float32)
    added = ex.run(_case("add", {"x": x, "y": y}, [{"tensor": "x"}, {"tensor": "y"}]))
    maxed = ex.run(_case("max", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    for r, want in ((added, x + y), (maxed, x.max(axis=1))):
        assert not [f for f in r.verdict.findings if f.is_failure], r.verdict.findings
        for converter in ("onnxruntime", "openvino"):
            assert np.array_equal(r.outputs[converter][0], want) and r.dtypes[converter] == ["float32"]
            assert "convert" in r.phases[converter]


@pytest.mark.slow
def test_an_op_tf2onnx_cannot_convert_is_a_limitation_in_its_words(pool):
    """tf2onnx has no ONNX op for TensorFlow's ``Erfinv`` and leaves the node as it is;
    onnxruntime refuses the graph: a convert failure naming the missing op, a limitation."""
    from audee.engine.opexec import OpExecutor
    from audee.triage.rootcause import classify

    x = np.array([0.5, -0.25, 0.0], np.float32)
    r = OpExecutor(pool).run(_case("erfinv", {"x": x}, [{"tensor": "x"}]))
    failure = r.outcomes["onnxruntime"].failure
    assert failure is not None and failure.phase == "convert"
    assert "No Op registered for Erfinv" in failure.message and failure.message.startswith("tf2onnx produced")
    assert r.outcomes["tensorflow"].failure is None
    sigs = [s for s in _sigs(r, "erfinv") if "onnxruntime" in s.backends]
    assert sigs and all(classify(s)[0] == "limitation" for s in sigs)


@pytest.mark.slow
def test_a_converter_mapping_nan_to_a_finite_value_is_its_bug(pool):
    """The plugin converts the call as onnxruntime does and maps a NaN to 1.0: against its
    reference (``tensorflow``, which keeps the NaN) it is the odd side and the root a bug,
    though the input holds the NaN; onnxruntime, keeping it, is no part of the finding."""
    from audee.engine.opexec import OpExecutor
    from audee.triage.rootcause import classify

    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    r = OpExecutor(pool).run(_case("add", {"x": x, "y": x}, [{"tensor": "x"}, {"tensor": "y"}]))
    assert np.isnan(r.outputs["onnxruntime"][0][0, 1]) and r.outputs[PLUGIN][0][0, 1] == 1.0
    (f,) = [f for f in r.verdict.findings if f.kind == Kind.NAN]
    assert f.detail.odd == [PLUGIN] and "onnxruntime" not in f.detail.odd
    sigs = [s for s in _sigs(r, "add") if s.kind == Kind.NAN]
    assert sigs and all(s.odd == (PLUGIN,) and classify(s)[0] == "bug" for s in sigs)


@pytest.mark.slow
def test_an_onnxruntime_op_finding_reproduces_standalone(pool, tmp_path):
    """onnxruntime's and OpenVINO's ``max`` over an axis drop a NaN TensorFlow keeps (tf2onnx's
    ReduceMax): a bug of each converted side, though the three converted sides are a majority,
    and the op script, converting the call with the worker's own lines, reproduces it without
    audee."""
    from audee.engine.opexec import OpExecutor
    from audee.repro.ops import write_op_repro
    from audee.store import CaseRecord
    from audee.triage.rootcause import classify

    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    r = OpExecutor(pool).run(_case("max", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    assert np.isnan(r.outputs["tensorflow"][0][0]) and r.outputs["onnxruntime"][0].tolist() == [3.0, 5.0]
    assert r.outputs["openvino"][0].tolist() == [3.0, 5.0]
    (f,) = [f for f in r.verdict.findings if f.kind == Kind.NAN]
    # both converted sides drop it: their agreement outvotes no reference, the pair rule names them
    assert f.detail.odd == sorted(["onnxruntime", "openvino", PLUGIN])
    assert f.detail.odd_rule == "judged against its reference tensorflow"
    sigs = [s for s in _sigs(r, "max") if s.kind == Kind.NAN and "onnxruntime" in s.odd]
    assert sigs and all(classify(s)[0] == "bug" for s in sigs)
    refs = [w.ref for label, w in pool.workers.items() if label != PLUGIN]  # the built-ins' script
    rec = CaseRecord.from_result(r, refs, pool.versions())
    pair = {k: v for k, v in f.detail.patterns.items() if set(k.split("|")) == {"tensorflow", "onnxruntime"}}
    assert pair
    f.detail.patterns = pair
    f.backends = ["tensorflow", "onnxruntime"]
    rec.verdict = {**rec.verdict, "findings": [f.to_json()]}
    script = write_op_repro(rec, tmp_path, "onnxruntime-max-nan", 0)
    assert "def tf2onnx_call(" in script.read_text()
    got = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=NO_PYTHONPATH)
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]


@pytest.mark.slow
def test_torch_onnx_exports_the_call_alone_and_its_nan_drop_is_its_bug(tmp_path):
    """``torch-onnx`` exports the call on the torch backend by ``torch.onnx.export(dynamo=True)``
    and runs it in onnxruntime: ``add`` agrees with eager torch, ``max`` over an axis drops the
    NaN torch keeps (ReduceMax again), a bug of ``torch-onnx`` judged against ``torch``, and its op
    script exports the call too and reproduces it."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.opexec import OpExecutor
    from audee.repro.ops import write_op_repro
    from audee.store import CaseRecord
    from audee.triage.rootcause import classify

    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    y = np.array([0.5, 2.0, -3.0], np.float32)
    with Pool(parse_backends("torch,torch-onnx"), tmp_path / "logs", threads=1, timeout=600) as p:
        p.start_or_fail()
        ex = OpExecutor(p)
        added = ex.run(_case("add", {"x": x, "y": y}, [{"tensor": "x"}, {"tensor": "y"}]))
        maxed = ex.run(_case("max", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
        rec = CaseRecord.from_result(maxed, [w.ref for w in p.workers.values()], p.versions())
    assert np.array_equal(added.outputs["torch-onnx"][0], x + y, equal_nan=True)
    assert not [f for f in added.verdict.findings if f.is_failure and f.kind != Kind.NAN_PROPAGATED]
    assert np.isnan(maxed.outputs["torch"][0][0]) and maxed.outputs["torch-onnx"][0].tolist() == [3.0, 5.0]
    (f,) = [f for f in maxed.verdict.findings if f.kind == Kind.NAN]
    assert f.detail.odd == ["torch-onnx"] and f.detail.odd_rule == "judged against its reference torch"
    sigs = [s for s in _sigs(maxed, "max") if s.kind == Kind.NAN]
    assert sigs and all(classify(s)[0] == "bug" for s in sigs)
    rec.verdict = {**rec.verdict, "findings": [f.to_json()]}
    script = write_op_repro(rec, tmp_path, "torch-onnx-max-nan", 0)
    assert "def torch_onnx_call(" in script.read_text()
    got = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=NO_PYTHONPATH)
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]
