"""Keras 3.15.1 on PyTorch: ops.unique's index outputs are int64 where Keras' symbolic spec
(`Unique.compute_output_spec`: index, inverse and counts KerasTensor(..., dtype="int32")) and the
TF and JAX backends give int32; and return_index=True on an N-D input with axis=None raises.
keras/src/backend/torch/numpy.py, unique (lines 2410-2438): torch.unique's int64 inverse and
counts are passed through without a cast; for return_index it builds
`perm = arange(inverse.size(0))` and scatters it along `inverse` without flattening inverse
first, so a (2, 4) input gives `RuntimeError: Index tensor must have the same number of
dimensions as self tensor` (NumPy flattens: index into x.ravel()).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_unique_indices.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 right; numpy 2.4.6 for the
values).  Found by audee (op-level fuzzing, `audee fuzz --op unique`: return_inverse=True on a
(2, 4) int32 input, inverse int32 on TF and JAX, int64 on torch).  Sibling of the torch top_k
int64 indices (keras_torch_top_k_int64.py), a separate line of code.
"""
import re
import sys

import numpy as np
import keras
from keras import ops

x = np.array([[7, -10, -1, 3], [-3, 9, 5, 5]], dtype="int32")
failed = []
spec = ops.unique(keras.KerasTensor(x.shape, "int32"), return_inverse=True, return_counts=True)
out = ops.unique(x, return_inverse=True, return_counts=True)
ref = np.unique(x, return_inverse=True, return_counts=True)
for name, y, s, r in zip(("values", "inverse", "counts"), out, spec, ref):
    dt = keras.backend.standardize_dtype(y.dtype)
    same = np.array_equal(ops.convert_to_numpy(y), r)
    print(f"{keras.backend.backend():10s} unique(x (2, 4)) {name:8s}: dtype {dt} (spec {s.dtype}), values "
          f"{'equal numpy' if same else 'DIFFERENT from numpy'}")
    if dt != s.dtype or not same:
        failed.append(f"{name} {dt}")
try:
    _, index = ops.unique(x, return_index=True)
    index = ops.convert_to_numpy(index)
    ok = np.array_equal(index, np.unique(x, return_index=True)[1])
    print(f"{keras.backend.backend():10s} unique(x (2, 4), return_index=True): {index.tolist()}"
          f"{'' if ok else '  WRONG'} (numpy {np.unique(x, return_index=True)[1].tolist()})")
except Exception as e:
    ok = False
    print(f"{keras.backend.backend():10s} unique(x (2, 4), return_index=True): raises {type(e).__name__}: "
          f"{re.sub(r'[{][{].*?[}][}] *', '', str(e)).splitlines()[0][:80]}")
if not ok:
    failed.append("return_index on 2-D")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
