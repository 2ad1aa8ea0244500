"""The command line's plumbing: --version, exit codes, broken pipes, logging, file modes."""
from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import audee
from audee.cli import main
from audee.core.exitcodes import ExitCode
from audee.core.logs import level_for
from audee.store import ResultsTable
from audee.store.atomic import write_atomic

ROOT = Path(__file__).resolve().parent.parent


def _audee(*args: str, cwd: Path = ROOT, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audee", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, **kw)


def test_version(capsys):
    assert audee.__version__ == "0.2.0"
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"audee {audee.__version__}"


def test_exit_codes_are_one_enum():
    assert [(c.name, int(c)) for c in ExitCode][:10] == [
        ("OK", 0), ("NOT_REPRODUCED", 1), ("BAD_INPUT", 2), ("NOT_LOCALIZED", 3), ("BACKEND_UNAVAILABLE", 4),
        ("COVERAGE_GAP", 5), ("UNIT_ERRORS", 6), ("SCRIPTS_BROKEN", 7), ("NO_CHANGE", 8), ("INTERRUPTED", 130)]
    import audee.cli as cli

    assert not [name for name in vars(cli) if name.startswith("EXIT_")]
    readme = (ROOT / "README.md").read_text()
    for code in ExitCode:
        assert f"`{code.name}`" in readme, code


def test_backends_exits_backend_unavailable_not_not_reproduced(capsys):
    code = main(["backends", "--backends", "tests.plugins:Nope", "--json"])
    assert code == ExitCode.BACKEND_UNAVAILABLE != ExitCode.NOT_REPRODUCED
    rows = json.loads(capsys.readouterr().out)
    assert [r["usable"] for r in rows] == [False] and "Nope" in rows[0]["error"]


@pytest.mark.parametrize("args", [["seeds", "--json"], ["apis"], ["seeds"]])
def test_a_closed_pipe_ends_quietly(args):
    proc = subprocess.Popen([sys.executable, "-m", "audee", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written, as `| head -0` would
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=120)
    assert code in (0, ExitCode.BROKEN_PIPE), err
    assert "Traceback" not in err and "Error" not in err, err


def test_a_pipe_closed_after_one_line_ends_quietly():
    r = subprocess.run(f"{sys.executable} -m audee apis | head -1; echo \"rc=${{PIPESTATUS[0]}}\"", shell=True,
                       executable="/bin/bash", cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = r.stdout.splitlines()
    assert len(lines) == 2 and lines[1] in ("rc=0", "rc=141"), r.stdout
    assert r.stderr == "", r.stderr


def test_verbosity_levels():
    assert level_for(-1) == logging.ERROR and level_for(0) == logging.WARNING
    assert level_for(1) == logging.INFO and level_for(2) == level_for(5) == logging.DEBUG


def test_verbose_fuzz_logs_to_stderr_and_to_out_logs(tmp_path):
    out = tmp_path / "run"
    r = _audee("-vv", "fuzz", "--seed", "lenet5", "--backends", "jax", "--variants", "1", "--batch", "4",
               "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "test cases run now" in r.stdout and "INFO" not in r.stdout  # results on stdout, the log on stderr
    for text in (r.stderr, (out / "logs" / "audee.log").read_text()):
        assert "fuzz lenet5 on jax" in text
        assert "worker jax: started" in text and "worker jax: ready" in text
        assert "case lenet5-seed: pass" in text and "case lenet5-v00000:" in text  # debug: each verdict
        assert "fuzz lenet5 done" in text

    quiet = _audee("-q", "fuzz", "--seed", "lenet5", "--backends", "jax", "--variants", "1", "--batch", "4",
                   "--out", str(out), "--no-progress")
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr[-3000:]
    log = (out / "logs" / "audee.log").read_text()
    assert log.count("fuzz lenet5 done") == 2 and "0 test cases run, 2 resumed" in log  # the file logs at INFO


def test_a_campaign_shard_logs_its_units(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("name: tiny\ndefaults: {variants: 1, batch: 4}\nruns:\n  - seeds: [lenet5]\n"
                   "    backends: [[jax]]\n    rngs: [0, 1]\n")
    out = tmp_path / "camp"
    r = _audee("campaign", str(cfg), "--out", str(out), "--shard", "0/1", "--no-progress")
    assert r.returncode == 0, r.stderr[-3000:]
    log = (out / "logs" / "shard-0-of-1" / "audee.log").read_text()
    units = sorted(p.name for p in (out / "units").iterdir())
    assert len(units) == 2
    for unit in units:
        assert f"unit {unit}: started" in log and f"unit {unit}: done" in log
    assert "worker jax: started" in log and "shard 0/1 finished" in log


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_their_mode_from_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        write_atomic(tmp_path / "cases" / "x.pkl", b"case")
        write_atomic(tmp_path / "status" / "shard-0-of-1.json", b"{}")
        write_atomic(tmp_path / "status" / "shard-0-of-1.json", b"{\"again\": 1}")  # replaced: mode kept
        ResultsTable(tmp_path / "results.jsonl").append({"id": "a"})
    finally:
        os.umask(old)
    for p in ("cases/x.pkl", "status/shard-0-of-1.json", "results.jsonl"):
        assert stat.S_IMODE((tmp_path / p).stat().st_mode) == mode, p
    assert not [p for p in tmp_path.rglob("*.tmp")]
