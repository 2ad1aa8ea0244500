"""TensorFlow 2.21 (CPU) with XLA (tf.function(jit_compile=True)): tf.image.resize(...,
method='bilinear') -- half-pixel centers, no antialias, what Keras' TF backend uses for
Resizing / UpSampling2D(interpolation='bilinear') and for CenterCrop when the input is
smaller than the target -- returns a wrong value at some output pixels when upsampling by a
non-power-of-two factor: the pixel takes the NEXT input sample instead of the one it sits on
(1x4 -> 1x12 on [1, 4, 9, 16]: output 4 is 9.0 under XLA, 4.0 in eager TF and in the
reference).  Eager TF, tf.function without XLA and TF with oneDNN off all match a numpy
reference of the same definition; only the XLA lowering (tf2xla ResizeBilinear) is off, by
up to a whole input step.  Over input widths 1..8 and output widths 1..24, 13 (in, out)
pairs are wrong (4->12, 4->20, 5->9, 5->11, ..., 8->24); downsampling and 2x/4x upsampling
are right.

audee found it as a deviation of the tensorflow-xla mode on keras.layers.CenterCrop(height=12,
width=8, data_format='channels_first') fed a (3, 4, 12) image: the height 4 is below the target
12, so CenterCrop (documented: "If an image is smaller than the target size, it will be
resized and cropped") calls smart_resize -> a (4, 2) crop resized to (12, 8) -> 4 -> 12.  The
inputs are within the layer's contract; the NaN in another input row of the campaign's case
does not matter (rows with NaN are left out of the comparison, and the script below uses
finite data only).  Separately, XLA spreads a NaN over more output pixels than eager TF (24
-> 32 NaN in that row), the known tensorflow#118382.

Known upstream: tensorflow/tensorflow#118344 (open, "CPU XLA produces wrong results for
tf.image.resize with bilinear interpolation on finite float32 inputs"); also #118467 (open)
and #120242 (closed) with the same title "XLA jit_compile=True produces large numerical
divergence for tf.image.resize bilinear".

    python findings/tf_xla_resize_bilinear.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np
import tensorflow as tf
import keras

tf.get_logger().setLevel("ERROR")  # the retracing warnings of the grid below


def ref_resize_1d(v, out):
    """Bilinear, half-pixel centers, clamped at the edges (tf.image.resize, antialias=False)."""
    n = len(v)
    y = []
    for i in range(out):
        c = max((i + 0.5) * n / out - 0.5, 0.0)
        lo = min(int(np.floor(c)), n - 1)
        hi = min(lo + 1, n - 1)
        f = c - lo
        y.append(v[lo] * (1 - f) + v[hi] * f)
    return np.array(y)


def resize(x, size, xla):
    f = lambda t: tf.image.resize(t, size, method="bilinear")  # noqa: E731
    return (tf.function(f, jit_compile=True) if xla else f)(x).numpy()


bad = False
print("tensorflow", tf.__version__, "keras", keras.__version__)
v = np.array([1.0, 4.0, 9.0, 16.0], np.float32)
x = v.reshape(1, 1, 4, 1)
ref = ref_resize_1d(v.astype(np.float64), 12)
for name, xla in [("eager", False), ("XLA", True)]:
    y = resize(x, (1, 12), xla).ravel()
    err = np.abs(y - ref).max()
    bad |= err > 1e-4
    print(f"tf.image.resize [1,4,9,16] -> 12  {name:5s}: max |y - ref| = {err:.3g}   y[3:6] = {y[3:6].tolist()}")
print(f"{'':33s}reference: y[3:6] = {ref[3:6].round(4).tolist()}")

# The campaign's layer: CenterCrop larger than the input -> smart_resize -> bilinear 4 -> 12.
img = np.random.default_rng(0).normal(size=(2, 3, 4, 12)).astype(np.float32)  # (N, C, H, W)
layer = keras.layers.CenterCrop(height=12, width=8, data_format="channels_first")
e = keras.ops.convert_to_numpy(layer(img))
j = tf.function(lambda t: layer(t), jit_compile=True)(img).numpy()
crop = img[:, :, :, 5:7].astype(np.float64)  # smart_resize's centered (4, 2) crop
r = np.stack([[np.stack([ref_resize_1d(col, 12) for col in ch.T], 1) for ch in im] for im in crop])
r = np.stack([[np.stack([ref_resize_1d(row, 8) for row in ch], 0) for ch in im] for im in r])
print(f"CenterCrop(12, 8, channels_first) on (3, 4, 12): eager max |y - ref| = {np.abs(e - r).max():.3g}, "
      f"XLA max |y - ref| = {np.abs(j - r).max():.3g}")
bad |= np.abs(j - r).max() > 1e-3

wrong = []
for n in range(1, 9):
    for out in range(1, 25):
        w = np.arange(1, n + 1, dtype=np.float32) ** 2
        if np.abs(resize(w.reshape(1, 1, n, 1), (1, out), True).ravel() - ref_resize_1d(w.astype(np.float64), out)).max() > 1e-3:
            wrong.append(f"{n}->{out}")
print(f"XLA wrong on {len(wrong)} of {8 * 24} (in, out) widths: {', '.join(wrong)}")
if bad:
    print("REPRODUCED: XLA's bilinear resize differs from eager TensorFlow and the reference")
    sys.exit(1)
print("NOT REPRODUCED: XLA matches the reference")
