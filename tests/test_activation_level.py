"""The activation level (``audee fuzz --activation``): one ``keras.activations`` function on a
drawn tensor, a level added as a package plus a registry line, run end to end on the real
frameworks: rows, a case file for the failing case, ``audee reproduce`` and ``audee repro``
through the level registry."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.levels import is_call, level_name, level_named
from audee.cases.opcase import ACTIVATION_NS, ACTIVATIONS, callable_names
from tests.helpers import run_audee

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def test_every_activation_draws_a_json_call_the_workers_accept():
    from audee.levels.activation import generate_activation_case  # noqa: PLC0415 - the level's own test

    names = callable_names()
    for name in ACTIVATIONS:
        for i in range(4):
            case = generate_activation_case(name, 0, i)
            json.dumps(case.call())  # plain data, no code
            assert case.op == ACTIVATION_NS + name and case.op in names
            if name == "glu":  # glu halves its axis: always even
                assert case.tensors["x"].shape[int(case.kwargs.get("axis", -1))] % 2 == 0
        assert "threshold" != name or {"threshold", "default_value"} <= set(case.kwargs)
    a, b = generate_activation_case("relu", 3, 1), generate_activation_case("relu", 3, 1)
    assert a.call() == b.call() and np.array_equal(a.tensors["x"], b.tensors["x"])
    assert "activations.os" not in names and "activations.get" not in names  # the closed set: no helper, no module


def test_a_call_record_names_its_level_by_its_seed_namespace():
    """Two levels whose records hold a call: the seed's namespace tells them apart (the first
    call level in the registry no longer takes every call)."""
    assert level_name({"seed": "activation:gelu"}, call=True) == "activation"
    assert level_name({"seed": "op:cumsum"}, call=True) == "op"
    assert level_name({"seed": "lenet5"}, call=True) == "op"  # an old op record without its namespace
    assert is_call({"seed": "activation:gelu"}) and is_call({"seed": "op:add"}) and not is_call({"seed": "api:Dense"})
    assert level_named("activation").case_id("gelu", 0) == "activation-gelu-v00000"


@pytest.mark.slow
def test_fuzz_activation_writes_rows_a_case_file_and_reproduces(tmp_path):
    """Two cases on torch and jax: gelu on a tensor holding ±Inf (rng 0, special values at
    rate 0.5) differs in its NaN pattern; threshold passes.  The failing case's file is
    re-run by `audee reproduce` and scripted by `audee repro`, both found through the level
    registry, and the script reproduces alone."""
    from audee.store import CaseRecord, RunStore

    out = tmp_path / "run"
    # the commands in this process, on the suite's kept workers; the script alone in its own
    got = run_audee(["fuzz", "--activation", "gelu,threshold", "--variants", "1", "--special-inputs", "0.5",
                     "--backends", "torch,jax", "--out", str(out), "--no-progress"], cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-2000:]
    rows = {r.id: r for r in RunStore(out).rows()}
    assert set(rows) == {"activation-gelu-v00000", "activation-threshold-v00000"}
    assert rows["activation-threshold-v00000"].status == "pass"
    bad = rows["activation-gelu-v00000"]
    assert bad.status == "fail" and bad.case_file and bad.api == "activations.gelu"
    rec = CaseRecord.from_file(out / bad.case_file)
    assert rec.op["op"] == "activations.gelu" and rec.spec == {}
    again = run_audee(["reproduce", str(out / bad.case_file)], cwd=tmp_path)
    assert again.returncode == 0 and "verdict holds" in again.stdout, again.stdout + again.stderr[-2000:]
    script = run_audee(["repro", str(out / bad.case_file), "--out", str(tmp_path / "repro")], cwd=tmp_path)
    assert script.returncode == 0 and "REPRODUCED" in script.stdout, script.stdout + script.stderr[-2000:]
    scripts = sorted((tmp_path / "repro").glob("*.py"))
    assert scripts and "gelu" in scripts[0].name
    alone = subprocess.run([sys.executable, "-P", str(scripts[0])], env=ENV, capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
    assert alone.returncode == 0 and "\nREPRODUCED" in alone.stdout, alone.stdout[-2000:] + alone.stderr[-2000:]
