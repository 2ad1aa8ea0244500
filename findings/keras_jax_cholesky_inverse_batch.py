"""Keras 3.15.1 on JAX: ops.linalg.cholesky_inverse of a batch of factors, shape (B, M, M), is
wrong: it raises when B != M and returns an (M, M) result (wrong shape and values) when B == M.
Keras documents x as `(..., M, M)` and the result as `(..., M, M)`; TF and torch compute it per
matrix.  keras/src/backend/jax/linalg.py, cholesky_inverse (lines 29-36):
`identity = jnp.eye(M)` is passed to jax.scipy.linalg.solve_triangular(a, identity) with a of
rank 3 and b of rank 2, which scipy's convention reads as a batch of right-hand-side VECTORS (one
per batch matrix) -- B == M gives (M, M) solutions of one vector each, B != M `Incompatible
shapes for broadcasting`; then `jnp.transpose(inv_chol)` reverses every axis instead of the last
two.  The 2-D case is right.  (The numpy backend has the same code.)

Every backend reads x as the Cholesky FACTOR (L, or U with upper=True) and returns
inv(L @ L^T) (inv(U^T @ U)), as torch.cholesky_inverse does; that is what is checked here.
(The docstring, "Computes the inverse of a symmetric positive-definite matrix", does not say
so: a documentation gap common to all backends, not this bug.)

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_jax_cholesky_inverse_batch.py; done
    # prints REPRODUCED and exits 1 on jax while the bug is there

Versions: keras 3.15.1, jax 0.10.2 (tensorflow 2.21.0, torch 2.13.0+cpu right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op cholesky_inverse`: float32 factors of shape
(5, 5, 5), (1, 4, 4), (3, 1, 1) -> JAX deviates; (5, 4, 4), (3, 5, 5), (0, 3, 3) -> JAX raises).
"""
import re
import sys

import numpy as np
import keras
from keras import ops

rng = np.random.default_rng(0)


def factors(shape):
    """Well-conditioned lower-triangular factors: diagonal in [1, 2], small off-diagonal."""
    *batch, m, _ = shape
    l = np.tril(rng.uniform(-0.3, 0.3, size=shape))
    idx = np.arange(m)
    l[..., idx, idx] = rng.uniform(1.0, 2.0, size=(*batch, m))
    return l.astype("float32")


failed = []
for shape in [(3, 3), (2, 3, 3), (3, 3, 3), (1, 3, 3)]:
    for upper in (False, True):
        l = factors(shape)
        f = np.swapaxes(l, -1, -2) if upper else l          # what the op is given
        a = np.swapaxes(f, -1, -2) @ f if upper else f @ np.swapaxes(f, -1, -2)
        ref = np.linalg.inv(a.astype("float64"))
        try:
            y = ops.convert_to_numpy(ops.linalg.cholesky_inverse(f, upper=upper))
            ok = y.shape == ref.shape and np.allclose(y, ref, rtol=1e-4, atol=1e-5)
            err = np.abs(y - ref).max() if y.shape == ref.shape else float("nan")
            got = f"shape {y.shape}, max |y - ref| {err:.2g}{'' if ok else '  WRONG'}"
        except Exception as e:
            ok = False
            got = f"raises {type(e).__name__}: {re.sub(r'[{][{].*?[}][}] *', '', str(e)).splitlines()[0][:80]}"
        print(f"{keras.backend.backend():10s} cholesky_inverse({shape}, upper={upper!s:5}): {got} (numpy shape {ref.shape})")
        if not ok:
            failed.append(f"{shape} upper={upper}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
