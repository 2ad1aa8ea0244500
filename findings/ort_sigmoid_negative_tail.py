#!/usr/bin/env python3
"""onnxruntime's CPU Sigmoid (MLAS logistic) loses the negative tail: 0 for x <= -18 and
5.96e-8 for x = -16 (exact 1.1e-7), where numpy, TensorFlow, torch and JAX return the
exact value to a few ulps (1.5e-8 at -18, 1.9e-22 at -50).  The absolute error is below
float32's spacing at 0.5, the relative one 100 %.

Keras reaches it through tf2onnx: an LSTM with recurrent_activation "swish" (x * sigmoid(x))
and activation "relu" grows its state by products of gates; a gate near -50 is -1e-20 on
TensorFlow, torch and JAX and -0 on onnxruntime, so a cell state of 2.5e-18 becomes 0 and the
next step's output, +inf on the other three (its exact value 1.4e39 passes float32), is 0.0
on onnxruntime (the api-cpu campaign, rng 3016: LSTM(51, relu, swish), 25 +inf where the
others have 26).

    python ort_sigmoid_negative_tail.py
    # prints REPRODUCED and exits 1 while onnxruntime's Sigmoid returns 0 where the exact value is 1.5e-8 or more

Upstream: known, microsoft/onnxruntime#22557 (open: "Negative output for sigmoid", sigmoid(-18)
= -5.96e-8 on a Mac build) and #26281 (closed as stale: the logistic post-transform losing
precision on large negative inputs).
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

x = np.array([-10.0, -16.0, -18.0, -20.0, -50.0], np.float32)
X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [x.size])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [x.size])
model = helper.make_model(helper.make_graph([helper.make_node("Sigmoid", ["X"], ["Y"])], "sigmoid", [X], [Y]),
                          opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
onnx.checker.check_model(model)
got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
exact = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
print(f"onnxruntime {ort.__version__}")
for v, g, e in zip(x, got, exact):
    print(f"sigmoid({v:6.1f}): onnxruntime {g:.6e}, exact {e:.6e}")
lost = bool(((got <= 0) & (exact >= 1.5e-8)).any())
print("REPRODUCED: onnxruntime's Sigmoid returns 0 (or less) where the exact value is 1.5e-8 or more"
      if lost else "NOT REPRODUCED")
sys.exit(1 if lost else 0)
