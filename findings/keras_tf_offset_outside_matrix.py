"""Keras 3.15.1 on TensorFlow: ops.eye, ops.tril, ops.triu and ops.diagonal fail (or, for eye,
return the wrong shape) when the diagonal offset k lies outside the matrix, where NumPy, torch and
JAX return the all-zero / empty result NumPy defines:

    eye(1, 1, k=-2)              numpy [[0]]            TF InvalidArgumentError (Fill: Dimension -1 must be >= 0)
    eye(5, 1, k=-3)              numpy (5, 1), 1 at [3]  TF returns shape (6, 2), silently
    tril(x (4, 1), k=2)          numpy x                TF InvalidArgumentError (MatrixBandPart num_upper)
    triu(x (1, 4), k=-2)         numpy x                TF InvalidArgumentError (MatrixBandPart num_lower)
    diagonal(ones (3, 3), 5)     numpy shape (0,)       TF InvalidArgumentError (MatrixDiagPartV3 lower_diag_index)

keras/src/backend/tensorflow/numpy.py: eye (line 3677) pads tf.eye(min(M - k, N + k)) without
clamping the block size at 0 or the pads at the matrix bounds; tril (3327) / triu (3350) pass k
straight to tf.linalg.band_part, which requires |k| <= the matrix size; diagonal (1426-1441)
replaces an out-of-range input by a (..., rows, 0) zeros tensor but still calls
tf.linalg.diag_part(x, k=offset) on it, which rejects the offset.  NumPy defines every k.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_offset_outside_matrix.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 equal numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op`: eye(1, M=1, k=-2) and eye(5, M=1, k=-3),
tril(k=2) of a (4, 1) int32 input, diagonal(offset=-2, axis1=2, axis2=-3) of a (4, 2, 1) input).
"""
import re
import sys

import numpy as np
import keras
from keras import ops


def short(e):
    """The first line of an error, without TF's {{function_node ...}} prefix."""
    return re.sub(r"\{\{.*?\}\}\s*", "", str(e)).splitlines()[0][:80]


x41 = np.array([[0], [8], [-2], [-7]], dtype="int32")
cases = [
    ("eye(1, 1, k=-2)", lambda m: m.eye(1, 1, k=-2)),
    ("eye(5, 1, k=-3)", lambda m: m.eye(5, 1, k=-3)),
    ("eye(2, 2, k=3)", lambda m: m.eye(2, 2, k=3)),
    ("tril(x (4, 1), k=2)", lambda m: m.tril(x41, k=2)),
    ("triu(x (1, 4), k=-2)", lambda m: m.triu(x41.T, k=-2)),
    ("diagonal(ones (3, 3), offset=5)", lambda m: m.diagonal(np.ones((3, 3), "float32"), 5)),
    ("diagonal(x (4, 2, 1), -2, 2, -3)",
     lambda m: m.diagonal(np.arange(8, dtype="float32").reshape(4, 2, 1), -2, 2, -3)),
]
failed = []
for name, f in cases:
    ref = f(np)
    try:
        y = ops.convert_to_numpy(f(ops))
        ok = y.shape == ref.shape and np.array_equal(y, ref)
        got = f"shape {y.shape}" + ("" if ok else f" {y.tolist()}  WRONG")
    except Exception as e:
        ok, got = False, f"raises {type(e).__name__}: {short(e)}"
    print(f"{keras.backend.backend():10s} {name:34s} numpy shape {ref.shape}; got {got}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
