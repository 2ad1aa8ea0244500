#!/usr/bin/env python3
"""onnxruntime 1.31's CPU Resize (mode linear, half_pixel) spreads a NaN into the output row
before it along an axis of scale 1: there each output sample sits exactly on an input sample
and its neighbour's weight is 0, but the kernel still adds 0 * NaN.  The onnx package's
reference evaluator and TensorFlow's tf.image.resize keep the NaN to its own row.

Keras reaches it through tf2onnx: UpSampling2D(interpolation="bilinear") and Resizing
(bilinear) become an ONNX Resize; an UpSampling2D with size (1, 3) on a (3, 16, 1)
channels_first input holding one NaN gives 3 NaN on TensorFlow, torch and JAX and 6 on
onnxruntime (the api-cpu campaign, rng 2957).

    python ort_resize_linear_nan_neighbor.py
    # prints REPRODUCED and exits 1 while onnxruntime's NaN reaches the row before; else 0

Upstream: not found (queries: "onnxruntime Resize linear NaN propagates to neighboring pixel
zero weight", "onnxruntime Resize bilinear NaN input spreads adjacent output row CPU upsample").
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

x = np.arange(5, dtype=np.float32).reshape(1, 1, 5, 1)
x[0, 0, 2, 0] = np.nan                                        # one NaN, row 2
X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 5, 1])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1, 5, 3])
scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, 1.0, 3.0])   # H kept, W x3
node = helper.make_node("Resize", ["X", "", "scales"], ["Y"], mode="linear",
                        coordinate_transformation_mode="half_pixel")
model = helper.make_model(helper.make_graph([node], "resize", [X], [Y], [scales]),
                          opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
onnx.checker.check_model(model)


def nan_rows(y: np.ndarray) -> list[int]:
    return sorted({int(i) for i in np.argwhere(np.isnan(y[0, 0]))[:, 0]})


got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
ref = ReferenceEvaluator(model).run(None, {"X": x})[0]
print(f"onnxruntime {ort.__version__}, onnx {onnx.__version__}; input rows {x[0, 0, :, 0]}")
print(f"rows holding NaN: onnxruntime {nan_rows(got)}, onnx reference {nan_rows(ref)}")
print(f"row 1: onnxruntime {got[0, 0, 1]}, onnx reference {ref[0, 0, 1]}")
leak = bool(np.isnan(got[0, 0, 1]).any()) and not np.isnan(ref[0, 0, 1]).any()
print("REPRODUCED: onnxruntime's linear Resize spreads a NaN into the row before it" if leak else "NOT REPRODUCED")
sys.exit(1 if leak else 0)
