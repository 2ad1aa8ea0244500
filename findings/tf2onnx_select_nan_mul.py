"""tf2onnx 1.17 (TensorFlow 2.21, Keras 3.15, onnxruntime 1.31, opset 15): tf.where (TF
Select/SelectV2) on floats is converted to arithmetic, Cast(cond) * x + Cast(!cond) * y
(tf2onnx/onnx_opset/controlflow.py Select.version_9: "Mul/Add ops are faster than Where op"),
not to ONNX Where, unless a heuristic sees the select guarding NaN/Inf (IsNaN/IsInf
conditions, constant NaN/Inf branches).  So a NaN or an Inf in the branch NOT taken leaks into
the result (0 * NaN = NaN, 0 * Inf = NaN).  Keras' TF backend writes hard_shrink, soft_shrink
(and threshold) with tf.where, so the converted activations turn values TF maps to 0 or +-Inf
into NaN:  hard_shrink(NaN) = 0 in TF, NaN in onnxruntime; soft_shrink(+-Inf) = +-Inf in TF,
NaN in onnxruntime.  The reference is numpy's np.where, which TF matches.

audee saw it as a NaN-pattern difference on ConvLSTM1D(activation='hard_shrink',
recurrent_activation='soft_shrink') (nan-pair-ConvLSTM1D-dc11dbd0): its unbounded gates drive
the cell state to Inf/NaN within 16 steps (a float64 numpy reference overflows too), TF's
where-based activations map the NaN gates to 0 so TF's output stays finite (all zeros), while
onnxruntime and OpenVINO -- both fed tf2onnx's graph -- return 315 NaN.  Forcing tf2onnx to
emit Where for its Select/SelectV2 nodes (handles_nan=True) makes onnxruntime's output of that
case finite and equal to TF's within 6e-7 (relative).  The input is finite but the model
overflows: the trigger is an overflow, the difference is the converter's.

Known: the mul/add lowering and its NaN/Inf problem are onnx/tensorflow-onnx#1988 (closed,
patched for one pattern by #2035), #1659 (closed; #1663 improved the NaN detection), and the
open pull request onnx/tensorflow-onnx#2411 (the tf.where(tf.math.is_inf(x), ...) pattern);
the Where-avoidance dates from tensorflow-onnx#1199.  The Keras-activation trigger is not
reported.

    python findings/tf2onnx_select_nan_mul.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
import logging

import numpy as np
import keras
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
x = np.array([[np.nan, np.inf, -np.inf, 0.3, 2.0, -2.0]], np.float32)
REF = {"hard_shrink": np.where(np.abs(x) > 0.5, x, 0.0),
       "soft_shrink": np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0.0)),
       "tf.where(x > 0, x, 0)": np.where(x > 0, x, 0.0)}
print("input", x.ravel().tolist(), f"(tensorflow {tf.__version__}, tf2onnx {tf2onnx.__version__}, onnxruntime {ort.__version__})")
bad = False
for name, ref in REF.items():
    if name.startswith("tf."):  # the raw op, as a tf.function
        fn = tf.function(lambda t: tf.where(t > 0, t, tf.zeros_like(t)))
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=[tf.TensorSpec((None, 6), tf.float32, name="x")], opset=15)
        y_tf = fn(x).numpy()
    else:
        inp = keras.Input((6,))
        model = keras.Model(inp, keras.layers.Activation(name)(inp))
        proto, _ = tf2onnx.convert.from_keras(model, input_signature=[tf.TensorSpec((None, 6), tf.float32, name="x")], opset=15)
        y_tf = model(x).numpy()
    ops = sorted({n.op_type for n in proto.graph.node})
    y_ort = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    same = lambda a: np.array_equal(a, ref, equal_nan=True)  # noqa: E731
    bad |= not same(y_ort)
    print(f"{name}: reference {ref.ravel().tolist()}\n"
          f"    tensorflow  {y_tf.ravel().tolist()} {'(= reference)' if same(y_tf) else '(DIFFERS)'}\n"
          f"    onnxruntime {y_ort.ravel().tolist()} {'(= reference)' if same(y_ort) else '(DIFFERS)'}   ONNX ops: {', '.join(ops)}")
if bad:
    print("REPRODUCED: tf2onnx's Select lowering (Mul/Add) lets NaN/Inf of the branch not taken into the result")
    sys.exit(1)
print("NOT REPRODUCED: onnxruntime matches the reference")
