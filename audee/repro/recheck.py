"""``audee recheck``: every standalone script of a folder run again, in a given Python, each alone.

The question it answers is a release's: which of the bugs we found are still there?  A
folder's scripts (a run directory's ``repro/``, or a folder such as ``findings/``) run one
at a time, each in a fresh process of the interpreter named (``--python``; the current one by
default) in a scratch working directory, its process group killed at the timeout.  Each
script gets one row:

* ``reproduces`` -- it printed a line starting ``REPRODUCED``;
* ``fixed`` -- it ran and printed a line starting ``NOT REPRODUCED``, in each of :data:`TRIES`
  runs (a bug that shows in some processes only is not fixed by one run that missed it);
* ``not testable here`` -- it printed a line starting ``NOT TESTABLE HERE``: this machine lacks
  what the bug needs (a kernel for an instruction set the CPU does not have), so its absence
  says nothing of a fix;
* ``broken`` -- it errored, timed out, or printed neither line (an audee script's
  ``ENVIRONMENT:`` or ``BAD DATA:`` line is one of these: no verdict).

The printed line decides (its last such line, in capitals at the start of a line); the exit
code only cross-checks it, and a row says where the two disagree.  Two exit conventions
exist: audee's scripts exit 0 when they reproduce and 1 when not (:mod:`audee.repro.scaffold`,
known by :data:`~audee.repro.scaffold.SCAFFOLD_MARK`); any other script is held to the
``findings/`` convention, 1 when it reproduces and 0 when not.

A folder's ``make_*.py`` and ``_*.py`` files are helpers, not scripts (:data:`NOT_SCRIPTS`).
A ``findings/`` script checks the one Keras backend it runs under, and its docstring says
which to run it under (``for b in tensorflow torch jax; do KERAS_BACKEND=$b python X.py;
done``, or ``KERAS_BACKEND=torch python X.py`` lines): such a script runs once per backend
named, and its row reproduces when any run does (a bug of one backend shows only there),
else is broken when any run is, else fixed; the row lists each run's result.  A script whose
docstring names no backend runs once, with ``KERAS_BACKEND`` unset (it sets its own or needs
none).

The table is rewritten after every script; an interrupted recheck is resumed by the same
command (the rows of scripts unchanged since are kept, for the same interpreter and
versions), a finished one runs every script again.

The versions in each row are the interpreter's own (its installed distributions, read once
without importing them): every script and every child a script starts runs on it.
"""
from __future__ import annotations

import ast
import fnmatch
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Sequence

from audee.backends.info import all_version_keys
from audee.backends.registry import check_python
from audee.core.bounded import MAX_TEXT_BYTES, clean_text, read_bytes
from audee.core.errors import AudeeError
from audee.core.exitcodes import ExitCode
from audee.core.markdown import table
from audee.repro.scaffold import EXIT_NOT_REPRODUCED, EXIT_REPRODUCED, SCAFFOLD_MARK
from audee.store.atomic import write_atomic
from audee.store.lock import dir_lock
from audee.store.runstore import RunStore
from audee.triage import BROKEN, FIXED, RECHECK_RESULTS, REPRODUCES, UNTESTABLE

log = logging.getLogger(__name__)


#: a verdict line: what a script prints first on the line, in capitals
_VERDICT = re.compile(r"(NOT TESTABLE HERE|NOT REPRODUCED|REPRODUCED)\b")
_RESULT_OF = {"REPRODUCED": REPRODUCES, "NOT REPRODUCED": FIXED, "NOT TESTABLE HERE": UNTESTABLE}
#: a docstring's documented runs: a loop over Keras backends, or one command per backend
_LOOP = re.compile(r"for\s+(\w+)\s+in\s+([\w\- ]+?)\s*;\s*do\s+KERAS_BACKEND=\$\{?(\w+)\}?\s")
_ONE = re.compile(r"^\s*KERAS_BACKEND=([\w-]+)\s+python3?\s", re.M)

#: a folder's files that are no repro script: the generators audee keeps beside their data
#: (``findings/make_readme.py``, ``seeds/make_seeds.py``) and private modules
NOT_SCRIPTS = ("make_*.py", "_*.py")
TIMEOUT_S = 600.0        # one run of one script
#: runs of a script that printed NOT REPRODUCED before it counts as fixed: a converter's or a
#: kernel's path can differ from process to process (tf2onnx's transpose optimizer pushes a
#: Transpose one way or another, findings row 98), and one run that missed it is no fix
TRIES = 3
TAIL_CHARS = 4000        # of a run's stdout and stderr kept in recheck.json
_READ_BYTES = 1 << 20    # of a run's captured output read back (the tail)
#: the variables a script must not inherit from the audee that runs it: its own tree, its backend
_DROPPED_ENV = ("PYTHONPATH", "KERAS_BACKEND")
#: distributions whose versions the table carries beside the backends' packages
_EXTRA_VERSIONS = ("numpy",)


@dataclass(frozen=True)
class Convention:
    """Which exit code a script gives with which verdict line."""

    name: str
    reproduced: int
    not_reproduced: int
    untestable: int = 2  # neither 0 nor 1: a caller reading the exit code alone must not take it for either

    def expected(self, line: str) -> int:
        if line.startswith("NOT TESTABLE HERE"):
            return self.untestable
        return self.reproduced if line.startswith("REPRODUCED") else self.not_reproduced


AUDEE = Convention("audee", EXIT_REPRODUCED, EXIT_NOT_REPRODUCED)
FINDINGS = Convention("findings", 1, 0)


def convention_of(text: str) -> Convention:
    """audee's own scripts (the scaffold's mark) exit 0 when they reproduce; any other 1."""
    return AUDEE if SCAFFOLD_MARK in text else FINDINGS


# ---- one script alone in a fresh process ----------------------------------------------------------
@dataclass
class ProcessRun:
    """How one process ended: its exit code (None when killed at the timeout), its output."""

    exit: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


_live: set[subprocess.Popen] = set()  # running scripts: killed with their children on an interrupt
_live_lock = threading.Lock()


def _kill_group(p: subprocess.Popen) -> None:
    """The script and every process it started (its own session): a script's children must
    not outlive it, nor hold the machine once it timed out."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(f: IO[bytes]) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - _READ_BYTES))
    return clean_text(f.read(), None)


def run_alone(cmd: Sequence[str], *, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S,
              cwd: str | Path | None = None) -> ProcessRun:
    """``cmd`` in its own session, in a scratch working directory unless ``cwd`` is given,
    output captured in files (a child that outlives it cannot hold a pipe open); at the
    timeout the whole process group is killed.  Whatever ends the wait (an interrupt
    included), no process of the group is left running."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="audee-script-") as scratch, \
            tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen(list(cmd), cwd=str(cwd or scratch), env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=err, start_new_session=True)
        with _live_lock:
            _live.add(p)
        timed_out = False
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(p)
            p.wait()
            with _live_lock:
                _live.discard(p)
        return ProcessRun(None if timed_out else p.returncode, _tail(out), _tail(err),
                          round(time.monotonic() - start, 2), timed_out)


def kill_running() -> None:
    """Every script still running, with its children (an interrupted recheck)."""
    with _live_lock:
        for p in list(_live):
            _kill_group(p)


# ---- which scripts, run how ------------------------------------------------------------------------
def find_scripts(paths: Iterable[str | Path]) -> list[Path]:
    """The standalone scripts of each path: a run directory's ``repro/*.py``, a folder's own
    ``*.py`` files (not its subfolders', nor the helpers :data:`NOT_SCRIPTS` names), or a
    script named itself; sorted, each once.  A path that is none of these, or names no
    script, is a one-line error."""
    found: list[Path] = []
    for given in paths:
        p = Path(given)
        store = RunStore(p)
        if p.is_file() and p.suffix == ".py":
            found.append(p)
            continue
        if not p.is_dir():
            raise AudeeError("no such folder or .py script", source=str(p))
        folder = store.repro_dir if store.has_results() else p
        scripts = sorted(f for f in folder.glob("*.py")
                         if f.is_file() and not any(fnmatch.fnmatch(f.name, n) for n in NOT_SCRIPTS))
        if not scripts:
            where = "its repro/ folder" if folder != p else "it"
            raise AudeeError(f"no standalone scripts (*.py) in {where}", source=str(p))
        found += scripts
    return list(dict.fromkeys(found))


def documented_backends(text: str) -> list[str]:
    """The Keras backends a script's docstring says to run it under (empty: run it as it is)."""
    try:
        doc = ast.get_docstring(ast.parse(text)) or ""
    except (SyntaxError, ValueError):  # the script will say what is wrong with it when it runs
        doc = ""
    names: list[str] = []
    for m in _LOOP.finditer(doc):
        if m.group(3) == m.group(1):
            names += m.group(2).split()
    names += _ONE.findall(doc)
    return list(dict.fromkeys(names))


def interpreter(python: str) -> tuple[str, dict[str, str]]:
    """The Python version of ``python`` and its installed frameworks' versions, read from its
    distributions' metadata (nothing imported); an interpreter that cannot say is a one-line
    error naming ``--python``."""
    keys = [*all_version_keys(), *_EXTRA_VERSIONS]
    # a package by its own name, else by the distribution that provides its module (tensorflow-cpu)
    code = ("import json, sys, importlib.metadata as m\n"
            "dists = getattr(m, 'packages_distributions', dict)()\n"
            "v = {}\n"
            f"for k in {keys!r}:\n"
            "    for d in [k, *dists.get(k.replace('-', '_'), [])]:\n"
            "        try:\n            v[k] = m.version(d)\n            break\n"
            "        except m.PackageNotFoundError:\n            pass\n"
            "print(json.dumps({'python': sys.version.split()[0], 'versions': v}))\n")
    try:
        r = run_alone([python, "-c", code], env=script_env({}), timeout=120)
    except OSError as exc:
        raise AudeeError(f"cannot run {python}: {exc.strerror or exc}", field="--python") from None
    try:
        doc = json.loads(r.stdout.strip().splitlines()[-1])
        return str(doc["python"]), {str(k): str(v) for k, v in doc["versions"].items()}
    except (IndexError, ValueError, KeyError, TypeError, AttributeError):
        why = "timed out" if r.timed_out else (r.stderr.strip().splitlines() or [f"exit {r.exit}"])[-1]
        raise AudeeError(f"{python} is not a working Python interpreter: {why}", field="--python") from None


def executable(python: str | None) -> str:
    """The interpreter to run: ``python`` as an environment's interpreter is checked
    (:func:`audee.backends.registry.check_python`: an executable file, made absolute), this
    one when None; any other is a one-line error naming ``--python``."""
    if python is None:
        return sys.executable
    try:
        return check_python(python, "recheck")
    except ValueError as exc:
        raise AudeeError(str(exc), field="--python") from None


def script_env(extra: dict[str, str]) -> dict[str, str]:
    """This process's environment without audee's own tree and backend, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(extra)
    return env


# ---- one script: its runs, judged -------------------------------------------------------------------
@dataclass
class RunResult:
    """One run of a script (under one Keras backend, or as it is)."""

    backend: str | None
    result: str
    exit: int | None
    seconds: float
    line: str               # the verdict line, else the line that says what went wrong
    note: str = ""          # the exit code against the printed line, where they disagree
    stdout: str = ""
    stderr: str = ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def judge(run: ProcessRun, convention: Convention, timeout: float, backend: str | None = None) -> RunResult:
    """A run's result: the printed verdict line first, the exit code cross-checking it."""
    base = {"backend": backend, "exit": run.exit, "seconds": run.seconds,
            "stdout": run.stdout[-TAIL_CHARS:], "stderr": run.stderr[-TAIL_CHARS:]}
    if run.timed_out:
        return RunResult(result=BROKEN, line=f"timed out after {timeout:g} s", **base)
    said = [ln for ln in (raw.strip() for raw in run.stdout.splitlines()) if _VERDICT.match(ln)]
    if not said:
        why = f"printed neither REPRODUCED nor NOT REPRODUCED (exit {run.exit})"
        error = _last_line(run.stderr) if run.exit else ""
        return RunResult(result=BROKEN, line=error or _last_line(run.stdout) or why, note=why, **base)
    line = said[-1]
    verdict = _VERDICT.match(line).group(1)  # type: ignore[union-attr]
    want = convention.expected(line)
    note = "" if run.exit == want else (
        f"exit {run.exit} where the {convention.name} convention gives {want} after {verdict}")
    return RunResult(result=_RESULT_OF[verdict], line=line, note=note, **base)


@dataclass
class ScriptResult:
    """One table row: a script, its result over its runs, and each run."""

    script: str
    result: str
    line: str
    note: str
    seconds: float
    sha256: str = ""        # of the script's text: a resumed recheck keeps a row only for the same script
    runs: list[RunResult] = field(default_factory=list)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "ScriptResult":
        return cls(**{**doc, "runs": [RunResult(**run) for run in doc.get("runs", [])]})

    def runs_text(self) -> str:
        """Each backend's run by what it printed (a backend without the bug never had it to fix)."""
        said = {REPRODUCES: "reproduced", FIXED: "not reproduced", UNTESTABLE: "not testable here", BROKEN: "broken"}
        return ", ".join(f"{r.backend} {said[r.result]}" for r in self.runs if r.backend) or "one run"

    def exits(self) -> str:
        return ", ".join("timeout" if r.exit is None else str(r.exit) for r in self.runs)


def combine(script: str, runs: list[RunResult], sha256: str = "") -> ScriptResult:
    """A script's row: it reproduces when any run does (a bug of one backend shows only
    there), else it is broken when any run is, else not testable here when any run is (the
    others, backends without the bug, never had it to fix), else fixed; a run that disagrees
    with the row is noted."""
    result = next((r for r in (REPRODUCES, BROKEN, UNTESTABLE, FIXED) if any(run.result == r for run in runs)),
                  BROKEN)
    deciding = next(run for run in runs if run.result == result)
    notes = [f"{run.backend}: {run.note}" if run.backend else run.note for run in runs if run.note]
    if result == REPRODUCES:
        notes += [f"{run.backend}: broken: {run.line}" for run in runs if run.result == BROKEN]
    line = f"{deciding.backend}: {deciding.line}" if len(runs) > 1 else deciding.line
    return ScriptResult(script, result, line, "; ".join(notes), round(sum(r.seconds for r in runs), 2), sha256, runs)


def recheck_script(script: Path, python: str, timeout: float = TIMEOUT_S, tries: int = TRIES) -> ScriptResult:
    """Every documented run of one script, each alone, judged and combined into its row; a run
    that printed NOT REPRODUCED is run again, up to ``tries`` times in all, and reproduces if
    any of them did (noted, with how many)."""
    raw = read_bytes(script, MAX_TEXT_BYTES)
    text = clean_text(raw, None)
    convention = convention_of(text)
    runs = []
    for backend in documented_backends(text) or [None]:
        env = script_env({"KERAS_BACKEND": backend} if backend else {})
        runs.append(_until_reproduced([python, str(script.resolve())], env, convention, timeout, backend, tries))
    return combine(str(script), runs, hashlib.sha256(raw).hexdigest())


def _until_reproduced(argv: list[str], env: dict[str, str], convention: Convention, timeout: float,
                      backend: str | None, tries: int) -> RunResult:
    """One documented run, again while it prints NOT REPRODUCED (``tries`` in all): the first
    that reproduces, else the last; a result reached after a miss says how many runs it took."""
    seconds, done = 0.0, 0
    while True:
        try:
            run = judge(run_alone(argv, env=env, timeout=timeout), convention, timeout, backend)
        except OSError as exc:  # the interpreter went away (or cannot start) since it was asked its versions
            return RunResult(backend, BROKEN, None, seconds, f"cannot run {argv[0]}: {exc.strerror or exc}")
        seconds, done = seconds + run.seconds, done + 1
        if run.result != FIXED or done >= max(1, tries):
            break
    if done > 1:
        said = (f"reproduced in run {done} of {done}: the bug shows in some processes only"
                if run.result == REPRODUCES else f"not reproduced in {done} runs")
        run = replace(run, seconds=seconds, note="; ".join(n for n in (run.note, said) if n))
    return run


# ---- the whole folder, and its table ------------------------------------------------------------------
@dataclass
class Recheck:
    """A recheck: the interpreter, its versions, every script's row so far."""

    python: str
    python_version: str
    versions: dict[str, str]
    scripts: list[str]
    rows: list[ScriptResult] = field(default_factory=list)
    seconds: float = 0.0
    complete: bool = False  # every script has its row (an interrupted recheck's table is not)
    kept: int = 0           # rows kept from the interrupted recheck this one resumed

    def counts(self) -> dict[str, int]:
        return {r: sum(1 for row in self.rows if row.result == r) for r in RECHECK_RESULTS}

    def exit_code(self) -> ExitCode:
        """Broken first (a script to look at), then fixed (a bug gone), else every one that could
        be tested here reproduces."""
        counts = self.counts()
        if counts[BROKEN]:
            return ExitCode.SCRIPTS_BROKEN
        return ExitCode.NOT_REPRODUCED if counts[FIXED] else ExitCode.OK

    def summary(self) -> str:
        c = self.counts()
        return (f"{len(self.rows)} of {len(self.scripts)} scripts: {c[REPRODUCES]} reproduce, {c[FIXED]} fixed, "
                + (f"{c[UNTESTABLE]} not testable here, " if c[UNTESTABLE] else "")
                + f"{c[BROKEN]} broken ({self.seconds:.0f} s)")

    def records(self) -> list[dict[str, Any]]:
        """One flat record per row (the CSV's): script, result, runs, exit codes, seconds,
        last line, note, the interpreter and each framework's version."""
        return [{"script": r.script, "result": r.result, "runs": r.runs_text(), "exit": r.exits(),
                 "seconds": r.seconds, "last_line": r.line, "note": r.note, "python": self.python,
                 **self.versions} for r in self.rows]

    def markdown(self) -> str:
        versions = ", ".join(f"{k} {v}" for k, v in self.versions.items())
        head = ["# audee recheck", "", f"Interpreter: `{self.python}` (Python {self.python_version}); {versions}.",
                "", self.summary() + ".", ""]
        rows = [(r.script, r.result, r.runs_text(), r.exits(), f"{r.seconds:.1f}", r.line, r.note)
                for r in self.rows]
        columns = ["script", "result", "runs", "exit", "seconds", "last line", "note"]
        return "\n".join(head) + "\n" + table(columns, rows)

    def to_json(self) -> dict[str, Any]:
        return {"python": self.python, "python_version": self.python_version, "versions": self.versions,
                "counts": self.counts(), "scripts": len(self.scripts), "seconds": self.seconds,
                "complete": self.complete,
                "rows": [{**asdict(r), "runs": [asdict(run) for run in r.runs]} for r in self.rows]}

    def write(self, out: Path) -> list[Path]:
        """``recheck.md``, ``recheck.csv`` and ``recheck.json`` in ``out``, each whole or not at all."""
        import pandas as pd

        files = [out / "recheck.md", out / "recheck.csv", out / "recheck.json"]
        write_atomic(files[0], self.markdown().encode())
        write_atomic(files[1], pd.DataFrame(self.records(), columns=self._columns()).to_csv(index=False).encode())
        write_atomic(files[2], (json.dumps(self.to_json(), indent=1) + "\n").encode())
        return files

    def resume(self, out: Path) -> list[str]:
        """Take the rows of the interrupted recheck in ``out`` (same interpreter and versions,
        unfinished) whose script is here unchanged; the scripts left to run."""
        path = out / "recheck.json"
        try:
            doc = json.loads(read_bytes(path, MAX_TEXT_BYTES)) if path.is_file() else None
            old = [ScriptResult.from_json(r) for r in doc["rows"]] if isinstance(doc, dict) else []
        except (AudeeError, ValueError, KeyError, TypeError) as exc:
            log.warning("%s: not resumed (%s): every script runs again", path, exc)
            return list(self.scripts)
        if not old or doc.get("complete", True) or (doc.get("python"), doc.get("versions")) != (
                self.python, self.versions):
            return list(self.scripts)
        kept = {r.script: r for r in old if r.script in self.scripts and r.sha256 and r.sha256 == _sha256(r.script)}
        self.rows = [kept[s] for s in self.scripts if s in kept]
        self.seconds = float(doc.get("seconds") or 0.0)
        self.kept = len(self.rows)
        return [s for s in self.scripts if s not in kept]

    def _columns(self) -> list[str]:
        return ["script", "result", "runs", "exit", "seconds", "last_line", "note", "python", *self.versions]


def _sha256(script: str) -> str:
    try:
        return hashlib.sha256(read_bytes(script, MAX_TEXT_BYTES)).hexdigest()
    except AudeeError:
        return ""


def default_out(paths: Sequence[str | Path]) -> Path | None:
    """Where a recheck of one run directory writes by default (its ``recheck/``); None for
    any other folder (the caller names one)."""
    if len(paths) == 1:
        store = RunStore(paths[0])
        if Path(paths[0]).is_dir() and store.has_results():
            return store.recheck_dir
    return None


def recheck(paths: Sequence[str | Path], out: Path, *, python: str | None = None, timeout: float = TIMEOUT_S,
            jobs: int = 1, tries: int = TRIES,
            progress: Callable[[ScriptResult, Recheck], None] | None = None) -> Recheck:
    """Run every script of ``paths`` in ``python`` (default: this interpreter), ``jobs`` at
    a time, each alone; the table in ``out`` is rewritten after each script, so an
    interrupted recheck keeps the rows it has, and the same command resumes it (the scripts
    without a row run; a finished recheck runs them all again)."""
    if not timeout > 0:
        raise AudeeError(f"must be a positive number of seconds, not {timeout}", field="--timeout")
    if jobs < 1:
        raise AudeeError(f"must be at least 1, not {jobs}", field="--jobs")
    if tries < 1:
        raise AudeeError(f"must be at least 1, not {tries}", field="--tries")
    scripts = find_scripts(paths)
    exe = executable(python)
    version, versions = interpreter(exe)
    report = Recheck(exe, version, versions, [str(s) for s in scripts])
    with dir_lock(out):  # one recheck writes a table at a time
        return _run(report, scripts, out, exe, timeout, jobs, tries, progress)


def _run(report: Recheck, scripts: list[Path], out: Path, exe: str, timeout: float, jobs: int, tries: int,
         progress: Callable[[ScriptResult, Recheck], None] | None) -> Recheck:
    left = set(report.resume(out))
    start, before = time.monotonic(), report.seconds
    order = {str(s): i for i, s in enumerate(scripts)}

    def done(row: ScriptResult) -> None:
        report.rows.append(row)
        report.rows.sort(key=lambda r: order[r.script])
        report.seconds = round(before + time.monotonic() - start, 1)
        report.write(out)
        if progress is not None:
            progress(row, report)

    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="recheck")
    try:
        pending: set[Future] = {pool.submit(recheck_script, s, exe, timeout, tries) for s in scripts if str(s) in left}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                done(f.result())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        kill_running()
    report.seconds = round(before + time.monotonic() - start, 1)
    report.complete = True
    report.write(out)
    return report
