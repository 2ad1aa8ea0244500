"""JAX 0.10.2 (reached through Keras 3.15.1 ops.slogdet and ops.logdet on JAX): the log-determinant
of a 1x1 or 2x2 matrix is computed as log(|a00*a11 - a01*a10|), so it underflows to -inf (sign 0)
or overflows to +inf for well-conditioned matrices whose entries are small or large: exactly
what slogdet exists to avoid (NumPy's slogdet docstring: "If an array has a very small or very
large determinant, then a call to det may overflow or underflow. This routine is more robust
against such issues").  jax/_src/numpy/linalg.py, slogdet: `if n == 1 or n == 2: return
_slogdet_small(a)` -> `_slogdet_2x2` (the analytic path added by jax-ml/jax#34971 for speed on
GPU); n >= 3 goes through LU and is right.  Keras' JAX backend calls jnp.linalg.slogdet for both
ops.slogdet and ops.logdet.  TF and torch (LU / Cholesky) return the finite value.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python jax_slogdet_2x2_underflow.py; done
    # prints REPRODUCED and exits 1 on jax while the bug is there

Versions: keras 3.15.1, jax 0.10.2 (tensorflow 2.21.0, torch 2.13.0+cpu right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op slogdet`: a float32 (2, 2, 2) batch whose
second matrix has entries ~1e-36 (condition number 1.9): JAX sign 0, logabsdet -inf; numpy, TF,
torch -1, -165.565).
"""
import sys

import numpy as np
import keras
from keras import ops

base2 = np.array([[2.0, 1.0], [1.0, 3.0]])                     # cond 2.6, det 5
base3 = np.array([[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
campaign = np.array([[-1.46343e-36, 5.12973e-37], [2.99477e-37, 7.47209e-37]])
cases = [("2x2 * 1e-30", base2 * 1e-30), ("2x2 * 1e+25", base2 * 1e25), ("2x2 * 1", base2),
         ("3x3 * 1e-30", base3 * 1e-30), ("campaign 2x2", campaign)]
failed = []
for name, x in cases:
    x = x.astype("float32")
    ref_sign, ref_log = np.linalg.slogdet(x.astype("float64"))
    sign, logabs = (float(ops.convert_to_numpy(t)) for t in ops.slogdet(x))
    ok = sign == ref_sign and np.isclose(logabs, ref_log, rtol=1e-5)
    line = f"{keras.backend.backend():10s} slogdet({name:12s}): sign {sign:+.0f}, logabsdet {logabs:9.4f}"
    if ref_sign > 0 and np.allclose(x, x.T):                   # logdet: Hermitian positive definite only
        ld = float(ops.convert_to_numpy(ops.logdet(x)))
        ok = ok and np.isclose(ld, ref_log, rtol=1e-5)
        line += f"; logdet {ld:9.4f}"
    print(f"{line} (numpy float64 {ref_sign:+.0f}, {ref_log:.4f}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
