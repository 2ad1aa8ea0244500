"""`audee fuzz` end to end on the real frameworks: deterministic, resumable, reproducible."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audee.store import ResultsTable

FUZZ = [sys.executable, "-m", "audee", "fuzz", "--seed", "lenet5", "--backends", "tensorflow,onnxruntime",
        "--batch", "8", "--invalid-prob", "0.3", "--no-progress"]
KEYS = ("id", "status", "kinds", "mutations", "backends", "inconsistent_pairs")


def _run(args: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, cwd=cwd)


def _rows(out: Path) -> list[dict]:
    return [{k: r.get(k) for k in KEYS} for r in ResultsTable(out / "results.jsonl").rows()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("fuzz")
    a, b = base / "a", base / "b"
    first = _run(FUZZ + ["--variants", "8", "--rng", "6", "--out", str(a)])
    assert first.returncode == 0, first.stderr[-3000:]
    second = _run(FUZZ + ["--variants", "8", "--rng", "6", "--out", str(b)])
    assert second.returncode == 0, second.stderr[-3000:]
    return a, b, first.stdout


def test_same_rng_same_variants_and_verdicts(runs):
    a, b, stdout = runs
    assert len(_rows(a)) == 9                     # the seed itself + 8 variants
    assert _rows(a) == _rows(b)
    assert "test cases           9" in stdout
    for r in ResultsTable(a / "results.jsonl").rows():
        assert (a / "variants" / f"{r['id']}.json").is_file()
        if r["status"] == "fail":
            assert (a / r["case_file"]).is_file()


def test_rerun_resumes_and_only_runs_new_variants(runs, tmp_path):
    a, _, _ = runs
    more = _run(FUZZ + ["--variants", "10", "--rng", "6", "--out", str(a)])
    assert more.returncode == 0, more.stderr[-3000:]
    assert "2 test cases run now, 9 resumed" in more.stdout
    ids = [r["id"] for r in ResultsTable(a / "results.jsonl").rows()]
    assert len(ids) == len(set(ids)) == 11


def test_a_recorded_case_reproduces(runs):
    a, _, _ = runs
    failing = [r for r in ResultsTable(a / "results.jsonl").rows() if r["status"] == "fail"]
    assert failing, "rng 6 draws gelu, which tf2onnx 1.17 exports as an Erfc node onnxruntime rejects"
    rep = _run([sys.executable, "-m", "audee", "reproduce", str(a / failing[0]["case_file"]), "--json"])
    assert rep.returncode == 0, rep.stdout + rep.stderr[-2000:]
    assert json.loads(rep.stdout)["holds"] is True


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "x.npz"
    bad.write_bytes(b"nope")
    r = _run([sys.executable, "-m", "audee", "fuzz", "--seed", "lenet5", "--inputs", str(bad), "--out",
              str(tmp_path / "o"), "--no-progress"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(bad) in r.stderr
    r = _run([sys.executable, "-m", "audee", "reproduce", str(bad)])
    assert r.returncode == 2 and "not an audee case file" in r.stderr
    r = _run([sys.executable, "-m", "audee", "fuzz", "--seed", "nope", "--out", str(tmp_path / "o")])
    assert r.returncode == 2 and "no seed named 'nope'" in r.stderr
