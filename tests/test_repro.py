"""Standalone repro scripts (audee.repro, `audee repro`): plain Python that needs no audee.

(a) a real failure on built-in backends: tf2onnx 1.17 exports Keras' exact gelu as an
    ``Erfc`` node that onnxruntime rejects, while TensorFlow runs the model; the script,
    run alone in a fresh process with audee made unimportable, reproduces it (exit 0);
(b) the same record with the activation set back to relu no longer fails: the script
    says so (exit 1);
(c) a truncated, hostile or missing ``.npz`` is bad data (exit 3, "BAD DATA"), checked
    before anything runs: never a verdict, whatever the case's kind.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.backends.registry import BackendRef, parse_backends
from audee.core.errors import AudeeError
from audee.repro import write_repro
from audee.cases.spec import ModelSpec
from audee.store.caserecord import CaseRecord

ERFC = "[ONNXRuntimeError] : 10 : INVALID_GRAPH : ... No Op registered for Erfc with domain_version of 15"


def gelu_record(activation: str = "gelu", backends: str = "tensorflow,onnxruntime") -> CaseRecord:
    """A case as `audee fuzz` records the gelu -> Erfc divergent acceptance (tiny model)."""
    spec = ModelSpec.from_json({
        "name": "gelu", "inputs": [{"name": "x", "shape": [6]}],
        "layers": [{"name": "hidden", "api": "Dense", "params": {"units": 4, "activation": activation},
                    "inputs": ["x"]},
                   {"name": "logits", "api": "Dense", "params": {"units": 3}, "inputs": ["hidden"]},
                   {"name": "out", "api": "Softmax", "params": {}, "inputs": ["logits"]}],
        "output": "out", "logits": "logits"})
    r = np.random.default_rng(0)
    weights = {"hidden": [r.standard_normal((6, 4)).astype("float32"), np.zeros(4, "float32")],
               "logits": [r.standard_normal((4, 3)).astype("float32"), np.zeros(3, "float32")]}
    refs = parse_backends(backends)
    bad = refs[-1].label
    verdict = {"status": "fail", "findings": [{
        "kind": "divergent_acceptance", "backends": [bad],
        "detail": {"accepted": [refs[0].label], "errors": {bad: {"phase": "convert", "message": ERFC}}}}]}
    return CaseRecord(id="gelu-v1", spec=spec.to_json(), weights=weights,
                      inputs={"x": r.standard_normal((4, 6)).astype("float32")}, backends=refs, verdict=verdict,
                      versions={"tensorflow": {"keras": "3.15.1", "tensorflow": "2.21.0"}})


def run_alone(script: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    """The script in a fresh process, cwd elsewhere, audee unimportable (here and in its children)."""
    block = tmp_path / "no_audee"
    block.mkdir(exist_ok=True)
    (block / "sitecustomize.py").write_text("import sys\nsys.modules['audee'] = None  # import audee fails\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND",)}
    env["PYTHONPATH"] = str(block)
    return subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def load_module(script: Path):
    spec = importlib.util.spec_from_file_location("repro_script", script)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_script_text_imports_no_audee(tmp_path):
    rep = write_repro(gelu_record(), tmp_path, "gelu")
    text = rep.script.read_text()
    assert "import audee" not in text and "from audee" not in text
    imports = {line.split()[1] for line in text.splitlines() if line.startswith(("import ", "from "))}
    assert imports <= {"json", "os", "subprocess", "sys", "tempfile", "zipfile", "numpy"}
    assert text.startswith("#!/usr/bin/env python3\n# -*- coding: utf-8 -*-\n# Repro: onnxruntime rejects a model "
                           "that tensorflow runs.")
    assert "Found with: tensorflow: keras 3.15.1, tensorflow 2.21.0" in text
    assert "python gelu.py" in text and rep.data == tmp_path / "gelu.npz"
    with np.load(rep.data) as z:
        assert sorted(z.files) == ["w/hidden/0", "w/hidden/1", "w/logits/0", "w/logits/1", "x/x"]


def test_plugin_failure_is_refused(tmp_path):
    rec = gelu_record()
    rec.backends = [rec.backends[0], BackendRef("tests.plugins:Faulty", "tests.plugins:Faulty", "cpu")]
    rec.verdict["findings"][0]["backends"] = ["tests.plugins:Faulty"]
    with pytest.raises(AudeeError, match="built-in backends only"):
        write_repro(rec, tmp_path, "x")
    assert not list(tmp_path.iterdir())


def test_comparisons_match_audee_oracles(tmp_path):
    from audee.oracle.deviation import normalized_error
    from audee.oracle.labels import label_flips

    mod = load_module(write_repro(gelu_record(), tmp_path, "gelu").script)
    r = np.random.default_rng(1)
    a = r.standard_normal((64, 10)).astype("float32")
    b = a + r.normal(0, 0.3, a.shape).astype("float32")
    b[3, 0] = np.nan
    a[5] = a[5, 0]            # a tie on row 5
    for margin in (0.0, 1e-5, 0.05):
        want = np.flatnonzero(label_flips(a, b, margin).flips)
        assert mod.label_flips(a, b, margin).tolist() == want.tolist()
    err, rows = mod.normalized_error(a, b, 1e-3, 1e-5)
    ref = normalized_error(a, b, (1e-3, 1e-5))
    assert rows.tolist() == [i for i in range(64) if i != 3]
    assert np.allclose(err, ref[rows])
    same, _ = mod.normalized_error(a, a.copy(), 1e-3, 0.0)
    assert not same.any()


def test_gelu_erfc_repro_reproduces_alone(tmp_path):
    """(a): `audee repro` (workers compute the layer alone's input and check it still fails),
    then the script alone in a fresh process, without audee: exit 0."""
    case = gelu_record().to_file(tmp_path / "run" / "cases" / "gelu-v1.pkl")
    r = subprocess.run([sys.executable, "-m", "audee", "repro", str(case), "--layer", "hidden", "--name", "gelu",
                        "--no-run"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "layer hidden alone, 4 input(s), checked to fail now" in r.stdout
    script = tmp_path / "run" / "repro" / "gelu.py"       # default: repro/ beside cases/
    assert '"api": "Dense"' in script.read_text() and '"name": "logits"' not in script.read_text()
    got = run_alone(script, tmp_path)
    assert got.returncode == 0, got.stdout + got.stderr[-3000:]
    assert "REPRODUCED: onnxruntime rejects a model that tensorflow runs" in got.stdout
    assert "Erfc" in got.stdout and "tf2onnx 1.17" in got.stdout


def test_a_case_that_no_longer_fails_says_so(tmp_path):
    """(b): the recorded verdict, a model that now runs everywhere (relu): exit 1."""
    rep = write_repro(gelu_record("relu"), tmp_path, "fixed")
    got = run_alone(rep.script, tmp_path)
    assert got.returncode == 1, got.stdout + got.stderr[-3000:]
    assert "NOT REPRODUCED: onnxruntime rejects a model that tensorflow runs" in got.stdout
    assert "onnxruntime  ran" in got.stdout


def crash_record() -> CaseRecord:
    """A hard crash (onnxruntime killed by a signal): what a dying child would have shown."""
    rec = gelu_record()
    rec.verdict = {"status": "fail", "findings": [{
        "kind": "hard_crash", "backends": ["onnxruntime"],
        "detail": {"how": "signal", "phase": "run", "message": "killed by signal 11"}}]}
    return rec


def inconsistency_record() -> CaseRecord:
    """A label flip between TensorFlow and JAX on input 0."""
    rec = gelu_record(backends="tensorflow,jax")
    rec.verdict = {"status": "fail", "findings": [{
        "kind": "inconsistency", "backends": ["tensorflow", "jax"],
        "detail": {"pair": "tensorflow|jax", "inputs": [0], "n_flips": 1, "distance": 0.5}}]}
    return rec


class Hostile:
    """Unpickling this runs a command: a bad-data check that unpickles would leave the marker."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _spoil(data: Path, how: str, marker: Path) -> None:
    raw = data.read_bytes()
    if how == "truncated":
        data.write_bytes(raw[: len(raw) // 2])
    elif how == "truncated-tail":
        data.write_bytes(raw[:-20])
    elif how == "hostile":  # the same names, one array a pickled object that runs a command
        with np.load(data) as z:
            arrays = {k: z[k] for k in z.files}
        evil = np.empty(1, object)
        evil[0] = Hostile(marker)
        arrays["x/x"] = evil
        np.savez(data, **arrays)
    elif how == "foreign":  # a well-formed .npz of other arrays
        np.savez(data, **{"x/x": np.zeros((2, 6), "float32")})
    else:
        data.unlink()


@pytest.mark.parametrize("how", ["truncated", "truncated-tail", "hostile", "foreign", "missing"])
@pytest.mark.parametrize("record", [crash_record, inconsistency_record], ids=["crash", "inconsistency"])
def test_bad_data_is_reported_as_bad_data_never_a_verdict(tmp_path, record, how):
    """Before: a truncated .npz printed REPRODUCED (exit 0) for a crash case (the children
    died reading it) and "no longer on these versions" for an inconsistency case; a hostile
    one was reported as not reproduced.  The data is checked first, before any framework."""
    from audee.repro import EXIT_BAD_DATA

    rep = write_repro(record(), tmp_path / "out", "case")
    marker = tmp_path / "PWNED"
    _spoil(rep.data, how, marker)
    got = run_alone(rep.script, tmp_path)
    assert got.returncode == EXIT_BAD_DATA == 3, got.stdout + got.stderr[-3000:]
    assert got.stdout.startswith("BAD DATA: case.npz: "), got.stdout
    assert "No verdict" in got.stdout and "REPRODUCED" not in got.stdout and "no longer" not in got.stdout
    assert not marker.exists()   # nothing in the file ran
    assert "# Exit: 0 the failure reproduces" in rep.script.read_text()


def test_the_data_file_is_written_atomically_with_the_files_mode(tmp_path):
    """Through audee.store.atomic.write_atomic: no temp file left, mode 0o666 less the umask."""
    mask = os.umask(0o027)
    try:
        rep = write_repro(gelu_record(), tmp_path, "gelu")
    finally:
        os.umask(mask)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gelu.npz", "gelu.py"]
    assert rep.data.stat().st_mode & 0o777 == 0o640 and rep.script.stat().st_mode & 0o777 == 0o750


def test_a_nan_script_reproduces_only_where_the_backends_patterns_differ(tmp_path):
    """What the NaN oracle judged, the script checks: a NaN on the failing backend where the
    others' pattern differs reproduces; the same NaN on every backend (an overflow all of
    them share) does not, finite inputs or not."""
    mod = load_module(write_repro(gelu_record(), tmp_path, "gelu").script)
    mod.CASE = {**mod.CASE, "kind": "nan", "failing": ["onnxruntime"]}
    finite = {"hidden": np.ones((4, 4), "float32"), "logits": np.ones((4, 3), "float32"),
              "out": np.ones((4, 3), "float32")}
    nan = {**finite, "out": np.array([[np.nan, 0, 0]] + [[1, 0, 0]] * 3, "float32")}

    def results(tf: dict, ort: dict) -> dict:
        return {"tensorflow": {"layers": tf}, "onnxruntime": {"layers": ort}}

    hit, lines = mod.judge(results(finite, nan))
    assert hit and "the backends' patterns differ" in lines[-1]
    hit, lines = mod.judge(results(nan, nan))
    assert not hit and "the same pattern on every backend that ran" in lines[-1]
    hit, _ = mod.judge(results(nan, finite))  # the other backend's NaN is not the failing one's
    assert not hit
    # NaN where the other has an Inf at the same place is a pattern difference, as the oracle
    # judges it (tf2onnx's select lowering: inf * 0 = NaN; the api-cpu campaign, rng 2843)
    inf = {**finite, "out": np.array([[np.inf, 0, 0]] + [[1, 0, 0]] * 3, "float32")}
    hit, lines = mod.judge(results(inf, nan))
    assert hit and "the backends' patterns differ" in lines[-1]


def test_a_signature_the_case_merged_from_several_pairs_gets_a_script_from_one_of_them():
    """Three backends each apart on one layer are one signature naming all three (no finding
    of the case has it alone): its script is written from one member pair's finding, not
    skipped in silence (the api-cpu campaign, rng 2837: a CLAHE root with no script); a
    finding's own signature is still found as itself."""
    from types import SimpleNamespace

    from audee.cases.case import Finding, Kind
    from audee.repro import _finding_of
    from audee.triage.signature import case_signatures, signatures_of

    spec = {"name": "m", "layers": [
        {"name": "conv1", "api": "Conv2D", "params": {"filters": 6}, "inputs": ["x"]},
        {"name": "fc1", "api": "Dense", "params": {"units": 120}, "inputs": ["conv1"]}]}

    def dev(a, b, layer="conv1"):
        return Finding(Kind.DEVIATION, [a, b], {"pair": f"{a}|{b}", "own_layers": [layer], "first_layer": layer})

    findings = [dev("tensorflow", "torch"), dev("jax", "tensorflow"), dev("jax", "torch")]
    (merged,) = case_signatures({"findings": [f.to_json() for f in findings]}, spec, {})
    record = SimpleNamespace(spec=spec, meta={})
    assert not any(s.slug() == merged.slug() for f in findings for s in signatures_of(f, spec, {}))
    assert _finding_of(findings, merged, record) == 0
    other = case_signatures({"findings": [dev("jax", "torch", "fc1").to_json()]}, spec, {})[0]
    assert _finding_of(findings, other, record) is None  # another layer: no member
    alone = [dev("jax", "torch", "fc1"), dev("jax", "torch")]
    (own,) = signatures_of(alone[1], spec, {})
    assert _finding_of(alone, own, record) == 1


def test_a_nan_script_runs_the_layer_where_the_patterns_part_not_a_backends_first_nan():
    """TensorFlow's fused bias+relu turns a NaN the input carried into 0 at the first layer, so
    its first non-finite layer is a later one, where every backend holds NaN alike (the api-cpu
    campaign, rng 2855: lenet5's conv1 and conv2).  The script runs the layer the signature
    blames, where the pair's patterns first differ, not TensorFlow's first NaN."""
    from audee.cases.case import Finding
    from audee.repro import known_layer

    rec = gelu_record(backends="tensorflow,torch")
    nan = {"kind": "nan", "backends": ["tensorflow", "torch"], "detail": {
        "strong": True, "odd": ["tensorflow"], "first_layer": {"tensorflow": "logits", "torch": "hidden"},
        "patterns": {"tensorflow|torch": {"first_layer": "hidden"}}}}
    rec.verdict = {"status": "fail", "findings": [nan]}
    assert known_layer(rec, Finding.from_json(nan)) == "hidden"
    # a pair cleared by conditioning does not place it while another stands; without one, the first NaN
    cleared = {**nan, "detail": {**nan["detail"], "patterns": {
        "tensorflow|torch": {"first_layer": "hidden", "cleared": "overflow"},
        "tensorflow|jax": {"first_layer": "logits"}}}}
    assert known_layer(rec, Finding.from_json(cleared)) == "logits"
    bare = {**nan, "detail": {**nan["detail"], "patterns": {}}}
    assert known_layer(rec, Finding.from_json(bare)) == "logits"


def test_a_smaller_model_that_fails_through_a_sibling_kernel_is_not_this_bugs_script(tmp_path):
    """A channels_first GlobalMaxPooling3D after a channels_last Conv3D: tf2onnx folds the
    transposes into a ReduceMax, and onnxruntime's ReduceMax drops the NaN two infinities make
    (the api-cpu campaign rng 2904).  The layer alone converts to a GlobalMaxPool, which drops
    it too: it still fails, through another kernel (another entry's bug).  The script is the
    whole variant, which shows the ReduceMax the case ran."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.cases.case import Kind, TestCase
    from audee.cases.spec import ModelSpec
    from audee.engine.execute import Executor
    from audee.fuzz import case_record

    spec = ModelSpec.from_json({
        "name": "pool", "inputs": [{"name": "x", "shape": [2, 4, 7, 4]}],
        "layers": [{"name": "a0_conv3d", "api": "Conv3D", "params": {"filters": 4, "kernel_size": 1},
                    "inputs": ["x"]},
                   {"name": "t_pool", "api": "GlobalMaxPooling3D",
                    "params": {"data_format": "channels_first", "keepdims": True}, "inputs": ["a0_conv3d"]}],
        "output": "t_pool", "logits": "t_pool"})
    x = np.random.default_rng(0).uniform(-1, 1, (4, 2, 4, 7, 4)).astype(np.float32)
    x[1, 0, 1, 3, 0:2] = np.inf                     # inf * w + inf * -w: a NaN inside the channel, not first
    case = TestCase("pool-nan", spec, {}, {"x": x})
    with Pool(parse_backends("tensorflow,torch,jax,onnxruntime"), tmp_path / "logs", timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        ex.complete_weights(case, weight_seed=0)
        result = ex.run(case)
        (f,) = [f for f in result.verdict.findings if f.kind == Kind.NAN]
        assert f.detail.program == {"onnxruntime": {"t_pool": ["max_as_reduce_max"]}}
        rep = write_repro(case_record(result, pool, {"seed": "pool"}), tmp_path, "pool", pool=pool)
    assert rep.model == "variant" and rep.verified, rep.notes
    assert any("not through the programs the case ran" in n for n in rep.notes), rep.notes
