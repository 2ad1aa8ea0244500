"""GPU precision modes (issue 14), on CPU: parsing, case files, the flags each worker sets,
and how the oracles judge a pair with a backend in TF32 mode.  The GPU side is measured by
experiments/gpu_precision.py on a CUDA machine (docs/oracles.md)."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from audee.backends.registry import parse_backends, parse_placement
from audee.cases.case import Finding, Kind, Outcome, Verdict
from audee.core.errors import AudeeError, CaseFileError
from audee.engine.execute import fold_reduced_precision_flips
from audee.oracle.deviation import Tolerances, compare, deviation_findings, pair_compute
from audee.oracle.inconsistency import inconsistency_findings
from audee.oracle.labels import label_flips
from audee.settings import TOLERANCES, FuzzSettings, check_backend_name
from audee.store.caserecord import CaseRecord
from tests.helpers import tiny_cnn


# ---- naming a mode -------------------------------------------------------------------------------
def test_modes_labels_and_defaults():
    refs = parse_backends("torch,torch@cuda,torch@cuda:tf32,jax@cuda:1:tf32,jax@cuda:full")
    assert [(r.label, r.device, r.precision) for r in refs] == [
        ("torch", "cpu", "full"), ("torch@cuda", "cuda", "full"), ("torch@cuda:tf32", "cuda", "tf32"),
        ("jax@cuda:1:tf32", "cuda:1", "tf32"), ("jax@cuda", "cuda", "full")]
    # --gpu-precision applies to GPU backends named without a mode; a CPU stays full
    refs = parse_backends("torch,jax@cuda,tensorflow@cuda:full", "cpu", "tf32")
    assert [(r.label, r.precision) for r in refs] == [("torch", "full"), ("jax@cuda:tf32", "tf32"),
                                                      ("tensorflow@cuda", "full")]
    assert [r.label for r in parse_backends("torch,jax", "cuda", "tf32")] == ["torch@cuda:tf32", "jax@cuda:tf32"]


@pytest.mark.parametrize("bad, says", [
    ("torch@cpu:tf32", "GPU mode"), ("torch@cuda:fp16", "unknown precision 'fp16'"),
    ("torch@gpu", "unknown device"), ("torch@cuda,torch@cuda:full", "named twice")])
def test_bad_modes_are_one_line_errors(bad, says):
    with pytest.raises(AudeeError, match=says) as err:
        parse_backends(bad)
    assert err.value.field == "--backends"
    with pytest.raises(AudeeError, match="--gpu-precision"):
        parse_backends("torch@cuda", "cpu", "half")


def test_campaign_names_take_the_same_syntax():
    assert check_backend_name("jax@cuda:0:tf32") == "jax@cuda:0:tf32"
    with pytest.raises(ValueError, match="GPU mode"):
        check_backend_name("jax@cpu:tf32")
    assert parse_placement("cuda:3") == ("cuda:3", "full")


def test_case_files_keep_the_mode_and_old_files_read_as_full(tmp_path):
    good = {"id": "x-v00001", "spec": tiny_cnn().to_json(), "weights": {},
            "inputs": {"image": np.zeros((1, 12, 12, 1), np.float32)},
            "backends": [{"label": "torch@cuda:tf32", "target": "audee.backends.keras_backends:TorchBackend",
                          "device": "cuda", "precision": "tf32"},
                         {"label": "torch", "target": "audee.backends.keras_backends:TorchBackend",
                          "device": "cpu"}],  # no precision: a file from before the modes
            "verdict": {"findings": []}, "versions": {}}
    rec = CaseRecord.from_dict(good, new=True)
    back = CaseRecord.from_file(rec.to_file(tmp_path / "c.pkl"))
    assert [(b.label, b.precision) for b in back.backends] == [("torch@cuda:tf32", "tf32"), ("torch", "full")]
    bad = dict(good, backends=[dict(good["backends"][0], precision="fp8")])
    with pytest.raises(CaseFileError, match=r"backends\[0\]\.precision"):
        CaseRecord.from_dict(bad, new=True)
    bad = dict(good, backends=[dict(good["backends"][1], precision="tf32")])
    with pytest.raises(CaseFileError, match="GPU mode"):
        CaseRecord.from_dict(bad, new=True)


# ---- the flags each worker sets ------------------------------------------------------------------
@pytest.mark.slow  # five workers of their own (GPU environments); the modes' judging runs below
def test_workers_set_and_report_their_precision_switches(tmp_path):
    """The switches are read back from the frameworks inside real workers.  A CPU-only
    machine can still import each framework for a cuda device: nothing runs on it here."""
    got = subprocess.run([sys.executable, "-m", "audee", "backends", "--json", "--backends",
                          "torch@cuda,torch@cuda:tf32,jax@cuda:tf32,tensorflow@cuda,torch"],
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-2000:]
    prec = {r["backend"]: r["precision"] for r in json.loads(got.stdout)}
    assert prec["torch@cuda"]["mode"] == "full"
    assert {prec["torch@cuda"][k] for k in ("matmul", "cudnn.conv", "cudnn.rnn")} == {"ieee"}
    assert prec["torch@cuda"]["NVIDIA_TF32_OVERRIDE"] == "0"
    assert {prec["torch@cuda:tf32"][k] for k in ("matmul", "cudnn.conv", "cudnn.rnn")} == {"tf32"}
    assert prec["torch@cuda:tf32"]["NVIDIA_TF32_OVERRIDE"] == "unset"
    assert prec["jax@cuda:tf32"]["default_matmul_precision"] == "tensorfloat32"
    assert prec["tensorflow@cuda"]["tf32"] == "false"
    assert prec["torch"] == {"mode": "full"}  # a CPU: no switch touched


# ---- judging a TF32 pair -------------------------------------------------------------------------
def _pair(diff: float, modes: tuple[str, str]) -> list[Outcome]:
    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 10)).astype(np.float32)
    b = (a * (1 + diff)).astype(np.float32)
    return [Outcome("x", logits=a, output=a, precision=modes[0]), Outcome("y", logits=b, output=b, precision=modes[1])]


def test_a_tf32_pair_is_judged_with_the_tf32_tolerances():
    assert pair_compute("full", "tf32") == pair_compute("tf32", "tf32") == "tf32"
    assert pair_compute("full", "full") == "full"
    assert TOLERANCES["tf32"] == (1e-2, 1e-3)
    # 0.5% relative: far beyond float32's rounding, inside TF32's
    assert deviation_findings(_pair(5e-3, ("full", "full")))
    assert not deviation_findings(_pair(5e-3, ("full", "tf32")))
    got = deviation_findings(_pair(5e-2, ("tf32", "full")))  # 5%: beyond TF32's too
    assert got and got[0].detail.dtype == "tf32" and got[0].detail.tolerance.to_json() == {"rtol": 1e-2, "atol": 1e-3}
    # the dtype still wins when lower: float16 arrays from a TF32 pair are judged as float16
    h = np.ones((1, 3), np.float16)
    assert compare(h, h, compute="tf32")["dtype"] == "float16"
    assert Tolerances.from_json(FuzzSettings(tf32_rtol=0.05).tolerances()).tf32.rtol == 0.05


def test_near_tied_labels_within_the_tf32_tolerance_are_ties():
    a = np.array([[1.0, 0.996, 0.0]], np.float32)
    b = np.array([[0.996, 1.0, 0.0]], np.float32)
    plain = label_flips(a, b, 1e-5)
    assert plain.flips.tolist() == [True]
    relaxed = label_flips(a, b, 1e-5, rel_margin=1e-2)
    assert relaxed.flips.tolist() == [False] and relaxed.ties.tolist() == [True]
    full = [Outcome("x", logits=a, output=a), Outcome("y", logits=b, output=b)]
    tf32 = [Outcome("x", logits=a, output=a), Outcome("y", logits=b, output=b, precision="tf32")]
    assert inconsistency_findings(full, 1e-5)[0]
    assert not inconsistency_findings(tf32, 1e-5)[0]


def _verdict(dtype: str) -> Verdict:
    return Verdict([Finding(Kind.INCONSISTENCY, ["x", "y"], {"pair": "x|y", "n_flips": 3, "inputs": [1, 4, 7]}),
                    Finding(Kind.DEVIATION_ACCUMULATED, ["x", "y"], {"pair": "x|y", "dtype": dtype}),
                    Finding(Kind.INCONSISTENCY, ["x", "z"], {"pair": "x|z", "n_flips": 1, "inputs": [2]})])


def test_flips_of_an_accumulated_tf32_deviation_are_part_of_it():
    v = _verdict("tf32")
    fold_reduced_precision_flips(v)
    assert [(f.kind, f.detail.pair) for f in v.findings] == [(Kind.DEVIATION_ACCUMULATED, "x|y"),
                                                                (Kind.INCONSISTENCY, "x|z")]
    assert v.findings[0].detail.label_flips == 3 and v.findings[0].detail.flip_inputs == [1, 4, 7]
    full = _verdict("float32")  # full float32 keeps the paper's Definition 2
    fold_reduced_precision_flips(full)
    assert [f.kind for f in full.findings].count(Kind.INCONSISTENCY) == 2
