"""NaN/-Inf in max pooling, Keras 3.15.1.  GlobalMaxPooling{1,2,3}D: TensorFlow 2.21, torch
2.13 and JAX 0.10.2 AGREE (tf.reduce_max propagates NaN on CPU) -- the odd one out in the
campaign is onnxruntime 1.31, whose CPU ReduceMax (what tf2onnx makes of reduce_max) keeps a NaN
only when it comes first in the reduced row ([1, nan, 2, 3] -> 3).  AdaptiveMaxPooling{1,2,3}D
(output_size > 1; output_size 1 cannot be traced on TF, see keras_tf_adaptive_pool_global.py):
Keras' TF backend builds it from tf.nn.pool(MAX), so TensorFlow drops NaN and gives -3.4e38 for
an all-NaN or all--Inf window -- the known TF max-pool bug -- where torch and JAX return NaN /
-Inf; onnxruntime's converted graph keeps NaN only in some positions (order-dependent).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python maxpool_nan_patterns.py; done
    (the tensorflow run also converts both layers with tf2onnx and runs them in onnxruntime)
    # prints REPRODUCED and exits 1 where a result's NaN/-Inf pattern departs from numpy's
    # reference (tensorflow: its AdaptiveMax and onnxruntime's GlobalMax, while the bugs are there)

Found by audee (NaN oracle on GlobalMaxPooling*D and AdaptiveMaxPooling2D).  Upstream: known --
ReduceMax: microsoft/onnxruntime#10514 (open); TF max pooling: tensorflow/tensorflow#2501
(closed), keras-team/keras#16158 (closed).
"""
import os
import sys
import numpy as np
import keras

nan, inf = np.nan, np.inf
rows = [[nan, 1, 2, 3], [1, nan, 2, 3], [nan, nan, -inf, -inf]]
x = np.array(rows, "float32")[:, :, None]  # (3 rows, length 4, 1 channel)
r = np.array(rows)
refs = {"GlobalMaxPooling1D": r.max(1), "AdaptiveMaxPooling1D(2)": np.stack([r[:, :2].max(1), r[:, 2:].max(1)], 1).ravel()}
print("rows:", rows, "\nreference  GlobalMax:", refs["GlobalMaxPooling1D"].tolist(), " Adaptive(2):", refs["AdaptiveMaxPooling1D(2)"].tolist())
layers = {"GlobalMaxPooling1D": keras.layers.GlobalMaxPooling1D(), "AdaptiveMaxPooling1D(2)": keras.layers.AdaptiveMaxPooling1D(2)}
failed = []


def check(who, name, y):
    """Print a result; a NaN/-Inf pattern or value other than the reference's is a failure."""
    y = np.asarray(y, "float64").ravel()
    ok = np.array_equal(y, refs[name], equal_nan=True)
    print(f"{who:11s} {name:24s} {y.tolist()}{'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"{who} {name}")


for name, layer in layers.items():
    check(keras.backend.backend(), name, keras.ops.convert_to_numpy(layer(x)))
if keras.backend.backend() == "tensorflow":
    import logging
    import tensorflow as tf, tf2onnx, onnxruntime as ort
    logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
    for name, layer in layers.items():
        fn = tf.function(lambda t: layer(t))
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=[tf.TensorSpec((None, 4, 1), "float32", name="x")], opset=15)
        y = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        check("onnxruntime", name, y)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: differs from numpy's NaN/-Inf: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: every result equals numpy's, NaN and -Inf included")
