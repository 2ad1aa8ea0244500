"""TensorFlow 2.21 on the CPU: a float16 average pooling (tf.nn.avg_pool1d / avg_pool2d, Keras' AveragePooling1D
and 2D on TensorFlow) sums each window in float16 and divides after, so a window whose sum passes 65504 gives +inf
where its mean fits float16 (two 40000s: mean 40000, TensorFlow inf).  Eager and tf.function alike, oneDNN on and
off; float32 right.  The TensorFlow twin of Keras' JAX average pooling (findings/keras_jax_avg_pool_half_accum.py)
and of torch's half adaptive_avg_pool3d (pytorch/pytorch#140696); TensorFlow has no float16 AvgPool3D kernel on the
CPU at all.

    python findings/tf_cpu_avg_pool_half_accum.py
    # prints REPRODUCED and exits 1 while the bug is there (plain TensorFlow)

Versions: tensorflow 2.21.  Upstream: not found for the pooling; nearest tensorflow/tensorflow#56890 (closed: a
float16 reduce_mean on the CPU overflowing its sum, which a maintainer called expected, so TensorFlow may see this
one the same way).  Found by audee: the api-cpu campaign, rng 2870 (AveragePooling1D(2) under mixed_float16 after a
Rescaling, rows up to 46958: TensorFlow and JAX +inf at the pool, torch and onnxruntime the mean), seen by the hand
check of a root matched to keras-jax-avg-pool-half-accum.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

x1 = np.full((1, 2, 1), 40000.0, np.float16)
x2 = np.full((1, 2, 2, 1), 20000.0, np.float16)
got = {
    "avg_pool1d eager": tf.nn.avg_pool1d(tf.constant(x1), 2, 2, "VALID").numpy().ravel(),
    "avg_pool1d tf.function": tf.function(lambda t: tf.nn.avg_pool1d(t, 2, 2, "VALID"))(tf.constant(x1)).numpy().ravel(),
    "avg_pool2d eager (2x2 of 20000)": tf.nn.avg_pool2d(tf.constant(x2), 2, 2, "VALID").numpy().ravel(),
}
want = {"avg_pool1d eager": 40000.0, "avg_pool1d tf.function": 40000.0, "avg_pool2d eager (2x2 of 20000)": 20000.0}
for name, value in got.items():
    print(f"{name:32s} float16: {value}  (the mean, exactly: {want[name]})")
print("float32 avg_pool1d:", tf.nn.avg_pool1d(tf.constant(x1.astype(np.float32)), 2, 2, "VALID").numpy().ravel())
bad = [name for name, value in got.items() if not np.isfinite(value.astype(np.float32)).all()]
if bad:
    print("REPRODUCED: a float16 average pooling gives +inf where the mean fits float16:", "; ".join(bad))
    sys.exit(1)
print("NOT REPRODUCED")
