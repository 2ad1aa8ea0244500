"""Builds that skip initializer work (issue 13) compute exactly what builds that run every
initializer compute, on each built-in backend: one pool of the four built-ins and, beside
each, a twin plugin that builds the old way (``init_weights = True``)."""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.keras_backends import JaxBackend, TensorflowBackend, TorchBackend
from audee.backends.onnx_backend import OnnxRuntimeBackend
from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.engine.execute import Executor
from audee.cases.spec import weights_key

from tests.test_phases import BUILTIN, case_of, spec_of

pytestmark = pytest.mark.slow  # eight framework workers


class InitTensorflow(TensorflowBackend):
    name = "tensorflow-init"
    init_weights = True


class InitTorch(TorchBackend):
    name = "torch-init"
    init_weights = True


class InitJax(JaxBackend):
    name = "jax-init"
    init_weights = True


class InitOnnxRuntime(OnnxRuntimeBackend):
    name = "onnxruntime-init"
    init_weights = True


TWINS = {"tensorflow": "InitTensorflow", "torch": "InitTorch", "jax": "InitJax", "onnxruntime": "InitOnnxRuntime"}



@pytest.fixture(scope="module")
def pool(tmp_path_factory):
    names = BUILTIN + [f"tests.test_lazy_init:{TWINS[b]}" for b in BUILTIN]
    with Pool(parse_backends(",".join(names)), tmp_path_factory.mktemp("logs"), timeout=300) as p:
        assert p.start() == {}
        yield p


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def test_builds_without_initializers_compute_the_same_bits(pool):
    """Every layer's output, for two weight sets in a row (the second swapped into the
    already built model, on JAX into the executable compiled for the first)."""
    ex = Executor(pool, diagnose=False)
    twin = {b: next(label for label in pool.labels if TWINS[b] in label) for b in BUILTIN}
    spec = spec_of()
    for weight_seed in (1, 2):
        case = case_of(ex, spec, weight_seed)
        got = pool.run(spec, case.weights, weights_key(case.weights), case.inputs, layers=True)
        for b in BUILTIN:
            new, old = got[b], got[twin[b]]
            assert isinstance(new, dict) and isinstance(old, dict), (new, old)
            for layer in spec.topological_order():
                assert _bits(new["layers"][layer]) == _bits(old["layers"][layer]), (b, layer, weight_seed)
