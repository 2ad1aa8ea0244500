"""The gradient phase of op-level cases (``audee fuzz --op ... --phase train``) on the real
frameworks: each backend's vector-Jacobian product of one ``keras.ops`` call, a drawn
cotangent pulled back, judged per gradient; a plugin whose backward pass is broken is the
odd backend, its case file re-runs and its standalone script reproduces alone; the
gradients the op contract leaves undefined (kinks) are skipped by the op config, by name."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.cases.case import Kind
from audee.cases.opcase import OpCase, cotangent
from audee.engine.opgrad import GRADIENT, OpGradExecutor
from audee.oracle.opgrad import kinks

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}
PLUGIN = "tests.plugins:SquareGradJax"


def _case(op, tensors, args, kwargs=None, dtypes=None, seed=5, ident="op-x-v00000"):
    return OpCase(op, args, kwargs or {}, tensors, dtypes or {k: str(v.dtype) for k, v in tensors.items()},
                  id=ident, meta={"train": {GRADIENT: {"seed": seed}}})


def test_the_cotangent_is_fixed_by_its_seed_and_output():
    a = cotangent(3, 0, (2, 3))
    assert a.shape == (2, 3) and a.dtype == np.float64
    assert np.array_equal(a, cotangent(3, 0, (2, 3))) and not np.array_equal(a, cotangent(3, 1, (2, 3)))


def test_kinks_are_named_by_the_op_config_only():
    x = {"x": np.array([0.0, 1.0], np.float32)}
    assert kinks([], x) == []                                  # a smooth op: a 0 is no reason
    assert "holds 0" in kinks(["gradient_at_zero"], x)[0]
    assert kinks(["gradient_at_zero"], {"x": np.array([1.0, 2.0], np.float32)}) == []
    assert "tied values" in kinks(["gradient_at_ties"], {"x": np.array([2.0, 2.0], np.float32)})[0]


@pytest.fixture(scope="module")
def jax_pool(tmp_path_factory):
    """JAX, its eager mode and the plugin whose square has a broken backward pass (one framework)."""
    with Pool(parse_backends(f"jax,jax-eager,{PLUGIN}"), tmp_path_factory.mktemp("gradlogs"), threads=1) as p:
        p.start_or_fail()
        yield p


def test_a_gradient_nan_where_the_others_are_finite_is_the_broken_backends(jax_pool):
    x = np.array([[0.0, 1.0, -2.0]], np.float32)
    r = OpGradExecutor(jax_pool).run(_case("square", {"x": x}, [{"tensor": "x"}]))
    assert r.names == ["out0", "grad:x"] and r.train[GRADIENT]["wrt"] == ["x"]
    right = 2 * x * cotangent(5, 0, x.shape).astype(np.float32)  # the VJP of x**2
    np.testing.assert_allclose(r.outputs["jax"][1], right, rtol=1e-6)
    np.testing.assert_allclose(r.outputs["jax-eager"][1], right, rtol=1e-6)
    kinds = {f.kind: f for f in r.verdict.findings}
    assert Kind.NAN in kinds and Kind.DEVIATION in kinds, r.verdict.to_json()
    nan = kinds[Kind.NAN]
    assert nan.detail.first_layer == {PLUGIN: "grad:x"} and set(nan.detail.finite_backends) == {"jax", "jax-eager"}
    assert nan.detail.odd == [PLUGIN]
    devs = [f for f in r.verdict.findings if f.kind == Kind.DEVIATION]
    assert all(f.detail.tensor == "grad:x" and PLUGIN in f.backends for f in devs)  # the forward agrees
    assert all(f.detail.odd == [PLUGIN] for f in devs)


@pytest.mark.slow
def test_an_op_gradient_run_writes_judged_rows_and_a_case_file_that_reproduces(jax_pool, tmp_path):
    from audee.fuzz import FuzzConfig, fuzz_ops
    from audee.levels import level_of
    from audee.repro.rerun import reproduce
    from audee.store import CaseRecord, RunStore

    cfg = FuzzConfig([w.ref for w in jax_pool.workers.values()], tmp_path, variants=2, rng=3, phase="train")
    fuzz_ops(["square", "add"], cfg, pool=jax_pool)
    rows = list(RunStore(tmp_path).rows())
    assert len(rows) == 4 and all(r.phase == "train" and GRADIENT in r.train for r in rows)
    assert all(r.status == "pass" for r in rows if r.api == "add"), [r.kinds for r in rows]
    bad = [r for r in rows if r.api == "square" and r.status == "fail"]
    assert bad and bad[0].case_file
    rec = CaseRecord.from_file(tmp_path / bad[0].case_file)
    assert level_of(rec).name == "opgrad" and rec.op["op"] == "square"
    devs = [f for f in rec.verdict["findings"] if f["kind"] == "deviation"]
    assert devs and all(f["detail"]["tensor"].startswith("grad:") for f in devs)
    rep = reproduce(tmp_path / bad[0].case_file, log_dir=tmp_path, allowed_plugins=[PLUGIN])
    assert rep.holds
    scripts = sorted((tmp_path / "repro").glob("*square*.py"))
    assert scripts, list((tmp_path / "repro").glob("*"))
    got = subprocess.run([sys.executable, "-P", str(scripts[0])], env=ENV, capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert got.returncode == 0 and "\nREPRODUCED" in got.stdout, got.stdout[-2000:] + got.stderr[-2000:]
    text = scripts[0].read_text()
    assert "grad:x" in text.splitlines()[2]  # the header says which gradient
    assert "jax.jit)" in text and "OP_CALLS" in text  # jax differentiated jitted, as its run did


@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    """The three Keras backends (slow tests: three framework imports)."""
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path_factory.mktemp("gradlogs3"), threads=1) as p:
        p.start_or_fail()
        yield p


@pytest.mark.slow
def test_gradients_agree_across_frameworks_and_kinks_are_undefined_by_config(pool):
    from audee.levels.calls import _undefined

    ex = OpGradExecutor(pool, undefined=_undefined())
    x = np.array([[0.5, -1.5, 2.0], [3.0, -0.25, 1.0]], np.float32)
    for op, kwargs in (("sqrt", {}), ("abs", {}), ("norm", {}), ("logsumexp", {"axis": -1}), ("max", {"axis": 1})):
        r = ex.run(_case(op, {"x": np.abs(x) if op == "sqrt" else x}, [{"tensor": "x"}], kwargs))
        assert r.verdict.status == "pass", (op, r.verdict.to_json())
        assert len(r.outputs["torch"]) == 2 and r.undefined == []
    # norm of the zero vector: TensorFlow and JAX answer NaN, torch the subgradient 0; abs at 0:
    # JAX 1, the others 0 -- not differentiable there, so each op config says the gradient is undefined
    for op in ("norm", "abs"):
        r = ex.run(_case(op, {"x": np.zeros((1, 3), np.float32)}, [{"tensor": "x"}]))
        assert r.verdict.findings == [] and any("not differentiable" in u for u in r.undefined), r.undefined
    # an integer argument has no gradient; the float one has
    r = ex.run(_case("take", {"x": x, "i": np.array([0, 2], np.int32)}, [{"tensor": "x"}, {"tensor": "i"}],
                     {"axis": 1}))
    assert r.train[GRADIENT]["wrt"] == ["x"] and r.verdict.status == "pass", r.verdict.to_json()


def _odd_gradient(r, tensor="grad:x"):
    """The backends a gradient deviation is pinned on (every deviation of ``tensor``)."""
    devs = [f for f in r.verdict.findings if f.kind == Kind.DEVIATION and f.detail.tensor == tensor]
    return devs, {tuple(f.detail.odd or ()) for f in devs}


@pytest.mark.slow
def test_tensorflows_cumprod_gradient_at_a_zero_is_a_finding_on_tensorflow(pool):
    """tensorflow/tensorflow#119430 (reproduces with TF 2.21): the gradient of cumprod divides
    by x, so at an exact 0 it drops the terms that do not go through the 0 (d/dx0 of
    [x0, x0 x1, x0 x1 x2] is c0 + c1 x1 + c2 x1 x2, finite and nonzero; TensorFlow answers 0)."""
    x = np.array([[0.0, 2.0, 3.0], [1.0, 2.0, 3.0]], np.float32)
    r = OpGradExecutor(pool).run(_case("cumprod", {"x": x}, [{"tensor": "x"}], {"axis": -1}))
    devs, odd = _odd_gradient(r)
    assert devs and odd == {("tensorflow",)}, r.verdict.to_json()
    c = cotangent(5, 0, x.shape)
    right = c[0, 0] + c[0, 1] * 2 + c[0, 2] * 6
    assert abs(r.outputs["torch"][1][0, 0] - right) < 1e-4 and r.outputs["tensorflow"][1][0, 0] == 0


@pytest.mark.slow
def test_tensorflows_celu_gradient_at_zero_is_a_finding_on_tensorflow(pool):
    """Keras on TensorFlow builds celu from maximum/minimum, whose gradient at a tie gives the
    whole cotangent to the first argument: celu is differentiable at 0 (both slopes are 1),
    yet TensorFlow's gradient there is twice the cotangent (torch and JAX agree with the math)."""
    from audee.levels.calls import _undefined

    x = np.array([[0.0, 1.0, -1.0]], np.float32)
    r = OpGradExecutor(pool, undefined=_undefined()).run(_case("celu", {"x": x}, [{"tensor": "x"}]))
    devs, odd = _odd_gradient(r)
    assert devs and odd == {("tensorflow",)}, r.verdict.to_json()
    c = cotangent(5, 0, x.shape)
    assert abs(r.outputs["torch"][1][0, 0] - c[0, 0]) < 1e-5
    assert abs(r.outputs["tensorflow"][1][0, 0] - 2 * c[0, 0]) < 1e-5


@pytest.mark.slow
def test_a_tie_between_two_arguments_is_undefined_for_maximum(pool):
    """maximum(x, x): TensorFlow gives the cotangent to x1, torch and JAX half to each; the op
    config says ties are undefined, and two tensors equal at one position are a tie."""
    from audee.levels.calls import _undefined

    t = {"a": np.array([1.0, 2.0], np.float32), "b": np.array([1.0, 3.0], np.float32)}
    r = OpGradExecutor(pool, undefined=_undefined()).run(_case("maximum", t, [{"tensor": "a"}, {"tensor": "b"}]))
    assert r.verdict.findings == [] and any("tied values" in u for u in r.undefined), r.undefined


def test_a_wrong_gradient_is_another_bug_than_a_wrong_value():
    """A gradient finding's signature says phase ``gradient``: the same op deviating in its
    value and in its gradient are two bugs (two signatures, two root causes)."""
    from audee.triage.signature import signatures_of

    def finding(tensor):
        return {"kind": Kind.DEVIATION, "backends": ["tensorflow", "torch"],
                "detail": {"pair": "tensorflow|torch", "tensor": tensor, "score": 5.0, "rows": None,
                           "first_layer": None, "own_layers": [], "own": {}}}

    meta = {"seed": "op:celu", "op": "celu", "api": "celu", "mutations": []}
    (grad,) = signatures_of(finding("grad:x"), {"layers": []}, meta)
    (value,) = signatures_of(finding("out0"), {"layers": []}, meta)
    assert grad.phase == "gradient" and value.phase is None and grad.key() != value.key()
    assert grad.api == value.api == "celu"


@pytest.mark.slow
def test_a_backend_whose_autodiff_refuses_the_call_fails_in_phase_gradient(pool):
    """cumprod of a float tensor into int32: every framework calls it, torch's autograd refuses
    an integer result of a tensor that requires a gradient (the call alone runs): a divergent
    acceptance of torch in phase ``gradient``, not a failure of the op."""
    x = np.array([[1.0, 2.0, 3.0]], np.float32)
    r = OpGradExecutor(pool).run(_case("cumprod", {"x": x}, [{"tensor": "x"}], {"axis": -1, "dtype": "int32"}))
    assert r.outcomes["torch"].failure.phase == "gradient", r.outcomes["torch"].failure
    (f,) = [f for f in r.verdict.findings if f.kind == Kind.DIVERGENT_ACCEPTANCE]
    assert f.backends == ["torch"] and "Autograd" in f.detail.errors["torch"].message
