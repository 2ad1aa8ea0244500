"""Keras 3.15.1: ops.one_hot with a negative axis other than -1 is silently wrong on PyTorch and
raises on TensorFlow; JAX is right.  Keras documents `axis` as the output axis of the encoding
("-1 represents the last axis"), i.e. Python indexing of the output, as jax.nn.one_hot does:
ids of shape (1, 2, 3), num_classes 6, axis=-2 -> (1, 2, 6, 3), equal to axis=2.
- torch (keras/src/backend/torch/nn.py, one_hot, lines 827-833) builds its permutation with the
  raw negative axis (`new_axes_order[axis] = -1`, then `range(axis + 1, dims)`), so axis=-2
  gives shape (6, 1, 3, 2): the classes land on axis 0 and the other axes are scrambled.
- TF (keras/src/backend/tensorflow/nn.py, one_hot) passes axis to tf.one_hot, which accepts only
  -1 or [0, rank]: `InvalidArgumentError: Expected axis to be -1 or between [0, 4)`.
multi_hot reuses one_hot's axis on both backends.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_one_hot_negative_axis.py; done
    # prints REPRODUCED and exits 1 on tensorflow and torch while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu (JAX 0.10.2 right).  Found by audee
(op-level fuzzing, `audee fuzz --op one_hot`: axis=-2 on int32 ids (1, 2, 3), num_classes 6,
torch and JAX differ; axis=-4 on (4, 2, 2, 1) ids, TF raises).  Reference: numpy, the one-hot
on the last axis moved to the canonical position of `axis`.
"""
import re
import sys

import numpy as np
import keras
from keras import ops


def ref_one_hot(x, n, axis):
    out = np.eye(n, dtype="float32")[x]
    return np.moveaxis(out, -1, axis if axis >= 0 else axis + out.ndim)


ids = np.array([[[4, 3, 5], [5, 1, 4]]], dtype="int32")  # shape (1, 2, 3)
failed = []
for axis in (-1, 2, -2, -3, 0, -4):
    ref = ref_one_hot(ids, 6, axis)
    try:
        y = ops.convert_to_numpy(ops.one_hot(ids, 6, axis=axis))
        ok = y.shape == ref.shape and np.array_equal(y, ref)
        got = f"shape {y.shape}{'' if ok else '  WRONG'}"
    except Exception as e:
        ok = False
        got = f"raises {type(e).__name__}: {re.sub(r'[{][{].*?[}][}] *', '', str(e)).splitlines()[0][:60]}"
    print(f"{keras.backend.backend():10s} one_hot(ids (1, 2, 3), 6, axis={axis:2d}): {got} (expected {ref.shape})")
    if not ok:
        failed.append(f"axis={axis}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("not reproduced")
