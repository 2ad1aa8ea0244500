"""TensorFlow 2.21 on the CPU: tf.einsum of float16 tensors sums its products in float16 (the Einsum kernel hands
them to its batch matmul as half), where tf.matmul of the same operands sums in float32 and rounds once.  So a
contraction whose exact value fits float16 gives +inf once a partial sum passes 65504 (40000 + 40000 - 30000:
einsum inf, matmul 49984), and small terms vanish (1 + 8 * 2**-11: einsum 1.0, matmul 1.0039).  Keras'
MultiHeadAttention computes its scores with ops.einsum on TensorFlow: a float16 score just under 65504 becomes
+inf, and the masked softmax after it NaN, where torch, JAX and onnxruntime stay finite.  Eager, oneDNN on and off;
XLA, bfloat16 and float32 right.

    python findings/tf_cpu_einsum_half_accum.py
    # prints REPRODUCED and exits 1 while the bug is there (plain TensorFlow)

Versions: tensorflow 2.21, keras 3.15.1.  Upstream: not found (queries: "tf.einsum float16 overflow CPU
accumulation", "einsum half precision accumulate float32 tensorflow CPU", "MultiHeadAttention float16 NaN
tensorflow einsum overflow", ...); nearest tensorflow/tensorflow#56890 (closed: a float16 reduce_mean on the CPU
overflowing its sum, called expected by a maintainer) and #27544 (add_n summing float16 serially).  Found by audee:
the api-cpu campaign, rng 2915 (MultiHeadAttention in float16 behind a Permute: a score of 64150 exactly, 65587 in
TensorFlow's running half sum).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

found = []
with tf.device("/CPU:0"):
    # the exact sum, 50000, fits float16 (max 65504); the running half sum 80000 does not
    x = tf.constant([[40000.0, 40000.0, -30000.0]], tf.float16)
    w = tf.ones((3, 1), tf.float16)
    e, m = float(tf.einsum("ij,jk->ik", x, w)[0, 0]), float(tf.matmul(x, w)[0, 0])
    print(f"overflow : tf.einsum {e}, tf.matmul {m}, exact 50000")
    if not np.isfinite(e) and np.isfinite(m):
        found.append("tf.einsum float16 overflows where tf.matmul does not")
    # eight terms of 2**-11 each vanish against 1 in a float16 running sum; a float32 one keeps them
    x = tf.constant([[1.0] + [2.0 ** -11] * 8], tf.float16)
    w = tf.ones((9, 1), tf.float16)
    e, m = float(tf.einsum("ij,jk->ik", x, w)[0, 0]), float(tf.matmul(x, w)[0, 0])
    print(f"precision: tf.einsum {e}, tf.matmul {m}, exact {1 + 8 * 2.0 ** -11}")
    if e != m:
        found.append("tf.einsum float16 drops what tf.matmul keeps")
    # the Keras face: attention scores as MultiHeadAttention computes them
    import keras  # noqa: E402

    q = np.array([[[40000.0, 40000.0, -30000.0]]], np.float16)
    k = np.ones((1, 1, 3), np.float16)
    s = float(keras.ops.convert_to_numpy(keras.ops.einsum("btd,bsd->bts", q, k))[0, 0, 0])
    print(f"keras.ops.einsum on {keras.backend.backend()}: {s}")
    if keras.backend.backend() == "tensorflow" and not np.isfinite(s):
        found.append("keras.ops.einsum float16 (TensorFlow backend) overflows")

print(f"tensorflow {tf.__version__}, keras {keras.__version__}")
if found:
    print("REPRODUCED: " + "; ".join(found))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
