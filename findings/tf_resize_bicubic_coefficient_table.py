"""TensorFlow 2.21 (CPU): tf.image.resize(method='bicubic', antialias=False) is off the exact Keys cubic (a = -0.5,
half-pixel centres, taps outside the image dropped and the weights renormalised) by up to about 1e-3 of the value
range.  The cause is the kernel's lookup table.  tensorflow/core/kernels/image/resize_bicubic_op.cc does not
evaluate the kernel at the sample's fractional offset.  It builds a table once (InitCoeffsTable(-0.5f): kTableSize
= 1 << 10, so offsets 0/1024 .. 1024/1024) and, in GetWeightsAndIndices, reads the four weights at
`lrintf(delta * kTableSize)`: the offset rounded to the nearest 1/1024.  jax.image.resize, onnxruntime's Resize
(cubic) and NumPy with exact weights agree with each other to about 1e-6, so where all of them run TensorFlow is
the odd one.  Keras' Resizing and UpSampling2D (interpolation='bicubic', no antialias) on the TensorFlow backend
call this op.  It is a speed/precision trade-off the kernel makes on purpose, not a bug.  The table's error is
small, but on ordinary inputs it goes over audee's float32 deviation tolerance (rtol 1e-3).

The script resizes a fixed float32 image (5x6 -> 7x13, values in [0, 1]) with tf.image.resize and compares the
result with two float64 NumPy models of the same definition: (a) exact weights, and (b) the table model, the
same weights with the offset rounded to 1/1024.

    python findings/tf_resize_bicubic_coefficient_table.py
    # prints REPRODUCED and exits 1 while TensorFlow is more than 1e-4 of the range off the exact cubic and
    # within 1e-5 of the table model; NOT REPRODUCED (exit 0) otherwise

Versions: tensorflow 2.21.0, numpy 2.4.6, CPU.  Upstream: no report of the table's error found (queries:
"tf.image.resize bicubic coefficient table precision differs from exact cubic", "ResizeBicubic kTableSize 1024
lookup table inaccurate weights", "tensorflow bicubic resize differs from jax.image.resize small numerical
difference 1e-3", "tf2onnx ResizeBicubic cubic onnxruntime output mismatch tensorflow small error", "keras Resizing
bicubic tensorflow jax backend results differ slightly tolerance test").  In jax-ml/jax#15768 (open), a maintainer
says that Pillow, JAX and TensorFlow "all agree (almost exactly)"; the "almost" is this.
Found by audee: the api-cpu campaign, rngs 2837 and 2874 (a Resizing / UpSampling2D bicubic deviation in which
TensorFlow was the odd backend against JAX and onnxruntime), triaged by hand.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

TABLE = 1024  # kTableSize in resize_bicubic_op.cc


def keys(t, a=-0.5):  # Keys' cubic convolution kernel at distance |t|
    t = abs(t)
    if t <= 1:
        return ((a + 2) * t - (a + 3)) * t * t + 1
    if t < 2:
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return 0.0


def weights(n_in, n_out, table):
    """Rows: output samples; half-pixel centres, taps outside [0, n_in) dropped, the rest renormalised."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = (i + 0.5) * n_in / n_out - 0.5
        base = int(np.floor(c))
        delta = c - base
        if table:  # the kernel's lookup: the offset rounded to the nearest 1/1024
            delta = np.rint(delta * TABLE) / TABLE
        for k in range(-1, 3):
            if 0 <= base + k < n_in:
                m[i, base + k] = keys(delta - k)
        m[i] /= m[i].sum()
    return m


def reference(x, size, table):
    h, w = x.shape
    return weights(h, size[0], table) @ x.astype(np.float64) @ weights(w, size[1], table).T


print("tensorflow", tf.__version__, "numpy", np.__version__)
x = np.random.default_rng(7).uniform(size=(5, 6)).astype(np.float32)
size = (7, 13)
y = tf.image.resize(x[None, :, :, None], size, method="bicubic", antialias=False).numpy()[0, :, :, 0]
exact = reference(x, size, table=False)
table = reference(x, size, table=True)
span = float(exact.max() - exact.min())
off_exact = float(np.abs(y - exact).max()) / span
off_table = float(np.abs(y - table).max()) / span
print(f"{x.shape} -> {size}, range {span:.4f}: max |TF - exact Keys| / range = {off_exact:.3g}, "
      f"max |TF - 1/1024 table model| / range = {off_table:.3g}")
if off_exact > 1e-4 and off_table <= 1e-5:
    print(f"REPRODUCED: TensorFlow's bicubic resize is {off_exact:.2g} of the range off the exact Keys cubic and "
          f"{off_table:.2g} off the same cubic read from a table of offsets rounded to 1/{TABLE}")
    sys.exit(1)
print("NOT REPRODUCED: TensorFlow's bicubic resize is not the 1/1024-table model off the exact cubic")
sys.exit(0)
