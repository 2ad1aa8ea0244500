"""Keras 3.15.1 on TensorFlow: ops.trapezoid(y, axis=a) raises for every negative axis other than
-1.  The TF backend's helper _move_axis_to_last (keras/src/backend/tensorflow/numpy.py,
trapezoid, line 3588) turns a negative axis into `tf.rank(tensor) + axis`, a scalar TENSOR, and then
builds `tf.constant([axis])` from it: `TypeError: Scalar tensor has no len()` (wrapped in a
ValueError).  Positive axes and -1 are right.  NumPy, torch, JAX and Keras' spec accept any axis in
[-ndim, ndim).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_trapezoid_negative_axis.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op trapezoid`: y (2, 1, 1, 2) bfloat16, dx=0.483,
axis=-4; 3 cases).
"""
import sys

import numpy as np
import keras
from keras import ops

y = np.arange(24, dtype="float32").reshape(2, 3, 4) ** 1.5
failed = []
for axis in [-1, -2, -3, 0, 1, 2]:
    ref = np.trapezoid(y, dx=0.5, axis=axis)
    try:
        out = ops.convert_to_numpy(ops.trapezoid(y, dx=0.5, axis=axis))
        err = float(np.abs(out - ref).max() / np.abs(ref).max())
        what, ok = f"shape {out.shape}, max rel err {err:.2g}", out.shape == ref.shape and err < 1e-5
    except Exception as e:  # noqa: BLE001
        what, ok = f"raises {type(e).__name__}: {str(e).splitlines()[0][:70]}", False
    print(f"{keras.backend.backend():10s} trapezoid(y (2, 3, 4), dx=0.5, axis={axis:2d}): {what} "
          f"(numpy shape {ref.shape}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"axis={axis}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
