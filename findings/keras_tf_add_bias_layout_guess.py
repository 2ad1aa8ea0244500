"""Keras 3.15.1, TensorFlow 2.21.0 backend (CPU; numpy): keras.ops.add(x, b) with b of shape
(1, C, 1, 1) does not broadcast like numpy when x's last axis also has C values.  The TF backend's
`add` (keras/src/backend/tensorflow/numpy.py) rewrites any add whose second operand squeezes to a
vector into tf.nn.bias_add, and guesses the layout from the shapes: it picks NHWC whenever
x.shape[-1] == C, even though b's non-unit axis is axis 1.  So on x = zeros((1, 3, 2, 3)),
b = [1, 2, 3] as (1, 3, 1, 1), ops.add returns b along the last axis ([[1, 2, 3], ...] per
channel) where numpy / tf.add give channel c the value b[c].

A channels_first Conv2D whose output width equals its filters (Conv2D adds its bias as
ops.add(outputs, reshape(bias, (1, C, 1, 1)))) therefore adds the bias along the width when called
eagerly.  Inside tf.function (and model.predict) the layer happens to come out right: grappler
fuses Conv2D(NCHW) + BiasAdd(data_format=NHWC) into one NCHW fused convolution, dropping the
BiasAdd's own data_format (itself a TF graph-optimizer discrepancy: a bare
tf.nn.bias_add(tf.nn.conv2d(x, k, data_format='NCHW'), b, data_format='NHWC') differs between
eager and tf.function, shown last).  ops.add alone is wrong eagerly and in tf.function.
audee found it with its `channels` equivalence rule on the tensorflow-eager backend.

    python findings/keras_tf_add_bias_layout_guess.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import sys

os.environ["KERAS_BACKEND"] = "tensorflow"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from keras import ops  # noqa: E402


def err(y, ref):
    return float(np.abs(np.asarray(y, np.float64) - ref).max())


if __name__ == "__main__":
    print("keras", keras.__version__, "tensorflow", tf.__version__)
    bad = False
    x = np.zeros((1, 3, 2, 3), np.float32)          # (N, C, H, W) with W == C == 3
    b = np.array([1, 2, 3], np.float32).reshape(1, 3, 1, 1)
    ref = x.astype(np.float64) + b.astype(np.float64)  # numpy broadcasting: channel c gets b[c]
    print("reference x + b, [0, :, 0, :]:", ref[0, :, 0, :].tolist())
    y = ops.convert_to_numpy(ops.add(x, b))
    e = err(y, ref); bad |= e > 0
    print(f"ops.add eager:        max |y - ref| = {e:g} -> {y[0, :, 0, :].tolist()}")
    y = tf.function(lambda u, v: ops.add(u, v))(tf.constant(x), tf.constant(b)).numpy()
    e = err(y, ref); bad |= e > 0
    print(f"ops.add tf.function:  max |y - ref| = {e:g} -> {y[0, :, 0, :].tolist()}")
    print(f"tf.add eager:         max |y - ref| = {err(tf.add(x, b).numpy(), ref):g}")
    x2 = np.zeros((1, 3, 2, 4), np.float32)          # W != C: Keras picks NCHW, right
    e2 = err(ops.convert_to_numpy(ops.add(x2, b)), x2 + b.astype(np.float64))
    print(f"ops.add eager, W=4 != C=3: max |y - ref| = {e2:g}")

    # channels_first Conv2D, kernel 1, zero kernel: the output is the bias alone
    layer = keras.layers.Conv2D(3, 1, data_format="channels_first", kernel_initializer="zeros",
                                bias_initializer=keras.initializers.Constant([1.0, 2.0, 3.0]))
    xin = np.random.default_rng(0).standard_normal((1, 2, 2, 3)).astype(np.float32)  # W = 3 = filters
    layer.build(xin.shape)
    ref_c = np.broadcast_to(np.array([1.0, 2.0, 3.0]).reshape(1, 3, 1, 1), (1, 3, 2, 3))
    y = np.asarray(layer(xin))
    e = err(y, ref_c); bad |= e > 0
    print(f"Conv2D(3, 1, channels_first) eager:       max |y - ref| = {e:g} -> {y[0, :, 0, :].tolist()}")
    y = tf.function(layer)(tf.constant(xin)).numpy()
    print(f"Conv2D(3, 1, channels_first) tf.function: max |y - ref| = {err(y, ref_c):g}")

    # graph mode (model.predict) is wrong too where no NCHW conv + BiasAdd fusion rescues it
    bi = keras.initializers.Constant([1.0, 2.0, 3.0])
    for name, lay, shape in [
            ("Conv2DTranspose(3, 1, channels_first)", keras.layers.Conv2DTranspose(
                3, 1, data_format="channels_first", kernel_initializer="zeros", bias_initializer=bi), (1, 2, 2, 3)),
            ("DepthwiseConv2D(1, channels_first)", keras.layers.DepthwiseConv2D(
                1, data_format="channels_first", depthwise_initializer="zeros", bias_initializer=bi), (1, 3, 2, 3))]:
        m = keras.Sequential([keras.Input(shape[1:]), lay])
        y = m.predict(np.ones(shape, np.float32), verbose=0)
        e = err(y, ref_c); bad |= e > 0
        print(f"{name} model.predict: max |y - ref| = {e:g} -> {y[0, :, 0, :].tolist()}")

    # the TF side: BiasAdd(NHWC) after an NCHW conv, eager vs tf.function
    k = tf.zeros((1, 1, 2, 3)); bb = tf.constant([1.0, 2.0, 3.0])
    f = lambda u: tf.nn.bias_add(tf.nn.conv2d(u, k, 1, "VALID", data_format="NCHW"), bb, data_format="NHWC")
    ref_nhwc = np.broadcast_to(np.array([1.0, 2.0, 3.0]), (1, 3, 2, 3))  # NHWC bias: along the last axis
    print(f"tf.nn.bias_add(NHWC) on an NCHW conv, eager:       max |y - ref(NHWC semantics)| = "
          f"{err(f(tf.constant(xin)).numpy(), ref_nhwc):g}")
    print(f"tf.nn.bias_add(NHWC) on an NCHW conv, tf.function: max |y - ref(NHWC semantics)| = "
          f"{err(tf.function(f)(tf.constant(xin)).numpy(), ref_nhwc):g}")
    if bad:
        print("REPRODUCED: keras.ops.add on TensorFlow adds a (1, C, 1, 1) operand along the last axis when W == C")
        sys.exit(1)
    print("NOT REPRODUCED")
