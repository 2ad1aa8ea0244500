"""Keras 3.15.1 on TensorFlow 2.21: AdaptiveAverage/MaxPooling{1,2,3}D fail in graph mode
(model.predict, tf.function, tf2onnx conversion) whenever an output_size is 1 or an input
spatial size is 1 -- e.g. AdaptiveAveragePooling1D(1) on a length-2 input:

    ValueError: Negative dimension size caused by subtracting 3 from 2 ...

The TF backend's "two-pool gather" always builds a second VALID pool of window
ceil(L/out) + 1, larger than L when out == 1 or L == 1; it is never gathered from, and eager
TF returns an empty tensor for it (so eager calls work), but graph-mode shape inference rejects
it (tensorflow/tensorflow#127907). torch and jax compute the PyTorch-defined result exactly.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_adaptive_pool_global.py; done
    # prints REPRODUCED and exits 1 on a backend where a case raises or is off the PyTorch-defined
    # result by more than 1e-5 (tensorflow while the bug is there)

Found by audee (API-level fuzzing). Upstream: not reported to keras-team/keras; the TF graph-vs-
eager root is tensorflow/tensorflow#127907 (open).
"""
import math
import re
import sys
import numpy as np
import keras


def ref(x, out, op):  # PyTorch's adaptive pooling along axis 1 (channels_last)
    L = x.shape[1]
    return np.stack([op(x[:, math.floor(i * L / out):math.ceil((i + 1) * L / out)], axis=1)
                     for i in range(out)], axis=1)


x = np.random.default_rng(0).normal(size=(1, 8, 2)).astype("float32")
failed = []
for L, out in [(2, 1), (8, 1), (1, 2), (8, 3)]:
    for cls, op in [(keras.layers.AdaptiveAveragePooling1D, np.mean), (keras.layers.AdaptiveMaxPooling1D, np.max)]:
        xi = x[:, :L]
        model = keras.Sequential([keras.Input((L, 2)), cls(out, data_format="channels_last")])
        try:
            y = model.predict(xi, verbose=0)
            err = np.abs(y - ref(xi, out, op)).max()
            res = f"max |y - ref| = {err:.2g}"
            ok = bool(err <= 1e-5)
        except Exception as e:
            m = re.search(r"Negative dimension size caused by subtracting \d+ from \d+", str(e))
            res = f"{type(e).__name__}: {m.group(0) if m else str(e)[:80]}"
            ok = False
        print(f"{keras.backend.backend():10s} {cls.__name__}({out}) on L={L}: {res}")
        if not ok:
            failed.append(f"{cls.__name__}({out}) on L={L}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: every case computes the PyTorch-defined result")
