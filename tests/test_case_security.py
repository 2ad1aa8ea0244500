"""A case file is data: it cannot choose code to run, blow up the loader, or crash numpy.

Most checks need no framework; one test starts a real TensorFlow worker (a tiny CNN) and
one a JAX-backed plugin, both from a directory holding modules that would shadow others.
"""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.backends.pool import worker_pythonpath
from audee.backends.registry import BUILTIN
from audee.cases.case import TestCase, Verdict
from audee.core.errors import CaseFileError
from audee.engine.execute import Result
from audee.settings import TIE_MARGIN
from audee.store import CaseRecord, load_case
from audee.cases.weights import init_weights
from tests.helpers import tiny_cnn, tiny_inputs

ROOT = Path(__file__).resolve().parent.parent
_SCRIPT = Path(sys.executable).parent / "audee"
AUDEE = [str(_SCRIPT)] if _SCRIPT.is_file() else [sys.executable, "-m", "audee"]
EVIL = "evilmod:Evil"
TF = BUILTIN["tensorflow"]


def _record(backends: list[dict], **fields) -> dict:
    weights = init_weights({"conv": [("kernel", (3, 3, 1, 4)), ("bias", (4,))],
                            "logits": [("kernel", (100, 5)), ("bias", (5,))]}, seed=0)
    return {"format": "audee.case/2", "created": "", "id": "sec-1", "spec": tiny_cnn().to_json(),
            "weights": weights, "inputs": tiny_inputs(2), "backends": backends, "verdict": {"findings": []},
            "versions": {}, **fields}


def _write(path: Path, record: dict) -> Path:
    path.write_bytes(pickle.dumps(record, protocol=4))  # raw: also records audee itself would not write
    return path


@pytest.fixture
def evil_dir(tmp_path):
    """A directory with modules that leave a marker file when imported."""
    mark = tmp_path / "MARKER"
    code = f"open({str(mark)!r}, 'w').write('imported')\nclass Evil: pass\n"
    (tmp_path / "evilmod.py").write_text(code)
    return tmp_path


def _audee(cwd: Path, *args: str, timeout: float = 300, pythonpath: str | None = None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([*AUDEE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _error(r: subprocess.CompletedProcess) -> str:
    """The one error line (warnings from the log may precede it; a traceback may not)."""
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("audee: error:")]
    assert len(lines) == 1, r.stderr
    return lines[0]


# ---- a case file cannot choose code -----------------------------------------------------------
@pytest.mark.parametrize("command", ["reproduce", "localize"])
def test_a_case_naming_a_plugin_is_refused_and_nothing_is_imported(evil_dir, command):
    _write(evil_dir / "case.pkl", _record([{"label": EVIL, "target": EVIL, "device": "cpu"}]))
    r = _audee(evil_dir, command, "case.pkl")
    assert r.returncode == 2, r.stdout + r.stderr
    line = _error(r)
    assert "case.pkl: backends[0].target:" in line and f"--allow-plugin {EVIL}" in line
    assert not (evil_dir / "MARKER").exists()


def test_a_builtin_label_with_a_foreign_target_is_refused_even_when_allowed(evil_dir):
    _write(evil_dir / "case.pkl", _record([{"label": "torch", "target": EVIL, "device": "cpu"}]))
    for command in ("reproduce", "localize"):
        r = _audee(evil_dir, command, "case.pkl", "--allow-plugin", EVIL)
        assert r.returncode == 2, r.stderr
        assert "backends[0].target: built-in backend 'torch' must have target" in _error(r)
    assert not (evil_dir / "MARKER").exists()
    with pytest.raises(CaseFileError, match=r"backends\[0\]\.target"):
        load_case(evil_dir / "case.pkl")


def test_an_allowed_plugin_gets_past_the_check_and_a_missing_backend_is_exit_4(evil_dir):
    missing = "tests.plugins:Missing"
    _write(evil_dir / "case.pkl", _record([{"label": missing, "target": missing, "device": "cpu"}]))
    for command in ("reproduce", "localize"):
        r = _audee(evil_dir, command, "case.pkl", "--allow-plugin", missing, pythonpath=str(ROOT))
        assert r.returncode == 4, r.stdout + r.stderr
        line = _error(r)
        assert "failed to start" in line and "Missing" in line
    r = _audee(evil_dir, "reproduce", "case.pkl", "--backends", "nosuchmodule_xyz:Backend")
    assert r.returncode == 4 and "nosuchmodule_xyz" in _error(r), r.stderr
    assert not (evil_dir / "MARKER").exists()


def test_an_allowed_harmless_plugin_runs(evil_dir):
    raising = "tests.plugins:RaisingBackend"  # JAX underneath; rejects every batch (a consistent rejection)
    _write(evil_dir / "case.pkl", _record([{"label": raising, "target": raising, "device": "cpu"}]))
    r = _audee(evil_dir, "reproduce", "case.pkl", "--allow-plugin", raising, pythonpath=str(ROOT))
    assert r.returncode == 0 and "verdict holds" in r.stdout, r.stdout + r.stderr
    assert not (evil_dir / "MARKER").exists()


def test_builtin_workers_do_not_import_from_the_current_directory(evil_dir):
    """One real TensorFlow run, started where a numpy.py would shadow numpy."""
    (evil_dir / "numpy.py").write_text((evil_dir / "evilmod.py").read_text())
    _write(evil_dir / "case.pkl", _record([{"label": "tensorflow", "target": TF, "device": "cpu"}]))
    r = _audee(evil_dir, "reproduce", "case.pkl", "--json")
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert not (evil_dir / "MARKER").exists()


def test_worker_pythonpath_adds_the_cwd_only_for_plugins_and_last(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert str(tmp_path) not in worker_pythonpath(TF, "/x").split(os.pathsep)
    parts = worker_pythonpath("tests.plugins:RaisingBackend", "/x").split(os.pathsep)
    assert parts[0] == "/x" and parts[-1] == str(tmp_path)
    assert "" not in worker_pythonpath(TF, ":/x:").split(os.pathsep)  # an empty entry would mean the cwd


# ---- the loader is bounded --------------------------------------------------------------------
def _laughs(levels: int = 9, width: int = 10) -> list:
    x: list = ["lol"] * width
    for _ in range(levels):
        x = [x] * width  # the same list, referenced `width` times
    return x


def test_a_billion_laughs_pickle_is_refused_fast(tmp_path):
    path = _write(tmp_path / "laughs.pkl", _record([], payload=_laughs()))
    assert path.stat().st_size < 10_000
    with pytest.raises(CaseFileError, match="too many elements") as err:  # counted, never built
        load_case(path)
    assert str(path) in str(err.value)


def test_a_tuple_hash_bomb_is_refused_before_loading(tmp_path):
    t: tuple = ("x",)
    for _ in range(80):
        t = (t, t)  # hashing it (as a dict key) would take 2**80 steps
    body = pickle.dumps(t, protocol=2)[2:-1]
    path = tmp_path / "hash.pkl"
    path.write_bytes(b"\x80\x02}" + body + b"\x88s.")  # {t: True}
    with pytest.raises(CaseFileError, match="too many elements"):  # refused by the count, never hashed
        load_case(path)


def test_deep_nesting_and_cycles_are_refused(tmp_path):
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(CaseFileError, match="nested deeper than 64"):
        load_case(_write(tmp_path / "deep.pkl", _record([], payload=deep)))
    loop: list = [1]
    loop.append(loop)
    with pytest.raises(CaseFileError, match="cycle"):
        load_case(_write(tmp_path / "loop.pkl", _record([], payload=loop)))


def test_oversized_files_are_refused_unread(tmp_path, monkeypatch):
    import audee.store.casefile as cf

    path = _write(tmp_path / "big.pkl", _record([]))
    monkeypatch.setattr(cf, "MAX_FILE_BYTES", 100)
    with pytest.raises(CaseFileError, match="larger than the 100 bytes audee reads"):
        load_case(path)


@pytest.mark.parametrize("where", ["inputs", "weights", "outputs", "meta"])
@pytest.mark.parametrize("array", [
    np.zeros(2, dtype=[("a", "f4"), ("b", "i4")]),
    np.array([1, "a"], dtype=object),
    np.array(["text"]),
    np.array([b"raw"], dtype="V3"),
    np.array(["2020-01-01"], dtype="datetime64[D]"),
    np.zeros(1, dtype=[("a", "f4")])[0],          # a structured numpy scalar
], ids=["structured", "object", "str", "void", "datetime", "void-scalar"])
def test_only_plain_numeric_dtypes_load(tmp_path, where, array):
    rec = _record([])
    if where == "inputs":
        rec["inputs"] = {"image": array}
    elif where == "weights":
        rec["weights"] = {**rec["weights"], "conv": [array]}
    elif where == "outputs":
        rec["outputs"] = {"tensorflow": {"logits": array, "output": None}}
    else:
        rec["extra"] = {"deep": [array]}
    with pytest.raises(CaseFileError, match="dtype") as err:
        load_case(_write(tmp_path / "dt.pkl", rec))
    assert "\n" not in str(err.value)


def test_a_complex_output_is_plain_numeric_data_and_round_trips(tmp_path):
    """keras.ops.polar (and the fft ops) return complex64: the compilers campaign's op-polar
    case could not be saved ("not a plain bool/int/uint/float dtype") and stopped its unit.
    A complex array is numbers like a float one; it loads."""
    from audee.store.casefile import encode

    rec = _record([])
    z = np.array([1 + 2j, np.nan + 0j], np.complex64)
    rec["outputs"] = {"tensorflow": {"logits": z, "output": None}}
    path = tmp_path / "c.pkl"
    path.write_bytes(encode(rec))
    got = load_case(path)["outputs"]["tensorflow"]["logits"]
    assert got.dtype == np.complex64 and np.array_equal(got, z, equal_nan=True)


def test_other_callables_and_opcodes_are_refused(tmp_path):
    path = _write(tmp_path / "p.pkl", _record([], payload=Path("/")))
    with pytest.raises(CaseFileError, match="refusing to load pathlib"):
        load_case(path)


# ---- malformed records: exit 2, one line --------------------------------------------------------
@pytest.mark.parametrize("change, words", [
    ({"verdict": "fail"}, "verdict: expected dict"),
    ({"verdict": {"findings": [{"kind": "nan", "backends": ["a"], "detail": 3}]}}, "verdict.findings[0].detail"),
    ({"inputs": {}}, "inputs: empty"),
    ({"inputs": {"image": np.zeros((0, 12, 12, 1), np.float32)}}, "inputs.image: no rows"),
    ({"inputs": {"image": np.zeros((2, 5), np.float32)}}, "inputs.image: shape"),
    ({"spec": {"name": "x", "inputs": []}}, "spec"),
    ({"weights": {"conv": "kernel"}}, "weights.conv"),
])
def test_malformed_records_exit_2_with_one_line(tmp_path, change, words):
    path = _write(tmp_path / "bad.pkl", {**_record([{"label": "tensorflow", "target": TF, "device": "cpu"}]),
                                         **change})
    for command in ("reproduce", "localize"):
        r = _audee(tmp_path, command, str(path))
        assert r.returncode == 2, r.stdout + r.stderr
        line = _error(r)
        assert str(path) in line and words in line, line


def test_mismatched_batch_sizes_are_refused():
    spec = tiny_cnn().to_json()
    spec["inputs"].append({"name": "extra", "shape": [3]})
    spec["layers"][2]["inputs"] = ["pool"]
    spec["layers"].insert(3, {"name": "cat", "api": "Concatenate", "params": {}, "inputs": ["flat", "extra"]})
    spec["layers"][4]["inputs"] = ["cat"]
    rec = {**_record([]), "spec": spec,
           "inputs": {"image": np.zeros((2, 12, 12, 1), np.float32), "extra": np.zeros((3, 3), np.float32)}}
    with pytest.raises(CaseFileError, match=r"inputs.extra: 3 rows where other inputs have 2"):
        CaseRecord.from_dict(rec, source="mem")


# ---- the tie margin a case was found with ---------------------------------------------------------
class _FakePool:
    def __init__(self, refs=None, log_dir=None, timeout=None, **kw):
        from audee.backends.registry import BackendRef

        self.workers = {"tensorflow": type("W", (), {"ref": BackendRef("tensorflow", TF, "cpu")})()}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def start(self):
        return {}

    def start_or_fail(self, **kw):
        return self

    @property
    def refs(self):
        return [w.ref for w in self.workers.values()]

    def versions(self):
        return {"tensorflow": {"tensorflow": "x"}}


def test_the_tie_margin_is_stored_and_used_to_rejudge(tmp_path, monkeypatch):
    import audee.localize.run as lrun
    import audee.repro.rerun as rmod
    from audee.fuzz import case_record

    case = TestCase("tie-1", tiny_cnn(), {}, tiny_inputs(2))
    result = Result(case, Verdict([]), {})
    path = case_record(result, _FakePool(), {"seed": "tiny"}, tie_margin=0.125).to_file(tmp_path / "tie.pkl")
    assert CaseRecord.from_file(path).tie_margin == 0.125 and load_case(path)["tie_margin"] == 0.125

    seen = []

    class FakeExecutor:
        def __init__(self, pool, *, tie_margin, **kw):
            seen.append(tie_margin)

        def run(self, case):
            return Result(case, Verdict([]), {})

    monkeypatch.setattr(rmod, "Pool", _FakePool)
    monkeypatch.setattr(rmod, "Executor", FakeExecutor)
    monkeypatch.setattr(lrun, "Executor", FakeExecutor)
    assert rmod.reproduce(path, log_dir=tmp_path).holds
    lrun.localize_case(path, pool=_FakePool(), apis={"Dense": None})
    assert seen == [0.125, 0.125]
    old = _write(tmp_path / "old.pkl", {**_record([{"label": "tensorflow", "target": TF, "device": "cpu"}]),
                                       "format": "audee.case/1"})
    rmod.reproduce(old, log_dir=tmp_path)
    rmod.reproduce(path, log_dir=tmp_path, tie_margin=0.5)
    assert seen[2:] == [TIE_MARGIN, 0.5]
