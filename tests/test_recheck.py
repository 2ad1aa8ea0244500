"""``audee recheck``: every standalone script of a folder run again, each alone, and the table
of which still reproduce, which are fixed and which are broken, with an exit code a CI job
reads.  The scripts here are real scripts in real processes (tiny ones, and two that audee
writes for a run directory, run on TensorFlow and onnxruntime); ``findings/`` is read, not run."""
from __future__ import annotations

import ast
import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from audee.core.errors import AudeeError
from audee.core.exitcodes import ExitCode
from audee.repro.recheck import (AUDEE, BROKEN, FINDINGS, FIXED, REPRODUCES, UNTESTABLE, ProcessRun, combine,
                                 convention_of, default_out, documented_backends, find_scripts, interpreter, judge,
                                 run_alone)
from audee.repro.scaffold import _SCAFFOLD, SCAFFOLD_MARK

ROOT = Path(__file__).resolve().parents[1]
FINDINGS_DIR = ROOT / "findings"

REPRODUCES_SCRIPT = '"""Still there."""\nimport sys\nprint("checking")\nprint("REPRODUCED: still wrong")\nsys.exit(1)\n'
FIXED_SCRIPT = '"""Gone."""\nprint("NOT REPRODUCED: right now")\n'
ERROR_SCRIPT = '"""Cannot run."""\nimport no_such_module_xyz\nprint("REPRODUCED")\n'
UNTESTABLE_SCRIPT = ('"""Needs a kernel this CPU lacks."""\nimport sys\n'
                     'print("NOT TESTABLE HERE: this CPU has no AVX-512")\nsys.exit(2)\n')


def _audee(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "audee", "recheck", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


def _folder(tmp_path: Path, **scripts: str) -> Path:
    folder = tmp_path / "scripts"
    folder.mkdir()
    for name, text in scripts.items():
        (folder / f"{name}.py").write_text(text)
    return folder


def test_three_scripts_three_rows_and_the_broken_exit_code(tmp_path):
    folder = _folder(tmp_path, a_reproduces=REPRODUCES_SCRIPT, b_fixed=FIXED_SCRIPT, c_errors=ERROR_SCRIPT,
                     make_table="raise SystemExit('a generator, not a script: never run')", _helper="")
    (folder / "notes.md").write_text("not a script\n")
    r = _audee(str(folder), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == ExitCode.SCRIPTS_BROKEN == 7, r.stdout + r.stderr
    assert "3 of 3 scripts: 1 reproduce, 1 fixed, 1 broken" in r.stdout
    with open(tmp_path / "out" / "recheck.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(Path(row["script"]).name, row["result"]) for row in rows] == [
        ("a_reproduces.py", "reproduces"), ("b_fixed.py", "fixed"), ("c_errors.py", "broken")]
    assert rows[0]["last_line"] == "REPRODUCED: still wrong" and rows[0]["exit"] == "1" and not rows[0]["note"]
    assert rows[1]["last_line"] == "NOT REPRODUCED: right now" and rows[1]["exit"] == "0"
    assert "No module named 'no_such_module_xyz'" in rows[2]["last_line"]
    assert "printed neither REPRODUCED nor NOT REPRODUCED" in rows[2]["note"]
    import keras  # noqa: PLC0415 - the interpreter's own version, as the table has it

    assert {row["keras"] for row in rows} == {keras.__version__}
    doc = json.loads((tmp_path / "out" / "recheck.json").read_text())
    assert doc["counts"] == {"reproduces": 1, "fixed": 1, "not testable here": 0, "broken": 1}
    assert doc["rows"][2]["runs"][0]["stderr"].rstrip().endswith("No module named 'no_such_module_xyz'")
    md = (tmp_path / "out" / "recheck.md").read_text()
    assert "| script | result |" in md and md.count("\n| ") == 4 and f"keras {keras.__version__}" in md


@pytest.mark.parametrize("scripts, code", [({"a": REPRODUCES_SCRIPT, "b": FIXED_SCRIPT}, ExitCode.NOT_REPRODUCED),
                                           ({"a": REPRODUCES_SCRIPT}, ExitCode.OK)])
def test_fixed_without_broken_exits_1_and_all_reproducing_0(tmp_path, scripts, code):
    r = _audee(str(_folder(tmp_path, **scripts)), "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert r.returncode == code, r.stdout + r.stderr


def test_a_script_that_cannot_test_here_is_neither_fixed_nor_broken(tmp_path):
    """A bug in a kernel for an instruction set this CPU lacks cannot show here: its script's NOT
    TESTABLE HERE is counted apart, and a recheck where every script that could run reproduces
    exits 0, not 1 (no fix was seen)."""
    r = _audee(str(_folder(tmp_path, a=REPRODUCES_SCRIPT, b=UNTESTABLE_SCRIPT)), "--out", str(tmp_path / "out"),
               cwd=tmp_path)
    assert r.returncode == ExitCode.OK, r.stdout + r.stderr
    assert "2 of 2 scripts: 1 reproduce, 0 fixed, 1 not testable here, 0 broken" in r.stdout
    with open(tmp_path / "out" / "recheck.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(row["result"], row["exit"], row["note"]) for row in rows] == [
        ("reproduces", "1", ""), ("not testable here", "2", "")]


def test_an_interrupted_recheck_resumes_and_a_finished_one_runs_again(tmp_path):
    """The rows an interrupted recheck wrote are kept for the scripts unchanged since; the
    others run.  A finished table is no resume point: every script runs again."""
    folder = _folder(tmp_path, a=REPRODUCES_SCRIPT, b=FIXED_SCRIPT, c=FIXED_SCRIPT)
    out = tmp_path / "out"
    assert _audee(str(folder), "--out", str(out), cwd=tmp_path).returncode == ExitCode.NOT_REPRODUCED
    doc = json.loads((out / "recheck.json").read_text())
    assert doc["complete"] is True
    doc["complete"] = False                      # as if stopped after its rows were written
    doc["rows"][0]["line"] = "kept from before"
    doc["rows"][2]["line"] = "kept from before"
    doc["rows"] = doc["rows"][:1] + doc["rows"][2:]   # b had no row yet
    (out / "recheck.json").write_text(json.dumps(doc))
    (folder / "c.py").write_text(REPRODUCES_SCRIPT)  # changed since: runs again
    r = _audee(str(folder), "--out", str(out), cwd=tmp_path)
    assert r.returncode == ExitCode.NOT_REPRODUCED and "1 rows kept from the interrupted recheck" in r.stdout
    lines = [row["line"] for row in json.loads((out / "recheck.json").read_text())["rows"]]
    assert lines == ["kept from before", "NOT REPRODUCED: right now", "REPRODUCED: still wrong"]
    r = _audee(str(folder), "--out", str(out), cwd=tmp_path)
    assert "kept" not in r.stdout
    assert json.loads((out / "recheck.json").read_text())["rows"][0]["line"] == "REPRODUCED: still wrong"


@pytest.mark.slow  # four script runs on TensorFlow; a written script alone: tests/test_repro.py, exits: above
def test_a_run_directorys_repro_scripts_are_found_and_read_by_audees_convention(tmp_path):
    """Two scripts `audee repro` writes (TensorFlow and onnxruntime, each in its own child):
    one still failing (exit 0), one whose model no longer fails (exit 1); recheck finds them in
    repro/, writes its table into the run's recheck/, and reads their exits as audee's."""
    from audee.repro import write_repro
    from tests.test_repro import gelu_record

    run = tmp_path / "run"
    (run / "cases").mkdir(parents=True)
    (run / "results.jsonl").write_text("")
    write_repro(gelu_record(), run / "repro", "gelu")
    write_repro(gelu_record("relu"), run / "repro", "relu")
    assert find_scripts([run]) == [run / "repro" / "gelu.py", run / "repro" / "relu.py"]
    assert default_out([run]) == run / "recheck"
    r = _audee(str(run), "--tries", "2", cwd=tmp_path)
    assert r.returncode == ExitCode.NOT_REPRODUCED, r.stdout + r.stderr
    doc = json.loads((run / "recheck" / "recheck.json").read_text())
    got = {Path(row["script"]).name: (row["result"], row["runs"][0]["exit"], row["note"]) for row in doc["rows"]}
    assert got == {"gelu.py": (REPRODUCES, 0, ""), "relu.py": (FIXED, 1, "not reproduced in 2 runs")}, doc["rows"]


def test_the_scripts_run_in_the_interpreter_named_and_the_table_has_its_versions(tmp_path):
    """The second environment (`make env-prev`: the previous Keras beside the same frameworks):
    the script runs there, and the table's versions are that interpreter's, not audee's."""
    from tests.test_envs import _prev_or_skip

    prev = _prev_or_skip()
    script = ('"""Which Keras."""\nimport importlib.metadata as m, sys\n'
              'print("REPRODUCED on keras", m.version("keras"), sys.executable)\nsys.exit(1)\n')
    folder = _folder(tmp_path, which=script)
    r = _audee(str(folder), "--out", str(tmp_path / "out"), "--python", prev, cwd=tmp_path)
    assert r.returncode == ExitCode.OK, r.stdout + r.stderr
    with open(tmp_path / "out" / "recheck.csv", newline="") as f:
        (row,) = list(csv.DictReader(f))
    import importlib.metadata as md

    assert row["python"] == prev and row["keras"] != md.version("keras")
    assert row["last_line"] == f"REPRODUCED on keras {row['keras']} {prev}"


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    folder = _folder(tmp_path, a=FIXED_SCRIPT)
    cases = [([str(folder)], "--out: "),                                          # a folder has no default
             ([str(folder), "--out", "o", "--python", str(tmp_path / "nopython")], "is not an executable file"),
             ([str(folder), "--out", "o", "--python", str(folder / "a.py")], "--python: "),
             ([str(folder), "--out", "o", "--python", "/bin/true"], "--python: /bin/true is not a working Python"),
             ([str(tmp_path / "missing"), "--out", "o"], "no such folder"),
             ([str(tmp_path), "--out", "o"], "no standalone scripts"),
             ([str(folder), "--out", "o", "--tries", "0"], "--tries: must be at least 1")]
    for args, says in cases:
        r = _audee(*args, cwd=tmp_path)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == ExitCode.BAD_INPUT and len(lines) == 1 and says in lines[0], (args, r.stderr)
    assert not (tmp_path / "o").exists()


# ---- one run judged ---------------------------------------------------------------------------------------
def _run(stdout: str, exit: int | None, stderr: str = "") -> ProcessRun:
    return ProcessRun(exit, stdout, stderr, 1.0, exit is None)


def test_the_printed_line_decides_and_the_exit_code_cross_checks():
    assert judge(_run("x\nREPRODUCED on torch: y\n", 1), FINDINGS, 60).result == REPRODUCES
    fixed = judge(_run("NOT REPRODUCED\n", 0), FINDINGS, 60)
    assert fixed.result == FIXED and fixed.note == ""
    odd = judge(_run("REPRODUCED: z\n", 0), FINDINGS, 60)         # the line wins, the exit disagrees
    assert odd.result == REPRODUCES and "exit 0 where the findings convention gives 1" in odd.note
    assert judge(_run("REPRODUCED: z\n", 0), AUDEE, 60).note == ""  # audee's scripts exit 0 when they reproduce
    late = judge(_run("REPRODUCED: z\n", -11, "Segmentation fault"), AUDEE, 60)
    assert late.result == REPRODUCES and "exit -11" in late.note
    last = judge(_run("NOT REPRODUCED: a\nREPRODUCED: b\n", 1), FINDINGS, 60)  # the last verdict line
    assert last.result == REPRODUCES and last.line == "REPRODUCED: b"
    quiet = judge(_run("all fine, not reproduced\n", 0), FINDINGS, 60)  # lower case, mid-line: no verdict
    assert quiet.result == BROKEN and quiet.line == "all fine, not reproduced"
    env = judge(_run("ENVIRONMENT: torch: cannot import\n", 2), AUDEE, 60)
    assert env.result == BROKEN and env.line == "ENVIRONMENT: torch: cannot import"
    untestable = judge(_run("NOT TESTABLE HERE: no AVX-512\n", 2), FINDINGS, 60)
    assert untestable.result == UNTESTABLE and untestable.note == ""
    assert "exit 0 where the findings convention gives 2" in judge(_run("NOT TESTABLE HERE\n", 0), FINDINGS, 60).note
    late_kill = judge(_run("REPRODUCED\n", None), FINDINGS, 30)
    assert late_kill.result == BROKEN and late_kill.line == "timed out after 30 s"


def test_a_row_reproduces_when_any_backend_does_else_broken_else_fixed():
    def runs(*results: str) -> list:
        lines = {REPRODUCES: ("REPRODUCED", 1), FIXED: ("NOT REPRODUCED", 0), BROKEN: ("Traceback", 1),
                 UNTESTABLE: ("NOT TESTABLE HERE", 2)}
        return [judge(_run(lines[r][0] + "\n", lines[r][1]), FINDINGS, 60, b)
                for b, r in zip(("tensorflow", "torch", "jax"), results)]

    row = combine("s.py", runs(FIXED, REPRODUCES, BROKEN))
    assert row.result == REPRODUCES and row.line == "torch: REPRODUCED" and "jax: broken" in row.note
    assert row.runs_text() == "tensorflow not reproduced, torch reproduced, jax broken"
    assert combine("s.py", runs(FIXED, BROKEN, FIXED)).result == BROKEN
    assert combine("s.py", runs(FIXED, FIXED, FIXED)).result == FIXED
    # the backend with the bug cannot run it here; the others never had it: no fix was seen
    assert combine("s.py", runs(FIXED, UNTESTABLE, FIXED)).result == UNTESTABLE
    assert combine("s.py", runs(UNTESTABLE, REPRODUCES, FIXED)).result == REPRODUCES


def test_a_timed_out_script_leaves_no_process_behind(tmp_path):
    """The script's child (its own process, as a repro script's per-backend children are)
    outlives neither the timeout nor the script."""
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "hangs.py"
    script.write_text("import os, subprocess, sys, time\n"
                      "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      f"open({str(pid_file)!r} + '.tmp', 'w').write(str(p.pid))\n"
                      f"os.replace({str(pid_file)!r} + '.tmp', {str(pid_file)!r})\n"
                      "time.sleep(600)\n")
    for timeout in (5, 20, 80, 320):  # long enough for the child to start, on however busy a machine
        run = run_alone([sys.executable, str(script)], timeout=timeout)
        assert run.timed_out and run.exit is None
        if pid_file.exists():
            break
    pid = int(pid_file.read_text())
    for _ in range(600):  # SIGKILL is delivered on its own time: a minute at most, not a timing bound
        if not _alive(pid):
            break
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs: gone, or a zombie its new parent has not reaped yet, is dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_the_interpreters_versions_are_its_distributions():
    import importlib.metadata as md

    version, versions = interpreter(sys.executable)
    assert version == sys.version.split()[0]
    assert versions["keras"] == md.version("keras") and versions["numpy"] == md.version("numpy")
    assert "tensorflow" in versions   # installed here as tensorflow-cpu: found by its module's distribution
    with pytest.raises(AudeeError, match="--python"):
        interpreter("/bin/false")


# ---- the scripts' conventions -------------------------------------------------------------------------
def test_audees_scripts_carry_the_mark_recheck_reads():
    assert SCAFFOLD_MARK in _SCAFFOLD
    assert convention_of(_SCAFFOLD) is AUDEE and convention_of(FIXED_SCRIPT) is FINDINGS


def test_the_documented_runs_of_a_script():
    loop = '"""X.\n\n    for b in tensorflow torch jax; do KERAS_BACKEND=$b python x.py; done\n"""\n'
    lines = '"""X.\n\n    KERAS_BACKEND=torch python x.py   -> wrong\n    KERAS_BACKEND=jax   python x.py\n"""\n'
    assert documented_backends(loop) == ["tensorflow", "torch", "jax"]
    assert documented_backends(lines) == ["torch", "jax"]
    plain = '"""Plain.\n\n    python x.py\n"""\nimport os\nos.environ["KERAS_BACKEND"] = "jax"\n'
    assert documented_backends(plain) == []
    assert documented_backends("# KERAS_BACKEND=torch python x.py, a comment, not the docstring\n") == []


def _findings() -> list[Path]:
    return find_scripts([FINDINGS_DIR])  # what `audee recheck findings/` runs


@pytest.mark.parametrize("script", _findings(), ids=lambda p: p.name)
def test_every_findings_script_prints_both_verdict_lines(script):
    """Each findings/ script decides: it prints REPRODUCED (exit 1) or NOT REPRODUCED (exit 0),
    in capitals at the start of the line, so `audee recheck findings/` reads every one; one
    that checks whichever Keras backend it runs under says in its docstring which to run it
    under (recheck runs it once per backend named; else once, under Keras' default)."""
    text = script.read_text()
    assert re.search(r'print\(f?"REPRODUCED\b', text) or re.search(r'f?"REPRODUCED\b[^"]*"\s+if\b', text), script
    assert re.search(r'f?"NOT REPRODUCED\b', text), script
    assert re.search(r"sys\.exit\(1\)|sys\.exit\(1 if |return 1\b", text), script
    if "NOT TESTABLE HERE" in text:  # a third verdict, with an exit code of its own (neither 0 nor 1)
        assert re.search(r'print\(f?"NOT TESTABLE HERE: ', text) and "sys.exit(2)" in text, script
    ast.parse(text)
    sets_backend = re.search(r"os\.environ(\[\"KERAS_BACKEND\"\]\s*=|\.setdefault\(\"KERAS_BACKEND\"|"
                             r"\.update\(KERAS_BACKEND=)|dict\(os\.environ,\s*KERAS_BACKEND=", text)  # its children's
    if "keras.backend.backend()" in text and not sets_backend:
        assert documented_backends(text), f"{script.name}: which Keras backends to run it under?"


FLAKY_SCRIPT = '''"""Shows in some processes only: the third run reproduces."""
import pathlib, sys
runs = pathlib.Path(__file__).with_suffix(".runs")
n = len(runs.read_text()) + 1 if runs.exists() else 1
runs.write_text("x" * n)
print("REPRODUCED: wrong this time" if n == 3 else "NOT REPRODUCED: right this time")
sys.exit(1 if n == 3 else 0)
'''


def test_a_script_that_reproduces_in_some_processes_only_is_not_fixed(tmp_path):
    """A converter's path can differ from process to process (findings row 98): a run that
    printed NOT REPRODUCED runs again, and the row reproduces if a later run does, saying so;
    one that never does is fixed after every try, also said."""
    from audee.repro.recheck import TRIES, recheck_script

    folder = _folder(tmp_path, flaky=FLAKY_SCRIPT, gone=FIXED_SCRIPT, there=REPRODUCES_SCRIPT)
    flaky = recheck_script(folder / "flaky.py", sys.executable)
    assert TRIES == 3 and flaky.result == REPRODUCES and "run 3 of 3" in flaky.note, flaky
    assert (folder / "flaky.runs").read_text() == "xxx"
    gone = recheck_script(folder / "gone.py", sys.executable)
    assert gone.result == FIXED and "not reproduced in 3 runs" in gone.note
    there = recheck_script(folder / "there.py", sys.executable)
    assert there.result == REPRODUCES and there.note == ""
    assert recheck_script(folder / "gone.py", sys.executable, tries=1).note == ""
