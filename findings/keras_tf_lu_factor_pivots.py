"""Keras 3.15.1 on TensorFlow: ops.linalg.lu_factor returns the wrong second output, and fails
on a batch.  Keras documents "a tensor of shape (..., M) containing the pivots" and the torch
and JAX backends return LAPACK/SciPy pivots (row i was swapped with row piv[i], 0-based, as
scipy.linalg.lu_factor); keras/src/backend/tensorflow/linalg.py, lu_factor, returns
`tf.math.invert_permutation(p)` of tf.linalg.lu's permutation: a permutation, not pivots
([1, 2, 0] where the pivots are [2, 2, 2]), so lu_solve-style code that applies the swaps
gets another row order.  On a batch (..., M, M), which the docstring allows,
tf.math.invert_permutation raises "invert_permutation expects a 1D vector".  The LU factor
itself agrees with SciPy.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_lu_factor_pivots.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right); scipy
1.17.1 for the reference.  Found by audee (op-level fuzzing, `audee fuzz --op lu_factor`: a
(3, 4, 4) float32 batch, TF raises, torch and JAX return (3, 4, 4) and (3, 4)).  Upstream: not
found (queries: "keras.ops.linalg.lu_factor tensorflow batched invert_permutation expects a 1D
vector", "keras lu_factor tensorflow pivots permutation differ from jax scipy", "keras
lu_factor tensorflow backend returns permutation instead of pivots").
"""
import re
import sys

import numpy as np
import scipy.linalg
import keras
from keras import ops


def short(e):
    """The error's first line without TF's {{function_node ...}} prefix."""
    return re.sub(r"\{\{.*?\}\}\s*", "", str(e)).splitlines()[0][:60]


a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]], dtype="float32")
lu_ref, piv_ref = scipy.linalg.lu_factor(a)
failed = []
lu, piv = ops.linalg.lu_factor(a)
lu, piv = ops.convert_to_numpy(lu), ops.convert_to_numpy(piv)
ok = np.array_equal(piv, piv_ref)
print(f"{keras.backend.backend():10s} 2-D: pivots {piv.tolist()} (scipy {piv_ref.tolist()}){'' if ok else '  WRONG'}; "
      f"max |LU - scipy| = {np.abs(lu - lu_ref).max():.2g}")
if not ok:
    failed.append("2-D pivots")
try:
    lu_b, piv_b = ops.linalg.lu_factor(np.stack([a, a[::-1].copy()]))
    piv_b = ops.convert_to_numpy(piv_b)
    want = np.stack([piv_ref, scipy.linalg.lu_factor(a[::-1])[1]])
    ok = np.array_equal(piv_b, want)
    print(f"{keras.backend.backend():10s} batch (2, 3, 3): pivots {piv_b.tolist()} (scipy {want.tolist()})"
          f"{'' if ok else '  WRONG'}")
except Exception as e:
    ok = False
    print(f"{keras.backend.backend():10s} batch (2, 3, 3): raises {type(e).__name__}: {short(e)}")
if not ok:
    failed.append("batch")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
