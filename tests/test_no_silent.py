"""Nothing degrades in silence: a run that asks for a float64 reference gets one (the
workers that compute it started beside the run's) or stops with one line before its first
case; environment variables are checked like flags; a run directory's settings are never
changed under its rows; settings out of range and empty runs are one line, not tracebacks."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from audee.backends.registry import parse_backends
from audee.cli import main
from audee.core.exitcodes import ExitCode
from audee.reference.run import candidates, reference_refs
from audee.store import ResultsTable
from tests.helpers import run_audee

FUZZ = [sys.executable, "-m", "audee", "fuzz", "--seed", "lenet5", "--batch", "4", "--no-progress",
        "--operators", "redraw", "--invalid-prob", "0"]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """In this process, on the suite's kept workers (:func:`tests.helpers.run_audee`)."""
    return run_audee(args)


def _error_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("audee: error: "), err
    return err[0]


# ---- the float64 reference ----------------------------------------------------------------------
def test_the_reference_candidates_are_the_backends_that_compute_float64():
    """JAX's float64 is its x64 twin's; a named backend the run lacks is a worker of its own."""
    assert candidates(["jax", "torch"]) == ["jax-x64", "torch"]
    assert candidates(["onnxruntime", "jax@cuda"]) == ["jax-x64@cuda"]
    assert candidates(["jax", "torch"], "tensorflow") == ["tensorflow", "jax-x64", "torch"]
    assert candidates(["onnxruntime"]) == []
    refs = reference_refs(parse_backends("jax,torch"), "tensorflow")
    assert [(r.label, r.target) for r in refs] == [
        ("tensorflow", "audee.backends.keras_backends:TensorflowBackend"),
        ("jax-x64", "audee.backends.modes:JaxX64Backend")]


def test_a_reference_no_backend_computes_is_one_line_before_any_case(tmp_path, capsys):
    out = tmp_path / "o"
    code = main(["fuzz", "--seed", "lenet5", "--backends", "onnxruntime", "--reference", "float64",
                 "--variants", "1", "--out", str(out), "--no-progress"])
    assert code == ExitCode.BAD_INPUT
    assert "--reference: no backend of the run computes the float64 reference" in _error_line(capsys)
    assert not (out / "results.jsonl").exists()


def test_a_campaign_reference_no_backend_computes_is_refused_at_load(tmp_path):
    from audee.campaign.config import load_campaign
    from audee.core.errors import ConfigError

    f = tmp_path / "c.yaml"
    f.write_text("name: x\ndefaults: {reference: float64}\nruns:\n  - seeds: [lenet5]\n"
                 "    backends: [[jax, torch], [onnxruntime]]\n")
    with pytest.raises(ConfigError, match=r"runs\[0\]\.backends\[1\]: no backend of this set computes"):
        load_campaign(f)


@pytest.mark.parametrize("extra, computed_by", [
    ([], "jax-x64"),                                       # JAX's own float64, x64 in its reference worker only
    (["--reference-backend", "tensorflow"], "tensorflow"),  # a backend the run does not test
])
def test_every_case_gets_a_float64_reference(tmp_path, extra, computed_by):
    """``--backends jax,torch --reference float64``: every row records a float64 reference;
    the run's own backends (and rows, case files) are jax and torch alone."""
    out = tmp_path / "o"
    got = _run(FUZZ + ["--backends", "jax,torch", "--reference", "float64", "--variants", "2", "--rng", "3",
                       "--out", str(out)] + extra)
    assert got.returncode in (0, 1), got.stderr[-3000:]
    rows = list(ResultsTable(out / "results.jsonl").rows())
    assert len(rows) == 3
    for row in rows:
        assert set(row["backends"]) == {"jax", "torch"}, row["backends"]
        ref = row["reference"]
        assert ref["dtype"] == "float64" and ref["backend"] == computed_by, ref
        assert set(ref["errors"]) == {"jax", "torch"}, ref


# ---- environment variables ----------------------------------------------------------------------
@pytest.mark.parametrize("name, value, why", [
    ("AUDEE_WORKER_MEMORY_MB", "-1", "must be between 512"),
    ("AUDEE_WORKER_MEMORY_MB", "4", "must be between 512"),       # no framework starts in 4 MiB
    ("AUDEE_WORKER_MEMORY_MB", "abc", "expected a number, got 'abc'"),
    ("AUDEE_WORKER_MEMORY_MB", "nan", "expected a finite number"),
    ("AUDEE_GPU_MEM_FRACTION", "1.5", "must be > 0 and <= 1"),
    ("AUDEE_THREADS", "two", "expected an integer"),
    ("AUDEE_SEEDS", "/nonexistent/seeds", "not a directory"),
])
def test_a_bad_environment_variable_is_one_line_naming_it_before_any_case(tmp_path, capsys, monkeypatch,
                                                                           name, value, why):
    monkeypatch.setenv(name, value)
    out = tmp_path / "o"
    code = main(["fuzz", "--seed", "lenet5", "--backends", "torch", "--variants", "1", "--out", str(out),
                 "--no-progress"])
    assert code == ExitCode.BAD_INPUT
    line = _error_line(capsys)
    assert line.startswith(f"audee: error: environment: {name}: ") and why in line, line
    assert not out.exists()


def test_a_sane_worker_memory_cap_is_accepted():
    from audee.settings import check_environment

    check_environment({"AUDEE_WORKER_MEMORY_MB": "800", "AUDEE_GPU_MEM_FRACTION": "0.5", "AUDEE_THREADS": "2",
                       "AUDEE_SEEDS": ""})


# ---- resuming a run directory -------------------------------------------------------------------
def test_a_rerun_with_other_settings_is_refused_and_config_json_kept(tmp_path, capsys):
    out = tmp_path / "o"
    base = ["fuzz", "--seed", "lenet5", "--backends", "torch", "--batch", "4", "--operators", "redraw",
            "--out", str(out), "--no-progress"]
    assert main(base + ["--variants", "1", "--rng", "1"]) in (0, 1)
    capsys.readouterr()
    config = (out / "config.json").read_bytes()
    rows = (out / "results.jsonl").read_bytes()
    for other, named in ((["--rng", "2"], "rng"), (["--rng", "1", "--backends", "jax"], "backends"),
                         (["--rng", "1", "--equivalence", "padding", "--batch", "8"], "batch, equivalence"),
                         (["--rng", "1", "--level", "input", "--fitness", "nan"], "search")):
        code = main(base + ["--variants", "1"] + other)
        assert code == ExitCode.BAD_INPUT, other
        line = _error_line(capsys)
        assert line.startswith(f"audee: error: {out / 'config.json'}: {named}: holds a run with other settings"), line
        assert "give another --out" in line
        assert (out / "config.json").read_bytes() == config and (out / "results.jsonl").read_bytes() == rows
    # more variants, another time limit and thread count: the same run, resumed and extended
    assert main(base + ["--variants", "2", "--rng", "1", "--timeout", "300", "--threads-per-backend", "1"]) in (0, 1)
    assert len(list(ResultsTable(out / "results.jsonl").rows())) == 3
    assert json.loads((out / "config.json").read_text())["variants"] == 2


def test_a_campaign_changed_under_its_out_is_refused_before_any_unit(tmp_path, capsys):
    f = tmp_path / "c.yaml"
    out = tmp_path / "o"
    f.write_text("name: x\ndefaults: {variants: 1, batch: 4, operators: redraw}\n"
                 "runs:\n  - seeds: [lenet5]\n    backends: [[torch]]\n")
    assert main(["campaign", str(f), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    (unit,) = [d for d in (out / "units").iterdir()]
    config = (unit / "config.json").read_bytes()
    for changed, named in (("variants: 2", "variants"), ("variants: 1, special_inputs: 0.5", "special_inputs")):
        f.write_text(f"name: x\ndefaults: {{{changed}, batch: 4, operators: redraw}}\n"
                     "runs:\n  - seeds: [lenet5]\n    backends: [[torch]]\n")
        assert main(["campaign", str(f), "--out", str(out), "--no-progress"]) == ExitCode.BAD_INPUT
        line = _error_line(capsys)
        assert f"{unit / 'config.json'}: {named}: holds a run with other settings" in line, line
        assert (unit / "config.json").read_bytes() == config


# ---- settings out of range, runs nobody takes part in --------------------------------------------
@pytest.mark.parametrize("args, field, why", [
    (["--phase", "train", "--learning-rate", "inf"], "--learning-rate", "expected a finite number"),
    (["--phase", "train", "--learning-rate", "0"], "--learning-rate", "must be > 0"),
    (["--phase", "train", "--optimizers", "sgd:1e308,adam:1e308"], "--optimizers", "use smaller weights"),
    (["--phase", "train", "--losses", "huber:1e308,hinge:1e308"], "--losses", "use smaller weights"),
])
def test_a_setting_out_of_range_is_one_line_naming_the_flag(tmp_path, capsys, args, field, why):
    out = tmp_path / "o"
    code = main(["fuzz", "--seed", "lenet5", "--backends", "torch", "--variants", "1", "--out", str(out),
                 "--no-progress"] + args)
    assert code == ExitCode.BAD_INPUT
    line = _error_line(capsys)
    assert f" {field}: " in line and why in line, line
    assert not out.exists()


@pytest.mark.parametrize("backend, args, why", [  # the converters call ops alone; the TorchScript export only models
    ("torch-onnx-ts", ["--op", "abs"], "no backend of the run calls keras.ops functions"),
    ("onnxruntime", ["--seed", "lenet5", "--phase", "train"], "no backend of the run trains"),
])
def test_a_run_no_backend_takes_part_in_is_one_line(tmp_path, capsys, backend, args, why):
    out = tmp_path / "o"
    code = main(["fuzz", "--backends", backend, "--variants", "1", "--out", str(out), "--no-progress"] + args)
    assert code == ExitCode.BAD_INPUT
    line = _error_line(capsys)
    assert line.startswith("audee: error: --backends: ") and why in line, line
    assert not (out / "results.jsonl").exists()
