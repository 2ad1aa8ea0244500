"""JAX 0.10.2 on the CPU (reached through Keras 3.15.1 ops.lstsq and ops.svd on JAX): an SVD
of a matrix holding one Inf among finite values never returns (100% CPU, no exception, the call
cannot be interrupted from Python).  The hang is LAPACK's: xGESDD -> xBDSQR loops forever when a
bidiagonal entry is Inf (THRESH becomes NaN): Reference-LAPACK/lapack#1409 (open), fix proposed in
Reference-LAPACK/lapack#1390 (open).  NumPy met it as numpy/numpy#32591 and now checks for
non-finite input before gesdd/gelsd and raises LinAlgError (numpy/numpy#32593, backport #32719);
jnp.linalg.svd calls the LAPACK kernel without that check (svd without singular vectors is
fine).  torch and TF return NaN singular values (torch raises on a NaN input).  Non-finite
input has no defined result, but a hang is never an answer.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python jax_lstsq_svd_inf_hang.py; done
    # prints REPRODUCED and exits 1 on jax while the hang is there (each call gets 30 s)

Versions: keras 3.15.1, jax 0.10.2, jaxlib 0.10.2 (tensorflow 2.21.0, torch 2.13.0+cpu answer;
numpy 2.4.6).  Found by audee (op-level fuzzing, `audee fuzz --op lstsq`: float32 a (4, 3) with
a[0, 0] = -inf, b (4, 1): the JAX worker gave no answer within 120 s and was killed).
"""
import os
import subprocess
import sys

CALLS = {
    "lstsq": "ops.lstsq(a, np.ones((4, 1), 'float32'))",
    "svd": "ops.svd(a, full_matrices=False)",
    "svd(compute_uv=False)": "ops.svd(a, compute_uv=False)",
}
CHILD = """
import numpy as np
from keras import ops
a = np.array([[-np.inf, 0.09272, -1.4314], [-0.55305, 3.90735, 4.51936],
              [2.32868, 0.21646, 2.71969], [1.08655, -1.91215, 0.60245]], 'float32')
try:
    out = {call}
    out = out if isinstance(out, (tuple, list)) else [out]
    print('returns ' + ', '.join(str(np.round(ops.convert_to_numpy(o).ravel(), 3).tolist()) for o in out))
except Exception as e:
    print('raises ' + type(e).__name__ + ': ' + str(e).splitlines()[0][:70])
"""
backend = os.environ.get("KERAS_BACKEND", "tensorflow")
env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
failed = []
for name, call in CALLS.items():
    try:
        p = subprocess.run([sys.executable, "-c", CHILD.format(call=call)], capture_output=True, text=True,
                           timeout=30, env=env)
        got = (p.stdout.strip().splitlines() or [f"exit {p.returncode}: {p.stderr.strip()[-120:]}"])[-1]
    except subprocess.TimeoutExpired:
        got = "NO ANSWER within 30 s (killed)"
        failed.append(name)
    print(f"{backend:10s} {name:22s} on a (4, 3) with a[0, 0] = -inf: {got}")
if failed:
    print(f"REPRODUCED on {backend}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
