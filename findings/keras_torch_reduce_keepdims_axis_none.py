"""Keras 3.15.1 on torch: the reductions amax, amin, max, min, prod, sum, nanprod and ptp ignore
`keepdims=True` when `axis=None`: a (2, 3) input gives a 0-d scalar instead of shape (1, 1).
Each of them takes a separate `axis is None` branch in keras/src/backend/torch/numpy.py
(`torch.amax(x)`, `torch.max(x)`, `torch.prod(x, dtype=...)`, `torch.sum(x)`, `x.max() - x.min()`)
that never passes `keepdim`; nanprod goes through prod.  NumPy (which these follow), Keras'
symbolic spec, and the TensorFlow and JAX backends give (1, 1); mean, std, var, any, all,
nanmax, nanmin, nansum, median on torch are right.  Silent: the rank changes with no error.
Known upstream: keras-team/keras#23535 (merged: sum, prod, max, min, amax, amin) and
keras-team/keras#23571 (merged: ptp and the rest), both after the 3.15.1 release.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_reduce_keepdims_axis_none.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (tensorflow 2.21.0, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, ops-cpu campaign: amax, amin, max, min, nanprod, sum, prod
with axis=None, keepdims=True: "out0:shape" deviation, torch the odd one).
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.arange(6, dtype="float32").reshape(2, 3) - 2.5
failed = []
for name in ["amax", "amin", "max", "min", "prod", "sum", "nanprod", "ptp", "mean", "nanmax"]:
    ref = getattr(np, name)(x, axis=None, keepdims=True)
    y = ops.convert_to_numpy(getattr(ops, name)(x, axis=None, keepdims=True))
    spec = getattr(ops, name)(keras.KerasTensor(x.shape, "float32"), axis=None, keepdims=True).shape
    ok = y.shape == ref.shape and np.allclose(y, ref)
    print(f"{keras.backend.backend():10s} {name:8s}(x (2, 3), axis=None, keepdims=True): shape {y.shape} "
          f"value {y.ravel().tolist()} (numpy {ref.shape} {ref.ravel().tolist()}; spec {spec})"
          f"{'' if ok else '  WRONG'}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
