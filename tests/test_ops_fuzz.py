"""Op-level fuzzing (issue 30) on the real frameworks: ``keras.ops`` calls drawn from the op
configs, run on TensorFlow, PyTorch and JAX workers, judged by the oracles; a plugin that
breaks one op on one backend is flagged, its repro script reproducing alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.apis import load_op_configs
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind
from audee.mutation.oplevel import DERIVE, generate_op_case
from audee.cases.opcase import OpCase
from audee.engine.opexec import OpExecutor

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
PLUGIN = "tests.plugins:CumsumOffByOneJax"


def test_every_op_draws_json_calls_within_its_config():
    configs = load_op_configs()
    assert all(c.derive in DERIVE for c in configs.values() if c.derive)
    for op in configs:
        for i in range(3):
            case = generate_op_case(op, configs, 0, i, invalid_prob=0.3)
            json.dumps(case.call())  # plain data: no array, no code
            assert all(isinstance(t, np.ndarray) for t in case.tensors.values())  # rank 0 too: a case file holds arrays
    a = generate_op_case("add", configs, 5, 1)
    b = generate_op_case("add", configs, 5, 1)
    assert a.call() == b.call() and all(np.array_equal(a.tensors[k], b.tensors[k]) for k in a.tensors)
    mesh = generate_op_case("meshgrid", configs, 0, 0)  # meshgrid(*x): the list spread into positional args
    assert mesh.args and all(set(a) == {"tensor"} for a in mesh.args)
    for i in range(10):
        sq = generate_op_case("squeeze", configs, 0, i)
        if isinstance(sq.kwargs["axis"], int) and not sq.invalid:
            assert sq.tensors["x"].shape[sq.kwargs["axis"]] == 1     # the axis squeeze drops has size 1
    take = generate_op_case("take", configs, 0, 3)
    axis = take.kwargs["axis"]
    size = take.tensors["x"].size if axis is None else take.tensors["x"].shape[axis]
    assert take.tensors["indices"].max(initial=0) < max(size, 1)


def test_a_dtype_outside_the_contract_is_the_cases_invalid_value_and_undefined():
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    configs = load_op_configs()
    cases = [generate_op_case("relu6", configs, 0, i, invalid_prob=1.0) for i in range(4)]
    assert {c.dtypes["x"] for c in cases} == {"int32"} and all(c.invalid for c in cases)
    muts = [m.__dict__ for m in cases[0].mutations]
    assert muts == [{**muts[0], "param": "x.dtype", "new": "int32", "invalid": True}]
    plain = [generate_op_case("relu6", configs, 0, i) for i in range(20)]
    assert {c.dtypes["x"] for c in plain} <= {"float32", "float16", "bfloat16"}
    finding = {"kind": Kind.DIVERGENT_ACCEPTANCE, "backends": ["tensorflow"],
               "detail": {"accepted": ["torch", "jax"], "errors": {"tensorflow": {
                   "phase": "run", "message": "InvalidArgumentError: Value for attr 'T' of int32"}}}}
    (sig,) = signatures_of(finding, {"layers": []}, {"mutations": muts, "op": "relu6"})
    assert classify(sig) == ("undefined", "a crafty invalid value of x.dtype")


def test_two_axes_an_op_needs_distinct_drawn_as_one_are_outside_the_contract():
    """``diagonal``'s ``axis1`` and ``axis2`` are each a valid axis; drawn naming one axis
    (``1`` and ``-1`` on a matrix) the call is outside numpy's contract: the case record marks
    it and says why, and what it triggers is undefined."""
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    configs = load_op_configs()
    assert configs["diagonal"].distinct == ["axis1", "axis2"] and not configs["swapaxes"].distinct
    same = differ = 0
    for i in range(40):
        case = generate_op_case("diagonal", configs, 0, i)
        n = case.tensors["x"].ndim
        a1, a2 = case.kwargs["axis1"], case.kwargs["axis2"]
        marks = [(m.param, m.why) for m in case.mutations if m.invalid]
        if a1 % n == a2 % n:
            assert marks == [("axis2", "axis1 and axis2 name one axis")] and case.invalid
            muts, same = [m.to_json() for m in case.mutations], same + 1
        else:
            assert marks == [] and not case.invalid
            differ += 1
    assert same and differ
    finding = {"kind": Kind.DIVERGENT_ACCEPTANCE, "backends": ["torch"],
               "detail": {"accepted": ["tensorflow", "jax"], "errors": {"torch": {
                   "phase": "run", "message": "RuntimeError: diagonal dimensions cannot be identical 1, 1"}}}}
    (sig,) = signatures_of(finding, {"layers": []}, {"mutations": muts, "api": "diagonal", "seed": "op:diagonal"})
    assert classify(sig) == ("undefined", "outside the contract: axis1 and axis2 name one axis")


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """The three Keras backends (slow tests: three framework imports)."""
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path_factory.mktemp("oplogs"), threads=1) as p:
        p.start_or_fail()
        yield p


@pytest.fixture(scope="module")
def jax_pool(tmp_path_factory):
    """JAX and the JAX plugin whose cumsum is broken: the default suite's pool (one framework)."""
    with Pool(parse_backends(f"jax,{PLUGIN}"), tmp_path_factory.mktemp("oplogs"), threads=1) as p:
        p.start_or_fail()
        yield p


def _case(op, tensors, args, kwargs=None, dtypes=None):
    return OpCase(op, args, kwargs or {}, tensors, dtypes or {k: str(v.dtype) for k, v in tensors.items()})


@pytest.mark.slow
def test_ops_across_dtypes_agree_and_integers_are_compared_exactly(pool):
    ex = OpExecutor(pool)
    x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 3
    for dtype in ("float32", "float16", "bfloat16", "int32"):
        t = x.astype(np.float32) if dtype == "bfloat16" else (x * 3).astype(dtype) if dtype == "int32" else x.astype(dtype)
        r = ex.run(_case("sum", {"x": t}, [{"tensor": "x"}], {"axis": 1}, {"x": dtype}))
        assert set(r.outcomes) == {"tensorflow", "torch", "jax"}
        assert r.verdict.status == "pass", (dtype, r.verdict.to_json())
        assert r.dtypes["jax"] == [dtype]
    # argmax: integer indices, compared exactly; an undefined tie is not compared at all
    r = ex.run(_case("argmax", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    assert r.verdict.status == "pass" and r.outputs["tensorflow"][0].tolist() == [3, 3, 3]
    ties = OpExecutor(pool, undefined={"argmax": ["tie_indices"]})
    r = ties.run(_case("argmax", {"x": np.ones((2, 3), np.float32)}, [{"tensor": "x"}], {"axis": 1}))
    assert r.undefined == ["out0: indices of tied values judged by the values they point at"]


@pytest.mark.slow
def test_special_values_propagated_alike_are_no_failure(pool):
    x = np.array([[np.nan, 1.0, np.inf], [-np.inf, 0.5, -0.0]], np.float32)
    r = OpExecutor(pool).run(_case("add", {"x1": x, "x2": np.ones(3, np.float32)},
                                   [{"tensor": "x1"}, {"tensor": "x2"}]))
    assert r.verdict.kinds() == [Kind.NAN_PROPAGATED] and r.verdict.status == "pass"


def test_an_op_a_backend_breaks_is_flagged_on_that_backend_alone(jax_pool):
    pool = jax_pool
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    r = OpExecutor(pool).run(_case("cumsum", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    devs = [f for f in r.verdict.findings if f.kind == Kind.DEVIATION]
    assert devs and all(PLUGIN in f.backends for f in devs)
    assert {tuple(f.detail.odd or ()) for f in devs} <= {(PLUGIN,), ()}
    r = OpExecutor(pool).run(_case("cumprod", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    assert r.verdict.status == "pass"


def test_fuzz_op_writes_rows_case_files_and_a_repro_that_reproduces_alone(jax_pool, tmp_path):
    pool = jax_pool
    from audee.fuzz import FuzzConfig, fuzz_ops
    from audee.levels import level_of
    from audee.store import CaseRecord, RunStore

    cfg = FuzzConfig([w.ref for w in pool.workers.values()], tmp_path, variants=2, rng=3)
    stats = fuzz_ops(["cumsum", "bitwise_and", "top_k"], cfg, pool=pool)
    rows = list(RunStore(tmp_path).rows())
    assert stats.run == len(rows) == 6 and {r.api for r in rows} == {"cumsum", "bitwise_and", "top_k"}
    bad = [r for r in rows if r.api == "cumsum" and r.status == "fail"]
    assert bad and bad[0].case_file and all(PLUGIN in s["backends"] for s in bad[0].signatures)
    rec = CaseRecord.from_file(tmp_path / bad[0].case_file)
    assert level_of(rec).name == "op" and rec.op["op"] == "cumsum" and rec.spec == {}
    scripts = sorted((tmp_path / "repro").glob("*cumsum*.py"))
    assert scripts, list((tmp_path / "repro").glob("*"))
    got = subprocess.run([sys.executable, "-P", str(scripts[0])], env={**os.environ, "PYTHONPATH": str(REPO)},
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]
    # `audee report --resign`: signatures made again from the case files, by today's rules
    from audee.report import load_campaign_dir

    table = tmp_path / "results.jsonl"
    recorded = table.read_text()
    table.write_text(recorded.replace('"context": []', '"context": ["invalid:axis"]'))  # an older rule's verdict
    stale = [s for r in load_campaign_dir(tmp_path).rows if r.row.id == bad[0].id for s in r.row.signatures]
    assert stale and all("invalid:axis" in s["context"] for s in stale)
    fresh = [s for r in load_campaign_dir(tmp_path, resign=True).rows if r.row.id == bad[0].id
             for s in r.row.signatures]
    assert fresh == bad[0].signatures
    (tmp_path / bad[0].case_file).unlink()                  # a lost case file: that row keeps what it recorded
    kept = [s for r in load_campaign_dir(tmp_path, resign=True).rows if r.row.id == bad[0].id
            for s in r.row.signatures]
    assert kept == stale


@pytest.mark.slow
def test_an_op_case_file_reproduces_and_writes_its_script(jax_pool, tmp_path):
    """audee reproduce re-runs the call; audee repro writes the op's script; audee localize
    says there is nothing to localize, in one line."""
    from audee.core.errors import AudeeError
    from audee.fuzz import FuzzConfig, fuzz_ops
    from audee.localize.run import localize_case
    from audee.repro import repro_case
    from audee.repro.rerun import reproduce
    from audee.store import RunStore

    fuzz_ops(["cumsum"], FuzzConfig([w.ref for w in jax_pool.workers.values()], tmp_path, variants=1, rng=3),
             pool=jax_pool)
    row = next(RunStore(tmp_path).rows())
    path = tmp_path / row.case_file
    rep = reproduce(path, log_dir=tmp_path, allowed_plugins=[PLUGIN])
    assert rep.holds and rep.result.case.op == "cumsum"
    script = repro_case(path, out=tmp_path / "again", allowed_plugins=[PLUGIN])
    assert script.script.is_file() and script.model == "op"
    with pytest.raises(AudeeError, match="no layers to localize"):
        localize_case(path, log_dir=tmp_path)


@pytest.mark.parametrize("flags", [["--equivalence", "all"], ["--phase", "train", "--equivalence", "all"]])
def test_a_model_judgement_asked_of_op_cases_is_one_line_naming_the_flag(tmp_path, flags):
    got = subprocess.run([sys.executable, "-m", "audee", "fuzz", "--op", "cumsum", "--variants", "1", *flags,
                          "--backends", "jax", "--out", str(tmp_path / "run"), "--no-progress"],
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 2, got.stdout + got.stderr
    (line,) = [x for x in got.stderr.splitlines() if x.startswith("audee: error:")]
    assert flags[-2] in line and "judges models, not keras.ops calls" in line
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_a_nan_finding_on_one_backend_has_a_repro_that_reproduces_alone(jax_pool, tmp_path):
    """The other backends refused the call (an int32 into rsqrt): the script judges the lone
    backend's non-finite values instead of looking for a pair."""
    from audee.cases.case import Finding
    from audee.repro.ops import write_op_repro
    from audee.store import CaseRecord

    r = OpExecutor(jax_pool).run(_case("sqrt", {"x": np.array([-1.0, 4.0], np.float32)}, [{"tensor": "x"}]))
    ref = next(w.ref for label, w in jax_pool.workers.items() if label == "jax")
    rec = CaseRecord.from_result(r, [ref], jax_pool.versions())
    nan = Finding(Kind.NAN, ["jax"], {"strong": True, "layers": {"jax": ["out0"]}, "first_layer": {"jax": "out0"}})
    rec.verdict = {**rec.verdict, "findings": [nan.to_json()]}
    script = write_op_repro(rec, tmp_path, "nan-sqrt-jax", 0)
    got = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]


def test_tensorflow_xla_compiles_the_op_call(tmp_path):
    """compiled equals eager for one op: tensorflow-xla's call is XLA-compiled (its tensors,
    in lists too, the traced inputs); every mode calls ops (tests/test_op_modes.py)."""
    from audee.backends.keras_backends import split_tensors
    from audee.backends.modes import TensorflowXlaBackend, TorchCompileBackend

    leaves, rebuild = split_tensors([[1, "t"], 3], {"b": "u", "axis": 0}, lambda v: isinstance(v, str))
    assert leaves == ["t", "u"] and rebuild(["T", "U"]) == ([[1, "T"], 3], {"b": "U", "axis": 0})
    assert TensorflowXlaBackend.runs_ops and TorchCompileBackend.runs_ops
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with Pool(parse_backends("tensorflow-xla"), tmp_path, threads=1) as pool:
        pool.start_or_fail()
        ex = OpExecutor(pool)
        r = ex.run(_case("concatenate", {"x": x}, [[{"tensor": "x"}, {"tensor": "x"}]], {"axis": 0}))
        assert r.verdict.status == "pass" and np.array_equal(r.outputs["tensorflow-xla"][0], np.concatenate([x, x]))
        square = np.eye(3, dtype=np.float32)  # XLA has no kernel for MatrixDeterminant: only a compiled call fails
        failure = ex.run(_case("det", {"x": square}, [{"tensor": "x"}])).outcomes["tensorflow-xla"].failure
        assert failure is not None and "unsupported operations when trying to compile" in failure.message, failure


def test_a_runaway_allocation_costs_one_worker_never_the_run(tmp_path, monkeypatch):
    """A worker over its memory cap ends itself (the machine's OOM killer would pick any
    process); an op's outputs too big to pass back are refused in the worker; both are
    undefined (the case asks for more memory than a worker may hold), and the pool goes on."""
    from audee.cases.case import MEMORY_CAP
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    monkeypatch.setenv("AUDEE_WORKER_MEMORY_MB", "800")
    with Pool(parse_backends("torch"), tmp_path, threads=1) as pool:
        pool.start_or_fail()
        ex = OpExecutor(pool)
        big = ex.run(OpCase("ones", [[16384, 16384]], {}, {}, {}))       # 1 GiB written: over the cap
        failure = big.outcomes["torch"].failure
        assert failure is not None and failure.kind == "exit" and MEMORY_CAP in failure.message, failure
        wide = ex.run(OpCase("zeros", [[4096, 16400]], {}, {}, {}))       # 256+ MiB of untouched pages
        assert MEMORY_CAP in wide.outcomes["torch"].failure.message       # too big to pass back
        ok = ex.run(OpCase("ones", [[2, 3]], {}, {}, {}))
        assert ok.outcomes["torch"].ok
    (crash,) = [f for f in big.verdict.findings if f.is_failure]
    (sig,) = signatures_of(crash, {"layers": []}, {"op": "ones"})
    assert sig.kind == Kind.HARD_CRASH and classify(sig)[0] == "undefined"


def test_a_call_keras_symbolic_spec_refuses_is_outside_the_contract(jax_pool):
    """Keras's own shape inference refuses one_hot(axis=-2); JAX's eager call answers anyway:
    the row says why the case is undefined, and a failure of it is classed so."""
    from audee.cases.case import SPEC_REFUSES, Finding
    from audee.triage.rootcause import classify
    from audee.triage.signature import signatures_of

    ids = np.array([[1, 2], [0, 1]], np.int32)
    r = OpExecutor(jax_pool).run(_case("one_hot", {"x": ids}, [{"tensor": "x"}, 3], {"axis": -2}))
    assert r.outcomes["jax"].ok and [u for u in r.undefined if u.startswith(SPEC_REFUSES)], r.undefined
    ok = OpExecutor(jax_pool).run(_case("one_hot", {"x": ids}, [{"tensor": "x"}, 3], {"axis": -1}))
    assert not ok.undefined
    crash = Finding(Kind.DIVERGENT_ACCEPTANCE, ["tensorflow"], {"accepted": ["torch", "jax"], "errors": {
        "tensorflow": {"phase": "run", "message": "InvalidArgumentError: Expected axis to be -1 or between [0, 2)"}}})
    (sig,) = signatures_of(crash, {"layers": []}, {"op": "one_hot", "undefined": r.undefined})
    assert classify(sig) == ("undefined", "Keras's own symbolic call refuses the arguments")
