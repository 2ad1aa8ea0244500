"""Keras 3.15.1 on PyTorch: ops.count_nonzero(x, axis) returns the TRANSPOSE of the right result
whenever the result has 2 or more dimensions.  The torch backend
(keras/src/backend/torch/numpy.py, count_nonzero, line 657) returns
`torch.count_nonzero(x, dim=axis).T`; `.T` reverses all dimensions, so a (1, 4, 2) input counted
along axis -1 gives (4, 1) instead of (1, 4), and a (2, 3, 4) input along axis 0 gives (4, 3)
instead of (3, 4) (values transposed, silently when the result is square).  NumPy, TF, JAX and
Keras' symbolic spec give the reduced shape.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_count_nonzero_transpose.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (tensorflow 2.21.0, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op count_nonzero`: bool (1, 4, 2), axis=-1, torch
shape (4, 1), TF/JAX (1, 4); 5 cases).
"""
import sys

import numpy as np
import keras
from keras import ops

rng = np.random.default_rng(0)
failed = []
for shape, axis in [((1, 4, 2), -1), ((2, 3, 4), 0), ((3, 3, 2), 2), ((5, 6), 0), ((2, 3, 4), (0, 1))]:
    x = (rng.integers(0, 3, shape) == 0)
    ref = np.count_nonzero(x, axis=axis)
    y = ops.convert_to_numpy(ops.count_nonzero(x, axis=axis))
    spec = ops.count_nonzero(keras.KerasTensor(shape, "bool"), axis=axis).shape
    ok = y.shape == ref.shape and np.array_equal(y, ref)
    print(f"{keras.backend.backend():10s} count_nonzero(x {shape}, axis={axis}): shape {y.shape} "
          f"{y.tolist() if y.size <= 9 else ''} (numpy {ref.shape} {ref.tolist() if ref.size <= 9 else ''}; "
          f"spec {spec}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"{shape} axis={axis}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
