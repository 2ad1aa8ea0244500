#!/usr/bin/env python3
"""onnxruntime 1.31's graph optimizations change a cubic Resize's result on an input of +-Inf:
tf2onnx writes a channels_last resize as Transpose -> Resize (cubic, scales) -> Transpose, the
transpose optimizer runs that Resize on the NHWC layout, and that kernel returns +-Inf at some
outputs where the graph run without optimizations, the onnx package's reference evaluator and
TensorFlow return NaN (interpolating +Inf and -Inf with weights of both signs).

Keras reaches it through tf2onnx: UpSampling2D(size=(2, 2), interpolation="bicubic") on a
(3, 16, 8) channels_last input whose row is all +-Inf: 1536 NaN on TensorFlow, torch and JAX,
1515 NaN, 14 +Inf and 7 -Inf on onnxruntime (the api-cpu campaign, rng 2962).

    python ort_resize_cubic_nhwc_inf.py
    # prints REPRODUCED and exits 1 while the optimized graph differs from the unoptimized one; else 0

Upstream: not found (query: "onnxruntime Resize cubic NHWC transpose optimization different result inf
NaN graph optimization level"); the transpose optimizer's Resize handler: microsoft/onnxruntime#9607,
#11825 (the NHWC Resize path), #12815.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

rng = np.random.default_rng(0)
x = np.where(rng.random((1, 3, 16, 8)) < 0.5, np.inf, -np.inf).astype(np.float32)   # NHWC, every value +-Inf
X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3, 16, 8])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 6, 32, 8])
scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, 2.0, 2.0])
nodes = [helper.make_node("Transpose", ["X"], ["xt"], perm=[0, 3, 1, 2]),
         helper.make_node("Resize", ["xt", "", "scales"], ["yt"], mode="cubic", cubic_coeff_a=-0.5,
                          exclude_outside=1, coordinate_transformation_mode="half_pixel"),
         helper.make_node("Transpose", ["yt"], ["Y"], perm=[0, 2, 3, 1])]
model = helper.make_model(helper.make_graph(nodes, "resize", [X], [Y], [scales]),
                          opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
onnx.checker.check_model(model)


def run(level: "ort.GraphOptimizationLevel") -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": x})[0]


def counts(a: np.ndarray) -> str:
    return f"NaN {int(np.isnan(a).sum())}, +Inf {int(np.isposinf(a).sum())}, -Inf {int(np.isneginf(a).sum())}"


with np.errstate(invalid="ignore"):
    ref = ReferenceEvaluator(model).run(None, {"X": x})[0]
default, plain = run(ort.GraphOptimizationLevel.ORT_ENABLE_ALL), run(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}; 1536 outputs of an input of +-Inf")
print(f"onnxruntime, default optimizations: {counts(default)}")
print(f"onnxruntime, optimizations off:     {counts(plain)}")
print(f"onnx reference evaluator:           {counts(ref)}")
differs = bool((np.isnan(default) != np.isnan(plain)).any())
print("REPRODUCED: the optimized graph's cubic Resize gives +-Inf where the graph as written gives NaN"
      if differs else "NOT REPRODUCED")
sys.exit(1 if differs else 0)
