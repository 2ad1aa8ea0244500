"""Exit codes: one enum, one table rendered from it (the README holds that table), and one
exit code with one line for a backend that cannot start, whichever command started it.

No framework starts here: the backend that cannot start is a plugin whose module does not
exist, which fails in its worker before any import of a framework."""
from __future__ import annotations

import ast
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

import audee.core.exitcodes
from audee.core.exitcodes import ExitCode, describe, markdown_table

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MISSING = "nosuchmodule_xyz:Backend"


def readme_table() -> str:
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- exit-codes:[^\n]*-->\n(.*?)<!-- /exit-codes -->", text, re.S)
    assert m, "README.md: no <!-- exit-codes --> ... <!-- /exit-codes --> block"
    return m.group(1)


def test_the_readme_table_is_the_one_rendered_from_the_enum():
    assert readme_table() == markdown_table(), (
        "README.md's exit-code table differs from the enum: paste `python -m audee.core.exitcodes` between its markers")


def test_every_code_has_its_meaning_in_the_table_and_the_docstring():
    rows = markdown_table().splitlines()[2:]
    assert [int(r.split("|")[1]) for r in rows] == [int(c) for c in ExitCode]
    for code in ExitCode:
        assert code.brief and code.meaning, code.name
        assert f"| {int(code)} | `{code.name}` |" in (audee.core.exitcodes.__doc__ or ""), code.name
    assert {5, 6} <= {int(c) for c in ExitCode}
    assert describe(ExitCode.OK, ExitCode.BACKEND_UNAVAILABLE) == (
        "exit codes: 0 success, 4 a backend worker could not start")


def test_python_m_audee_exitcodes_prints_the_table():
    r = subprocess.run([sys.executable, "-m", "audee.core.exitcodes"], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout == markdown_table()


# ---- a backend that cannot start: exit 4, one line, every command --------------------------------
def _audee(cwd: Path, *args: str, tmpdir: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if tmpdir is not None:
        env["TMPDIR"] = str(tmpdir)
    return subprocess.run([sys.executable, "-m", "audee", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def _one_line(r: subprocess.CompletedProcess) -> str:
    """stderr is exactly one line, the error, naming the backend and why it failed."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("audee: error:") and "failed to start" in lines[0], lines[0]
    assert MISSING in lines[0] and "No module named 'nosuchmodule_xyz'" in lines[0], lines[0]
    return lines[0]


def test_fuzz_exits_4_with_one_line(tmp_path):
    r = _audee(tmp_path, "fuzz", "--seed", "lenet5", "--backends", MISSING, "--variants", "1", "--no-progress",
               "--out", str(tmp_path / "out"))
    assert r.returncode == ExitCode.BACKEND_UNAVAILABLE, r.stdout + r.stderr
    assert _one_line(r).startswith("audee: error: --backends: backend worker failed to start")


@pytest.mark.parametrize("parallel", [1, 2])
def test_campaign_exits_4_with_one_line(tmp_path, parallel):
    """Serial and with slot processes (parallel units): the slot's error keeps its kind."""
    (tmp_path / "c.yaml").write_text(f"name: t\nparallel_units: {parallel}\nruns:\n  - seeds: [lenet5]\n"
                                     f"    backends: [['{MISSING}']]\n    rngs: [0, 1]\n    variants: 1\n")
    (tmp_path / "tmp").mkdir()
    r = _audee(tmp_path, "campaign", "c.yaml", "--out", str(tmp_path / "out"), "--no-progress",
               tmpdir=tmp_path / "tmp")
    assert r.returncode == ExitCode.BACKEND_UNAVAILABLE, r.stdout + r.stderr
    _one_line(r)
    # a slot stopped by its shard while its workers start kills them and drops their temp dirs
    assert not list((tmp_path / "tmp").glob("audee-worker-*")), list((tmp_path / "tmp").iterdir())


@pytest.mark.parametrize("command", ["reproduce", "localize"])
def test_case_commands_exit_4_with_one_line(tmp_path, command):
    from audee.cases.weights import init_weights
    from tests.helpers import tiny_cnn, tiny_inputs

    weights = init_weights({"conv": [("kernel", (3, 3, 1, 4)), ("bias", (4,))],
                            "logits": [("kernel", (100, 5)), ("bias", (5,))]}, seed=0)
    record = {"format": "audee.case/2", "created": "", "id": "x-1", "spec": tiny_cnn().to_json(),
              "weights": weights, "inputs": tiny_inputs(2), "verdict": {"findings": []}, "versions": {},
              "backends": [{"label": "tensorflow", "target": "audee.backends.keras_backends:TensorflowBackend",
                            "device": "cpu"}]}
    (tmp_path / "case.pkl").write_bytes(pickle.dumps(record, protocol=4))
    r = _audee(tmp_path, command, "case.pkl", "--backends", MISSING)
    assert r.returncode == ExitCode.BACKEND_UNAVAILABLE, r.stdout + r.stderr
    assert _one_line(r).startswith("audee: error: case.pkl: backend worker failed to start")


def test_only_the_pool_decides_what_a_failed_start_means():
    """A pool's start is judged in one place (Pool.start_or_fail); ``audee backends`` alone
    reads the failures itself, to list them.  Nobody else keeps ``pool.start()``'s result
    or ignores it."""
    allowed = {"audee/backends/pool.py", "audee/cli.py"}
    found = []
    for path in sorted((ROOT / "audee").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, (ast.Assign, ast.Expr)) else None
            if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and value.func.attr == "start" and not value.args):
                continue
            owner = ast.unparse(value.func.value)
            if isinstance(node, ast.Assign) or "pool" in owner.lower():
                if rel not in allowed:
                    found.append(f"{rel}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "a pool started outside Pool.start_or_fail:\n" + "\n".join(found)
