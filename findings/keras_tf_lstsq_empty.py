"""Keras 3.15.1 on TensorFlow: ops.lstsq(a, b) raises when a has no column or no row (shape
(M, 0) or (0, N)); NumPy, torch and JAX return the empty (N, K) solution, or zeros when M == 0.
keras/src/backend/tensorflow/linalg.py, lstsq (lines 229-238): the guard for an empty matrix
tests `a.shape == ()`, which a 2-D `a` never satisfies (JAX's code, which it was ported from,
tests `a.size == 0`), so the SVD branch runs and `s[0]` on the zero singular values fails:
`InvalidArgumentError: slice index 0 of dimension 0 out of bounds. [Op:StridedSlice]`.
Keras documents a as "(M, N)" and the result as "(N,) or (N, K)"; numpy.linalg.lstsq defines the
empty cases.  (jax.numpy handled the same inputs in jax-ml/jax#12957 after jax-ml/jax#12944.)

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_lstsq_empty.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op lstsq`: float32 a (5, 0), b (5, 2); a (2, 0),
b (2,)).
"""
import re
import sys

import numpy as np
import keras
from keras import ops

failed = []
for a_shape, b_shape in [((5, 0), (5, 2)), ((2, 0), (2,)), ((0, 3), (0,)), ((0, 3), (0, 2)), ((3, 2), (3,))]:
    a = np.arange(np.prod(a_shape), dtype="float32").reshape(a_shape) % 5 + np.eye(*a_shape, dtype="float32")
    b = np.ones(b_shape, dtype="float32")
    ref = np.linalg.lstsq(a, b, rcond=None)[0]
    try:
        y = ops.convert_to_numpy(ops.lstsq(a, b))
        ok = y.shape == ref.shape and np.allclose(y, ref, rtol=1e-4, atol=1e-5)
        got = f"shape {y.shape} {np.round(y, 4).tolist()}{'' if ok else '  WRONG'}"
    except Exception as e:
        ok = False
        got = f"raises {type(e).__name__}: {re.sub(r'[{][{].*?[}][}] *', '', str(e)).splitlines()[0][:80]}"
    print(f"{keras.backend.backend():10s} lstsq(a {a_shape}, b {b_shape}): {got} "
          f"(numpy shape {ref.shape} {np.round(ref, 4).tolist()})")
    if not ok:
        failed.append(f"a {a_shape}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
