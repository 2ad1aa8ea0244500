"""TensorFlow picks oneDNN's kernels by default only on CPUs with AVX-512 VNNI/BF16 or AMX; on
others (an AVX2 AMD EPYC) its own Eigen kernels compute, with faults of their own.  The
``tensorflow`` backend pins oneDNN on (``audee.backends.info.TF_ONEDNN``), so a case computes
alike on every x86 machine, and ``tensorflow-noonednn`` pins it off: a 1-wide max pooling with
stride 3 and 'same' padding, which Eigen samples from offset 1 (findings row 29's 3-D face), tells
them apart on any CPU."""
from __future__ import annotations

import numpy as np

from audee.cases.case import Kind, TestCase
from audee.cases.spec import ModelSpec
from audee.triage.known import load_known_issues, match_known
from audee.triage.signature import signatures_of


def _strided_pool() -> TestCase:
    spec = ModelSpec.from_json({
        "name": "pool", "inputs": [{"name": "x", "shape": [7, 3, 2, 3]}],
        "layers": [{"name": "t_maxpooling3d", "api": "MaxPooling3D", "inputs": ["x"],
                    "params": {"pool_size": 1, "strides": 3, "padding": "same"}}],
        "output": "t_maxpooling3d", "logits": "t_maxpooling3d"})
    x = np.random.default_rng(0).standard_normal((2, 7, 3, 2, 3)).astype(np.float32)
    return TestCase("strided-pool", spec, {}, {"x": x})


def test_tensorflow_computes_with_onednn_on_every_cpu_and_noonednn_without(tmp_path):
    from audee.backends.pool import Pool
    from audee.backends.registry import parse_backends
    from audee.engine.execute import Executor

    with Pool(parse_backends("tensorflow,torch,tensorflow-noonednn"), tmp_path, timeout=300) as pool:
        assert pool.start() == {}
        states = {name: w.precision_state.get("onednn") for name, w in pool.workers.items()}
        assert states == {"tensorflow": "true", "torch": None, "tensorflow-noonednn": "false"}, states
        result = Executor(pool).run(_strided_pool())
    devs = [f for f in result.verdict.findings if f.kind == Kind.DEVIATION]
    assert sorted(f.detail.pair for f in devs) == ["tensorflow|tensorflow-noonednn", "torch|tensorflow-noonednn"], devs
    for f in devs:
        drawn = [{"layer": "t_maxpooling3d", "param": "padding", "new": "same"}]  # as the generator records it
        (sig,) = signatures_of(f, result.case.spec, {"api": "MaxPooling3D", "mutations": drawn})
        assert sig.odd == ("tensorflow-noonednn",), sig
        assert ("padding", "'same'") in sig.params, sig
        assert match_known(sig, load_known_issues()).id == "tf-conv3d-same-negative-padding", sig
