"""Convert small models with tf2onnx's default (a graph copy before each optimizer pass)
and with :func:`audee.backends.onnx_backend.convert_function` (no copies), in a process of
its own: ``python -m tests.tf2onnx_copies [--failing-pass]`` prints one JSON object per
model, ``{"default": ..., "audee": ...}``, each the graph's nodes (op type and attributes,
names left out: tf2onnx numbers them per process) and onnxruntime's outputs.
``--failing-pass`` first adds an optimizer pass that always raises, which the default
skips with a warning.  Run by ``tests/test_onnx_bridge.py``, so pytest never imports keras.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402

from audee.backends.onnx_backend import OnnxRuntimeBackend, convert_function  # noqa: E402
from audee.cases.spec import ModelSpec  # noqa: E402
from tests.helpers import tiny_cnn  # noqa: E402


def batchnorm_mlp() -> ModelSpec:
    """Dense, BatchNormalization, Activation: a graph tf2onnx's passes fold and fuse."""
    return ModelSpec.from_json({
        "name": "bn_mlp", "inputs": [{"name": "x", "shape": [6], "range": [-1, 1]}],
        "layers": [{"name": "d", "api": "Dense", "params": {"units": 5}, "inputs": ["x"]},
                   {"name": "bn", "api": "BatchNormalization", "params": {}, "inputs": ["d"]},
                   {"name": "act", "api": "Activation", "params": {"activation": "tanh"}, "inputs": ["bn"]},
                   {"name": "t", "api": "Reshape", "params": {"target_shape": [5, 1]}, "inputs": ["act"]},
                   {"name": "p", "api": "Permute", "params": {"dims": [2, 1]}, "inputs": ["t"]},
                   {"name": "f", "api": "Flatten", "params": {}, "inputs": ["p"]}],
        "output": "f", "logits": "f"})


class FailingPass:
    """An optimizer pass that always raises (tf2onnx's passes are classes, called as ``optimize``)."""

    graph_been_opt = False

    def optimize(self, graph, iteration):
        raise RuntimeError("this pass always fails")


def describe(proto) -> dict:
    import onnxruntime as ort

    nodes = [[n.op_type, sorted([a.name, a.i, round(a.f, 7), list(a.ints), list(a.floats)] for a in n.attribute)]
             for n in proto.graph.node]
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feed = {i.name: rng.standard_normal([d.dim_value or 3 for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in proto.graph.input}
    outs = hashlib.sha256(b"".join(np.asarray(o).tobytes() for o in session.run(None, feed))).hexdigest()
    return {"nodes": nodes, "outputs": outs}


def main(argv: list[str]) -> None:
    import tf2onnx
    import tf2onnx.optimizer

    if "--failing-pass" in argv:
        tf2onnx.optimizer._optimizers = {"always_fails": FailingPass, **tf2onnx.optimizer._optimizers}
    backend = OnnxRuntimeBackend("cpu")
    for spec in (tiny_cnn(), batchnorm_mlp()):
        fn, sig, _ = backend.build(spec).conversion
        default, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=backend.opset)
        print(json.dumps({"model": spec.name, "default": describe(default),
                          "audee": describe(convert_function(fn, sig, backend.opset)),
                          "env_left": os.environ.get("TF2ONNX_CATCH_ERRORS")}))


if __name__ == "__main__":
    main(sys.argv[1:])
