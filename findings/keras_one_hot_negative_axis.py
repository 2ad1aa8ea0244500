"""Keras 3.15.1 on PyTorch: ops.one_hot with a negative axis other than -1 returns a silently
scrambled tensor.  Keras' symbolic spec (ops/nn.py, OneHot.compute_output_spec, the check added by
keras-team/keras#19470) accepts only axis == -1 or 0 <= axis < ndim(x) and raises "axis must be
-1 or between [0, 3)" otherwise; eager calls skip that check and go straight to the backend:
- torch (keras/src/backend/torch/nn.py, one_hot, lines 827-833) builds its permutation with the
  raw negative axis (`new_axes_order[axis] = -1`, then `range(axis + 1, dims)`): ids (1, 2, 3),
  num_classes 6, axis=-2 -> shape (6, 1, 3, 2), classes on axis 0 and the other axes scrambled;
- TensorFlow raises (tf.one_hot: "Expected axis to be -1 or between [0, 4)"), as the spec does;
- JAX (jax.nn.one_hot) reads it as Python indexing of the output: (1, 2, 6, 3), equal to axis=2.
So the negative axis is outside what Keras' spec accepts, but torch alone answers with garbage
instead of an error.  multi_hot passes its axis to one_hot on torch too.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_one_hot_negative_axis.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there (a backend that raises, or
    # returns the output-indexing result, passes)

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0 raises, JAX 0.10.2 output-indexing).  Found
by audee (op-level fuzzing, `audee fuzz --op one_hot`: axis=-2 on int32 ids (1, 2, 3),
num_classes 6, torch and JAX differ; axis=-4 on (4, 2, 2, 1) ids, TF raises).  Reference: numpy,
the one-hot on the last axis moved to the canonical position of `axis`.
"""
import re
import sys

import numpy as np
import keras
from keras import ops


def ref_one_hot(x, n, axis):
    out = np.eye(n, dtype="float32")[x]
    return np.moveaxis(out, -1, axis if axis >= 0 else axis + out.ndim)


def short(e):
    return re.sub(r"[{][{].*?[}][}] *", "", str(e)).splitlines()[0][:60]


ids = np.array([[[4, 3, 5], [5, 1, 4]]], dtype="int32")  # shape (1, 2, 3)
failed = []
for axis in (-1, 2, 0, -2, -3, -4):
    ref = ref_one_hot(ids, 6, axis)
    try:
        spec = f"spec {tuple(ops.one_hot(keras.KerasTensor(ids.shape, 'int32'), 6, axis=axis).shape)}"
    except ValueError:
        spec = "spec raises"
    try:
        y = ops.convert_to_numpy(ops.one_hot(ids, 6, axis=axis))
        ok = y.shape == ref.shape and np.array_equal(y, ref)
        got = f"shape {y.shape}{'' if ok else '  WRONG (silently)'}"
    except Exception as e:
        ok, got = True, f"raises {type(e).__name__}: {short(e)}"
    print(f"{keras.backend.backend():10s} one_hot(ids (1, 2, 3), 6, axis={axis:2d}): {got} "
          f"(output indexing {ref.shape}; {spec})")
    if not ok:
        failed.append(f"axis={axis}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
