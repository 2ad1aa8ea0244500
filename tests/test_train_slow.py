"""The training phase end to end (slow: minutes on 2 cores): the seven seeds trained on
clean backends, `audee fuzz --phase train` with a converter among the backends, and a
real TensorFlow bug the phase finds — its case reproduced, localized and written as a
standalone script that reproduces it alone."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind, TestCase
from audee.mutation.seeds import list_seeds, load_seed
from audee.engine.train import TrainExecutor
from audee.train.setup import TrainSetup

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
KERAS = "tensorflow,torch,jax"
EMBEDDING = {"name": "emb", "inputs": [{"name": "ids", "shape": [6], "dtype": "int32", "range": [0, 4]}],
             "layers": [{"name": "embedding", "api": "Embedding", "params": {"input_dim": 4, "output_dim": 3},
                         "inputs": ["ids"]},
                        {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["embedding"]},
                        {"name": "out", "api": "Dense", "params": {"units": 2}, "inputs": ["flat"]}],
             "output": "out"}


def _audee(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audee", *args], capture_output=True, text=True, timeout=1800,
                          cwd=ROOT)


def tensorflow_sparse_update(f) -> bool:
    """TensorFlow's adaptive optimizers on an Embedding's sparse gradient with repeated ids
    (each slice squared apart, not their sum: a real Keras 3 bug the phase finds, not a
    false positive)."""
    return f.kind == Kind.TRAIN_DEVIATION and f.backends == ["tensorflow"] and f.detail.quantity == "update"


def test_the_seven_seeds_train_alike_on_clean_backends(tmp_path):
    """The seeds end in a softmax, so their categorical cross-entropy is on probabilities:
    where one saturates (Keras' clip region) the loss is left out (``clipped_loss``), and
    elsewhere TensorFlow's loss from the attached logits agrees with the clipped one."""
    setups = [TrainSetup("categorical_crossentropy", "sgd", target_seed=1),
              TrainSetup("mean_squared_error", "adam", steps=2, target_seed=2)]
    failures = []
    with Pool(parse_backends(KERAS), tmp_path) as pool:
        pool.start_or_fail()
        ex = TrainExecutor(pool)
        for name in list_seeds():
            seed = load_seed(name)
            for k, setup in enumerate(setups):
                s = TrainSetup(setup.loss, setup.optimizer, None, setup.steps, setup.target_seed,
                               seed.spec.output == seed.spec.logits_layer)
                case = TestCase(f"{name}-{k}", seed.spec, dict(seed.weights), {n: v[:32] for n, v in seed.inputs.items()},
                                {"train": s.to_json()})
                result = ex.run(case)
                failures += [(case.id, f.kind, f.backends, f.detail.to_json()) for f in result.verdict.findings
                             if f.is_failure and not tensorflow_sparse_update(f)]
    assert not failures, failures


def test_fuzz_phase_train_skips_converters_and_reproduces_its_cases(tmp_path):
    out = tmp_path / "run"
    got = _audee("fuzz", "--api", "BatchNormalization,Dense", "--phase", "train", "--variants", "2", "--steps", "2",
                 "--call-training", "1", "--invalid-prob", "0", "--backends", KERAS + ",onnxruntime", "--out", str(out),
                 "--no-progress")
    assert got.returncode == 0, got.stdout + got.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["phase"] == "train" for r in rows)
    assert all(r["train"]["skipped"] == {"onnxruntime": "onnxruntime: training not supported (runs inference only)"}
               for r in rows)
    assert all(set(r["backends"]) == {"tensorflow", "torch", "jax"} and len(r["train"]["losses"]["jax"]) == 2
               for r in rows)
    assert any("call.training=" in m for r in rows for m in r["mutations"])


def test_a_real_tensorflow_bug_is_found_reproduced_localized_and_scripted(tmp_path):
    spec = tmp_path / "emb.json"
    spec.write_text(json.dumps(EMBEDDING))
    out = tmp_path / "run"
    got = _audee("fuzz", "--seed", str(spec), "--phase", "train", "--variants", "0", "--optimizers", "adam",
                 "--losses", "mean_squared_error", "--backends", KERAS, "--out", str(out), "--no-progress")
    assert got.returncode == 0, got.stdout + got.stderr
    assert "train_deviation      tensorflow     Embedding" in got.stdout
    case = out / "cases" / "emb-seed.pkl"
    assert _audee("reproduce", str(case)).returncode == 0
    loc = _audee("localize", str(case))
    assert loc.returncode == 0 and "layer: embedding (Embedding)" in loc.stdout, loc.stdout + loc.stderr
    rep = _audee("repro", str(case), "--out", str(tmp_path / "repro"))
    assert rep.returncode == 0 and "REPRODUCED" in rep.stdout, rep.stdout + rep.stderr
    assert list((out / "repro").glob("train_deviation-Embedding-tensorflow-*.py"))  # written by the run itself
