"""Small specs and inputs shared by tests (kept tiny so framework runs stay fast)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from audee.cases.spec import ModelSpec


def tiny_cnn(name: str = "tiny") -> ModelSpec:
    return ModelSpec.from_json({
        "name": name,
        "inputs": [{"name": "image", "shape": [12, 12, 1], "range": [0, 1]}],
        "layers": [
            {"name": "conv", "api": "Conv2D", "params": {"filters": 4, "kernel_size": 3, "activation": "relu"},
             "inputs": ["image"]},
            {"name": "pool", "api": "MaxPooling2D", "params": {"pool_size": 2}, "inputs": ["conv"]},
            {"name": "flat", "api": "Flatten", "params": {}, "inputs": ["pool"]},
            {"name": "logits", "api": "Dense", "params": {"units": 5}, "inputs": ["flat"], "fixed": ["units"]},
            {"name": "softmax", "api": "Softmax", "params": {}, "inputs": ["logits"]},
        ],
        "output": "softmax", "logits": "logits"})


def tiny_inputs(n: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(seed).random((n, 12, 12, 1), dtype=np.float32)}


def run_audee(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``audee ARGS`` run in this process, answered as ``subprocess.run`` answers ``python -m
    audee ARGS`` (exit code, stdout, stderr).  Its backend workers are the suite's kept ones
    (tests/conftest.py), so a test that runs several commands imports each framework once,
    not once a command.  A test of the process itself (a signal, a closed pipe, the entry
    point) runs the real one."""
    import contextlib
    import io
    import os

    from audee.cli import main

    args = list(args)
    if args[:3] == [sys.executable, "-m", "audee"]:  # a command line written for a new process
        args = args[3:]
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(args)
            except SystemExit as exc:  # argparse's usage errors
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["audee", *args], code, out.getvalue(), err.getvalue())


def installed_keras(function: str) -> list:
    """``audee.apis.call_args.<function>(keras)`` sorted, computed in a fresh process with the
    installed Keras (on JAX): the lists audee keeps without importing Keras, held to it."""
    import json
    import os

    code = ("import os; os.environ['KERAS_BACKEND'] = 'jax'; import keras, json; "
            f"from audee.apis.call_args import {function}; print(json.dumps(sorted({function}(keras))))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1], timeout=300, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout.strip().splitlines()[-1])
