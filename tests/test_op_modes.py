"""Op cases everywhere the layers go: each backend calls a ``keras.ops`` function the way it
runs its model (``tensorflow`` traced by ``tf.function``, ``tensorflow-eager`` eagerly,
``tensorflow-xla`` compiled by XLA, ``torch`` eagerly, ``torch-compile`` under
``torch.compile``, ``jax`` jitted, ``jax-eager`` op by op), so each mode's pair with its
reference is "compiled equals eager" for one op; float64 among the op dtypes (JAX without
``jax_enable_x64`` sits float64 cases out: its documented default computes them in float32);
the op repro script calls the op with each backend's own lines.

The real-framework tests start every mode (seven workers: slow)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from audee.cases.case import Kind
from audee.cases.opcase import OpCase

REPO = Path(__file__).resolve().parents[1]
MODES = ("tensorflow", "tensorflow-eager", "tensorflow-xla", "torch", "torch-compile", "jax", "jax-eager")
NO_PYTHONPATH = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _case(op, tensors, args, kwargs=None, dtypes=None):
    return OpCase(op, args, kwargs or {}, tensors, dtypes or {k: str(v.dtype) for k, v in tensors.items()})


# ---- no framework --------------------------------------------------------------------------------
def test_every_mode_calls_ops_and_its_script_lines_call_them_its_way():
    """Each mode runs op cases (its description and class agree: tests/test_backend_info.py);
    the op script's ``OP_CALLS`` come from each backend's description: eager backends share
    one eager call, each compiling backend has its own lines and the script carries audee's
    ``traced_call`` verbatim."""
    from audee.backends.info import BUILTIN_INFO
    from audee.backends.modes import TorchCompileBackend
    from audee.repro.ops import op_code

    assert all(BUILTIN_INFO[n].runs_ops for n in MODES) and TorchCompileBackend.runs_ops
    code = op_code(list(MODES))
    ns: dict = {}
    exec(compile(code, "op_code", "exec"), ns)  # defines functions only: no framework imported
    calls = ns["OP_CALLS"]
    assert calls["torch"] is calls["tensorflow-eager"] and calls["torch"](lambda a, b=0: a + b, [1], {"b": 2}) == 3
    assert len({calls[n] for n in MODES}) == 6  # one eager call, five ways of their own
    assert "torch.compile(f, dynamic=False)" in code and "jit_compile=True" in code and "jax.jit)" in code
    assert "jax.disable_jit()" in code and "def traced_call(" in code and "def split_tensors(" in code
    assert "def traced_call(" not in op_code(["torch", "tensorflow-eager"])  # nothing compiled: nothing carried


def test_float64_is_an_op_dtype_of_float_ops_drawn_rarer_than_float32():
    from audee.apis import load_op_configs
    from audee.mutation.oplevel import generate_op_case

    configs = load_op_configs()
    assert "float64" in configs["exp"].args["x"].dtypes and "float64" in configs["det"].args["x"].dtypes
    assert "float64" not in configs["bitwise_and"].args["x"].dtypes  # an integer op stays integer
    drawn = Counter(generate_op_case("exp", configs, 0, i).dtypes["x"] for i in range(400))
    assert 0 < drawn["float64"] < drawn["float32"] / 2, drawn


def test_a_value_the_trace_knows_comes_back_as_the_eager_call_returns_it():
    """``ops.ndim`` returns a Python int eagerly; ``jax.jit`` made it a weakly typed int32
    array, so jax and jax-eager "differed" in dtype on every ndim/size case (an audee false
    positive).  What the trace knows stays a Python value; a computed output stays the
    compiler's, named tuples (eigh's) included."""
    import jax
    import jax.numpy as jnp

    from audee.backends.keras_backends import traced_call

    def jit(fn, args):
        return traced_call(fn, args, {}, lambda v: isinstance(v, jax.Array), jax.jit)

    x = jnp.ones((2, 3), jnp.float32)
    assert type(jit(lambda t: t.ndim, [x])) is int and jit(lambda t: (t.ndim, t.shape), [x]) == (2, (2, 3))
    both = jit(lambda t: (t.size, t * 2), [x])
    assert both[0] == 6 and isinstance(both[1], jax.Array) and both[1].tolist() == [[2.0] * 3] * 2
    w, v = jit(jnp.linalg.eigh, [jnp.eye(2, dtype=jnp.float32)])
    assert w.tolist() == [1.0, 1.0] and v.shape == (2, 2)


def test_a_converted_call_returns_what_its_trace_knew_in_the_eager_calls_dtype():
    """The compilers campaign (rng 2811): ops.ndim converted by the TFLite converter gave an
    int32 tensor (TensorFlow's default for a Python int constant) where tensorflow's call
    gives the int, read as int64: a dtype "deviation" of litert, an audee false positive."""
    import tensorflow as tf

    from audee.backends.keras_backends import tf_traced_call

    function, _, leaves = tf_traced_call(lambda t: (t.ndim, t * 2), [tf.ones((2, 3))], {})
    out = function(*leaves)
    assert out["y0"].dtype == tf.int64 and int(out["y0"]) == 2 and out["y1"].dtype == tf.float32


# ---- on the real frameworks ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends

    with Pool(parse_backends(",".join(MODES)), tmp_path_factory.mktemp("logs"), threads=1, timeout=600) as p:
        p.start_or_fail()
        yield p


@pytest.mark.slow
def test_op_cases_run_compiled_under_every_mode_with_judged_rows(pool, tmp_path):
    from audee.fuzz import FuzzConfig, fuzz_ops
    from audee.store import RunStore

    cfg = FuzzConfig([w.ref for w in pool.workers.values()], tmp_path, variants=2, rng=5)
    stats = fuzz_ops(["add", "softmax"], cfg, pool=pool)
    rows = list(RunStore(tmp_path).rows())
    assert stats.run == len(rows) == 4
    for r in rows:
        left_out = {"jax", "jax-eager"} if "float64" in r.extra.get("tensor_dtypes", {}).values() else set()
        assert set(r.backends) == set(MODES) - left_out, (r.id, r.backends)
        assert all(v == "ok" for v in r.backends.values()) and r.status == "pass", (r.id, r.kinds)


@pytest.mark.slow
def test_xla_dropping_a_nan_in_max_is_a_bug_of_tensorflow_xla(pool):
    """keras.ops.max over an axis holding one NaN: eager TensorFlow, its traced graph, torch
    (eager and compiled) and JAX (jitted and op by op) keep the NaN; XLA's CPU reduction
    returns the largest finite value (tensorflow/tensorflow#116992, open).  Judged against
    its reference, tensorflow-xla is the odd side and the root cause a bug of it, not an
    "undefined" NaN input."""
    from audee.engine.opexec import OpExecutor
    from audee.triage.rootcause import classify, root_key
    from audee.triage.signature import case_signatures

    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    r = OpExecutor(pool).run(_case("max", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    assert r.outputs["tensorflow-xla"][0].tolist() == [3.0, 5.0]
    assert all(np.isnan(r.outputs[b][0][0]) for b in MODES if b != "tensorflow-xla")
    (f,) = [f for f in r.verdict.findings if f.kind == Kind.NAN]
    assert f.detail.odd == ["tensorflow-xla"] and f.detail.input_nonfinite
    sigs = [s for s in case_signatures(r.verdict, None, {"op": "max", "api": "max"}) if s.kind == Kind.NAN]
    judged = [(s.odd, classify(s)[0], root_key(s)) for s in sigs]
    assert judged and all(odd == ("tensorflow-xla",) and k == "bug" and "?" not in key
                          for odd, k, key in judged), judged
    from audee.triage.known import load_known_issues, match_known

    issues = load_known_issues()
    assert {match_known(s, issues).id for s in sigs} == {"tf-xla-minmax-drops-nan"}


@pytest.mark.slow
def test_jax_jits_the_call_and_jax_eager_runs_it_op_by_op(pool):
    """nonzero's output shape depends on the values: jitted it cannot be traced (jit's
    documented contract: a limitation), op by op it runs.  Before jax jitted op calls, both
    ran it alike."""
    from audee.engine.opexec import OpExecutor
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures

    x = np.array([[0.0, 2.0], [3.0, 0.0]], np.float32)
    r = OpExecutor(pool).run(_case("nonzero", {"x": x}, [{"tensor": "x"}]))
    assert "ConcretizationTypeError" in r.outcomes["jax"].failure.message and r.outcomes["jax-eager"].ok
    (sig,) = [s for s in case_signatures(r.verdict, None, {"op": "nonzero", "api": "nonzero"})
              if s.kind == Kind.DIVERGENT_ACCEPTANCE]
    assert sig.backends == ("jax",) and classify(sig)[0] == "limitation"


@pytest.mark.slow
def test_a_float64_op_case_computes_in_float64_and_jax_without_x64_sits_it_out(pool):
    from audee.engine.opexec import OpExecutor

    x = np.array([[1.0, 2.0 ** -40, 2.0 ** -40]], np.float64)  # float32 would lose the small terms
    r = OpExecutor(pool).run(_case("sum", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    assert set(r.outcomes) == set(MODES) - {"jax", "jax-eager"} and r.verdict.status == "pass"
    assert all(r.dtypes[b] == ["float64"] and r.outputs[b][0][0] == 1 + 2.0 ** -39 for b in r.outcomes)
    assert any(n.startswith("left out: jax computes float64 as float32") for n in r.undefined), r.undefined


@pytest.mark.slow
def test_a_float64_op_case_on_jax_with_x64_computes_in_float64(tmp_path):
    """jax-x64 (jax_enable_x64) computes the float64 call and plain JAX is left out of it; with
    no backend of the run computing float64, JAX runs it (in what it computes: float32)."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.opexec import OpExecutor

    x = np.array([1.0, 2.0 ** -40], np.float64)
    for labels, ran, dtype, total in (("jax,jax-x64", "jax-x64", "float64", 1 + 2.0 ** -40),
                                      ("jax", "jax", "float32", 1.0)):
        with Pool(parse_backends(labels), tmp_path / labels, threads=1) as p:
            p.start_or_fail()
            r = OpExecutor(p).run(_case("sum", {"x": x}, [{"tensor": "x"}]))
        assert set(r.outcomes) == {ran} and r.dtypes[ran] == [dtype] and r.outputs[ran][0] == total, labels
        assert bool(r.undefined) == (ran == "jax-x64"), r.undefined


@pytest.mark.slow
def test_the_op_repro_script_of_a_compiled_mode_compiles_the_call(pool, tmp_path):
    """The script for a torch-compile and a tensorflow-xla finding calls the op with the
    backend's own lines: torch.compile and XLA in the text, and run, the XLA NaN drop
    reproduces (called eagerly, as before, it did not)."""
    from audee.cases.case import Finding
    from audee.repro.ops import write_op_repro
    from audee.store import CaseRecord

    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    from audee.engine.opexec import OpExecutor

    r = OpExecutor(pool).run(_case("max", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
    refs = [w.ref for label, w in pool.workers.items() if label in ("tensorflow", "tensorflow-xla", "torch",
                                                                     "torch-compile")]
    rec = CaseRecord.from_result(r, refs, pool.versions())
    nan = next(f for f in r.verdict.findings if f.kind == Kind.NAN)
    rec.verdict = {**rec.verdict, "findings": [nan.to_json()]}
    script = write_op_repro(rec, tmp_path, "xla-max-nan", 0)
    text = script.read_text()
    assert "torch.compile(f, dynamic=False)" in text and "jit_compile=True" in text
    got = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=NO_PYTHONPATH)
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]
    for label in ("torch", "torch-compile"):
        assert f"  {label:<20} float32[2]" in got.stdout  # the compiled torch call ran too
    # a torch-compile finding: its script runs the call under torch.compile in the child
    same = Finding(Kind.NAN, ["torch", "torch-compile"], {"strong": True, "layers": {"torch": ["out0"]},
                                                           "first_layer": {"torch": "out0"}})
    rec.verdict = {**rec.verdict, "findings": [same.to_json()]}
    script = write_op_repro(rec, tmp_path, "torch-compile-max", 0)
    got = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=NO_PYTHONPATH)
    assert got.returncode == 1 and "NOT REPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]


@pytest.mark.slow
def test_torch_compile_compiles_every_op_case_past_dynamos_recompile_limit():
    """Every case's traced function has one code object; past Dynamo's recompile limit (8)
    it would run the call eagerly without a word.  Each of ten cases is compiled into a
    graph of its own (Dynamo's caches cleared per case)."""
    script = textwrap.dedent("""
        import os
        os.environ["KERAS_BACKEND"] = "torch"; os.environ["CUDA_VISIBLE_DEVICES"] = ""
        import numpy as np
        from torch._dynamo.utils import counters
        from audee.backends.modes import TorchCompileBackend
        b = TorchCompileBackend("cpu")
        grown = []
        for n in range(1, 11):
            before = counters["stats"]["unique_graphs"]
            call = {"op": "max", "args": [{"tensor": "x"}], "kwargs": {"axis": 0}, "dtypes": {"x": "float32"}}
            (out, dtype), = b.run_op(call, {"x": np.arange(n, dtype=np.float32)})
            assert float(out) == n - 1 and dtype == "float32"
            grown.append(counters["stats"]["unique_graphs"] - before)
        print(grown)
    """)
    got = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, cwd=REPO,
                         env={**NO_PYTHONPATH, "PYTHONPATH": str(REPO)})
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.strip().splitlines()[-1] == str([1] * 10), got.stdout


@pytest.mark.slow
def test_litert_converts_the_op_call_and_its_nan_drop_is_a_bug_of_the_converter(tmp_path):
    """litert runs an op case as it runs a model: the call traced, converted by the TFLite
    converter, run by the LiteRT interpreter.  Its REDUCE_MAX drops a NaN TensorFlow keeps
    (tensorflow/tensorflow#118389): judged against its reference, litert is odd and the root
    cause a bug, and the op script converts the call too and reproduces it.  An op the
    converter has no builtin for is a convert failure, a limitation."""
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.opexec import OpExecutor
    from audee.repro.ops import write_op_repro
    from audee.triage.rootcause import classify
    from audee.triage.signature import case_signatures
    from audee.store import CaseRecord

    x = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, -1.0]], np.float32)
    with Pool(parse_backends("tensorflow,litert"), tmp_path / "logs", threads=1, timeout=300) as p:
        p.start_or_fail()
        ex = OpExecutor(p)
        r = ex.run(_case("max", {"x": x}, [{"tensor": "x"}], {"axis": 1}))
        refused = ex.run(_case("nonzero", {"x": x}, [{"tensor": "x"}]))
        rec = CaseRecord.from_result(r, [w.ref for w in p.workers.values()], p.versions())
    assert r.outputs["litert"][0].tolist() == [3.0, 5.0] and np.isnan(r.outputs["tensorflow"][0][0])
    (f,) = [f for f in r.verdict.findings if f.kind == Kind.NAN]
    assert f.detail.odd == ["litert"]
    sigs = [s for s in case_signatures(r.verdict, None, {"op": "max", "api": "max"}) if s.kind == Kind.NAN]
    assert sigs and all(s.odd == ("litert",) and classify(s)[0] == "bug" for s in sigs)
    from audee.triage.known import load_known_issues, match_known

    assert {match_known(s, load_known_issues()).id for s in sigs} == {"litert-minmax-drops-nan"}
    failure = refused.outcomes["litert"].failure
    assert failure is not None and failure.phase == "convert" and "neither a custom op nor a flex op" in failure.message
    (sig,) = case_signatures(refused.verdict, None, {"op": "nonzero", "api": "nonzero"})
    assert classify(sig)[0] == "limitation"
    rec.verdict = {**rec.verdict, "findings": [f.to_json()]}
    script = write_op_repro(rec, tmp_path, "litert-max-nan", 0)
    assert "def tflite_call(" in script.read_text()
    got = subprocess.run([sys.executable, "-P", str(script)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path, env=NO_PYTHONPATH)
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]
