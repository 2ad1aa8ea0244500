"""The flush probe (:mod:`audee.engine.flush_probe`) on real frameworks: rows of subnormal
values scaled up by 1e38 are zero on TensorFlow and JAX (their CPU kernels flush subnormals by
design) and 0.1 on torch, which keeps them; torch run again with flush-to-zero on gives the
zeros, so a flushed run reproduces the flushing backends' values and not torch's own."""
from __future__ import annotations

import numpy as np
import pytest

from audee.cases.case import Kind, TestCase
from audee.cases.spec import ModelSpec
from audee.triage.rootcause import classify
from audee.triage.signature import FLUSH_REPRODUCES, signatures_of


def _case(x: np.ndarray, meta: dict) -> TestCase:
    spec = ModelSpec.from_json({
        "name": "tiny-scaled", "inputs": [{"name": "x", "shape": [x.shape[1]], "dtype": "float32"}],
        "layers": [{"name": "t", "api": "Rescaling", "params": {"scale": 1e38, "offset": 0.0}, "inputs": ["x"]}],
        "output": "t", "logits": "t"})
    return TestCase("tiny-scaled", spec, {}, {"x": x}, meta=meta)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    x = np.full((3, 4), 0.25, np.float32)
    x[1] = [1e-39, -3e-39, 5e-40, 2e-39]                     # subnormal in float32
    meta = {"special_inputs": [{"input": "x", "row": 1, "kind": "subnormal"}]}
    x2 = x.copy()
    x2[0] = [1e-39, 2e-39, 3e-39, 4e-39]                     # the same values on a row not marked
    with Pool(parse_backends("tensorflow,torch,jax"), tmp_path_factory.mktemp("pool"), timeout=300) as pool:
        assert pool.start() == {}
        ex = Executor(pool)
        return ex.run(_case(x, meta)), ex.run(_case(x2, meta))


def test_a_flushed_run_reproduces_the_flushing_backends_values(results):
    marked, _ = results
    devs = {f.detail.pair: f for f in marked.verdict.findings if f.kind == Kind.DEVIATION}
    assert set(devs) == {"tensorflow|torch", "torch|jax"}, devs
    assert devs["tensorflow|torch"].detail.flush_like == ["tensorflow"]
    assert devs["torch|jax"].detail.flush_like == ["jax"]
    # TensorFlow's and JAX's majority names torch, which keeps the subnormals; the layer's float64
    # result (TensorFlow's, outside torch's pair with JAX) puts torch on it and JAX off it, so each
    # pair's flushing side is odd, and the flush reproduces it: undefined, by design
    for pair, flushing in (("tensorflow|torch", "tensorflow"), ("torch|jax", "jax")):
        (sig,) = signatures_of(devs[pair], marked.case.spec, marked.case.meta)
        assert sig.odd == (flushing,) and FLUSH_REPRODUCES in sig.context, sig
        assert classify(sig)[0] == "undefined"


def test_rows_not_all_subnormal_are_not_probed(results):
    _, unmarked = results
    devs = [f for f in unmarked.verdict.findings if f.kind == Kind.DEVIATION]
    assert devs and all(f.detail.flush_like is None for f in devs)
