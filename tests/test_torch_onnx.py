"""``torch-onnx`` (audee/backends/torch_onnx_backend.py) runs a case with its own batch size.

``torch.export`` keeps the batch axis dynamic only where nothing in the model depends on
its size: a layer that does (an activity regularizer dividing by the batch size, Keras'
recurrent layers) gets a graph fixed to the batch it was traced on.  Traced on a
placeholder batch of 2, seven campaign cases of batch 8 failed in onnxruntime with "Got
invalid dimensions for input: x0 ... Got: 8 Expected: 2" (an audee failure, not the
exporter's).  The export now traces on the case's own inputs, and a graph is kept per input
shapes; a bfloat16 output, which onnxruntime's ``run`` cannot give as numpy, is read as
``ml_dtypes.bfloat16``.
"""
from __future__ import annotations

import numpy as np
import pytest

from audee.backends.pool import Pool
from audee.backends.registry import parse_backends
from audee.backends.torch_onnx_backend import TorchOnnxBackend
from audee.cases.case import TestCase
from audee.engine.execute import Executor
from audee.cases.spec import ModelSpec

REFUSING = "tests.test_torch_onnx:RefusingExport"


class RefusingExport(TorchOnnxBackend):
    """torch-onnx whose exporter refuses every model (a plugin, run in its worker)."""

    name = "refusing-export"

    def export(self, om, shapes=None):
        raise RuntimeError("the exporter refuses this model on purpose")


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> Executor:
    with Pool(parse_backends(f"torch,torch-onnx,{REFUSING}"), tmp_path_factory.mktemp("logs"), timeout=300) as pool:
        assert pool.start() == {}
        yield Executor(pool)


def one_layer(api: str, params: dict, shape: list[int]) -> ModelSpec:
    return ModelSpec.from_json({
        "name": api.lower(), "inputs": [{"name": "x0", "shape": shape, "range": [-2, 2]}],
        "layers": [{"name": "t", "api": api, "params": params, "inputs": ["x0"]}],
        "output": "t", "logits": "t"})


def mine(result) -> list:
    """The findings between torch and torch-onnx (the refusing plugin fails every case)."""
    return [f for f in result.verdict.findings if REFUSING not in f.backends]


def run(executor: Executor, spec: ModelSpec, batch: int, seed: int = 0, weight_seed: int = 0):
    x = np.random.default_rng(seed).uniform(-2, 2, (batch, *spec.inputs[0].shape)).astype(np.float32)
    case = TestCase(f"{spec.name}-{batch}-{weight_seed}", spec, {}, {"x0": x})
    executor.complete_weights(case, weight_seed=weight_seed)
    return executor.run(case)


def test_a_batch_dependent_layer_runs_with_its_own_batch_and_agrees_with_torch(executor):
    """The campaign's case api-ActivityRegularization-v00000 (bfloat16, batch 8): torch.export
    fixes the batch axis, and the run used to fail on a graph of batch 2.  Now batches 8
    and 3 run, agree with torch exactly (an identity in bfloat16), and the bfloat16 output
    comes back as bfloat16."""
    spec = one_layer("ActivityRegularization", {"dtype": "bfloat16"}, [9, 3])
    for batch in (8, 3, 8):
        result = run(executor, spec, batch)
        onnx, torch = result.outcomes["torch-onnx"], result.outcomes["torch"]
        assert onnx.ok, onnx.failure
        assert mine(result) == [], [f.to_json() for f in mine(result)]
        assert onnx.logits.shape == (batch, 9, 3) and str(onnx.logits.dtype) == str(torch.logits.dtype) == "bfloat16"
        np.testing.assert_array_equal(onnx.logits.astype(np.float32), torch.logits.astype(np.float32))


def test_a_dynamic_batch_is_exported_once_for_every_batch_and_weight_set(executor):
    """A Dense layer keeps the batch axis dynamic: one export serves other batch sizes and
    weight sets (no ``convert`` time after the first run), and each agrees with torch."""
    spec = one_layer("Dense", {"units": 4}, [5])
    first = run(executor, spec, 8)
    assert first.phases["torch-onnx"].get("convert", 0) > 0, first.phases
    for batch, weight_seed in ((3, 0), (8, 1), (1, 1)):
        result = run(executor, spec, batch, weight_seed=weight_seed)
        onnx, torch = result.outcomes["torch-onnx"], result.outcomes["torch"]
        assert onnx.ok, onnx.failure
        assert mine(result) == [], [f.to_json() for f in mine(result)]
        np.testing.assert_allclose(onnx.logits, torch.logits, rtol=1e-5, atol=1e-6)
        assert result.phases["torch-onnx"].get("convert", 0) == 0, (batch, weight_seed, result.phases)


def test_an_exporter_failure_is_the_convert_phase_and_is_not_retried(executor):
    """A model the exporter refuses fails in ``convert``, for each weight set, with the
    exporter's message; the refused export is not tried again for the same inputs."""
    spec = one_layer("Dense", {"units": 3}, [2])
    for weight_seed in (0, 1):
        result = run(executor, spec, 8, weight_seed=weight_seed)
        failure = result.outcomes[REFUSING].failure
        assert failure is not None and failure.phase == "convert", failure
        assert "refuses this model on purpose" in failure.message
        if weight_seed:
            assert result.phases.get(REFUSING, {}).get("convert", 0) == 0, result.phases
