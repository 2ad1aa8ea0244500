"""Keras 3.15.1 on TensorFlow: ops.categorical_crossentropy(target, output, from_logits=True,
axis=a) raises for any negative axis other than -1 (`InvalidArgumentError: Requires start <=
limit when delta > 0: 0/-2 [Op:Range]`).  The TF backend (keras/src/backend/tensorflow/nn.py,
categorical_crossentropy) hands the axis unchanged to tf.nn.softmax_cross_entropy_with_logits,
whose axis-to-end transpose builds tf.range(axis) and so only works for -1 or a non-negative
axis (tf.nn.softmax had the same bug, fixed in 2017: tensorflow/tensorflow#14916).  The same
axis given as a non-negative number works, and so does from_logits=False; torch and JAX accept
every axis.  Keras' docstring: "axis: (optional) The axis along which the categorical
cross-entropy is computed. Default to -1"; keras.losses.categorical_crossentropy and the
CategoricalCrossentropy loss go through the same call.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_cce_negative_axis.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4).
Found by audee (op-level fuzzing, `audee fuzz --op categorical_crossentropy`: (5, 4, 5, 3)
float16 with axis=-3 and (4, 1, 1, 3) bfloat16 with axis=-4, from_logits=True).
"""
import sys

import numpy as np
import keras
from keras import ops

rng = np.random.default_rng(0)
target = rng.random((2, 3, 4)).astype("float32")
logits = rng.normal(size=(2, 3, 4)).astype("float32")


def reference(axis):
    lse = np.log(np.exp(logits).sum(axis, keepdims=True))
    return -(target * (logits - lse)).sum(axis)


failed = []
for name, fn, axis in [
    ("ops.categorical_crossentropy  axis=-1", ops.categorical_crossentropy, -1),
    ("ops.categorical_crossentropy  axis=-2", ops.categorical_crossentropy, -2),
    ("ops.categorical_crossentropy  axis=-3", ops.categorical_crossentropy, -3),
    ("ops.categorical_crossentropy  axis= 1", ops.categorical_crossentropy, 1),
    ("losses.categorical_crossentropy axis=-2", keras.losses.categorical_crossentropy, -2),
]:
    ref = reference(axis)
    try:
        y = ops.convert_to_numpy(fn(target, logits, from_logits=True, axis=axis))
        err = float(np.abs(y - ref).max())
        ok = y.shape == ref.shape and err < 1e-5
        got = f"shape {y.shape}, max |y - ref| {err:.2g}"
    except Exception as e:  # noqa: BLE001 - the failure is what we show
        ok, got = False, f"raises {type(e).__name__}: {str(e).splitlines()[0][-70:]}"
    print(f"{keras.backend.backend():10s} {name} (from_logits=True): {got} (numpy shape {ref.shape})"
          f"{'' if ok else '  WRONG'}")
    if not ok:
        failed.append(name.split()[-1] if "ops." in name else name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
