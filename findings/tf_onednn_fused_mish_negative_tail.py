"""TensorFlow 2.21 (CPU, oneDNN on): in a traced graph grappler's oneDNN remapper replaces Keras' mish,
`x * tanh(softplus(x))`, by one fused op, `_MklFusedMish` (tensorflow/tensorflow#54428), which runs oneDNN's
eltwise mish: `x * ((1 + e^x)^2 - 1) / ((1 + e^x)^2 + 1)`.  For x well below 0 the numerator cancels: 1e-4
relative off at x = -9, 1 % at -12, 17 % at -15, and -0 for every x below about -16.6, where mish is a normal
float32 (mish(-17) = -7.04e-7).  Eager TensorFlow, TensorFlow with TF_ENABLE_ONEDNN_OPTS=0, torch, JAX and
onnxruntime (tf2onnx converts the graph before the remapper runs) compute it to an ulp.  Its absolute error stays
below 7.4e-7 on [-30, 30], and oneDNN's own tests exempt mish's negative tail on purpose (benchdnn's eltwise check:
"high relative error, while abs error is still low"), so it is an accuracy limitation, not a bug; a layer that
amplifies absolute errors (an LSTM with mish gates whose cell state grows to 1e14) turns it into a visible
difference between TensorFlow's graph and every other backend.

    python findings/tf_onednn_fused_mish_negative_tail.py
    # prints REPRODUCED and exits 1 while the tf.function result at x = -17 is 0 (or more than 50 % off) where
    # eager TensorFlow is within 1e-6 relative of the float64 value; NOT REPRODUCED (exit 0) otherwise

Versions: tensorflow 2.21.0, numpy 2.4.6, CPU with oneDNN (the default).  Upstream: no TensorFlow or oneDNN
report of the tail found (queries: "oneDNN mish eltwise inaccurate large negative input returns zero",
"tensorflow _MklFusedMish wrong result graph mode", "mish accuracy cancellation (e^x+1)^2 - 1 underflow negative
inputs oneDNN", "tensorflow oneDNN mish fusion numerical difference eager"); the cancellation-free form
x * n / (n + 2), n = e^x (e^x + 2), is discussed in openvinotoolkit/oneDNN#43 and AlexeyAB/darknet#5452, and the
same tail loss in apple/coremltools#2359.
Found by audee: the api-cpu campaign, rng 2905 (an LSTM with recurrent_activation mish inserted in MobileNet-V2:
TensorFlow's graph 0.23 off on one row where the other backends are within 4e-4 of float64), triaged by hand.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# oneDNN on, as on the CPUs where TensorFlow turns it on by default (AVX-512 VNNI/BF16, AMX): on others
# (an AVX2 CPU) TensorFlow 2.21 leaves it off, and its own kernels compute this right
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
import numpy as np
import tensorflow as tf

X = np.array([-5.0, -9.0, -12.0, -15.0, -17.0, -20.0], np.float32)


def mish(v):  # Keras' activations.mish: x * tanh(softplus(x))
    return v * tf.math.tanh(tf.math.softplus(v))


def main() -> int:
    exact = X.astype(np.float64) * np.tanh(np.logaddexp(X.astype(np.float64), 0.0))
    eager = mish(tf.constant(X)).numpy().astype(np.float64)
    graph = tf.function(mish)(tf.constant(X)).numpy().astype(np.float64)
    for x, r, e, g in zip(X, exact, eager, graph):
        print(f"x = {x:6g}: float64 {r: .6e}   eager {e: .6e}   tf.function {g: .6e}")
    at = int(np.flatnonzero(X == -17.0)[0])
    eager_ok = abs(eager[at] - exact[at]) <= 1e-6 * abs(exact[at])
    graph_off = abs(graph[at] - exact[at]) > 0.5 * abs(exact[at])
    if eager_ok and graph_off:
        print(f"REPRODUCED: tf.function's mish({X[at]:g}) = {graph[at]:.3e}, float64 and eager {exact[at]:.3e}")
        return 1
    print("NOT REPRODUCED: the traced graph's mish keeps its negative tail (or eager TensorFlow does not)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
