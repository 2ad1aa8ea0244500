"""JAX 0.10.2 on the CPU: XLA hands a max or min reduction (``reduce``, and the ``reduce-window``
of a max pooling) over an operand of 4096 elements or more to YNNPACK (a ``__ynn_fusion``),
whose max / min drop NaN: ``jnp.max`` of 8192 ones with one NaN is 1.0, and with the NaN in
the last element it is -inf, the reduction's initial value, where NumPy, TensorFlow and torch
give NaN.  Below 4096 elements, or with YNNPACK's reduce fusion off
(``XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type=-reduce``), JAX keeps the NaN; a sum over
the same operand keeps it too.  Keras on JAX meets it in GlobalMaxPooling, MaxPooling and
ops.max / min / amax / amin of any tensor that large (a batch of 8 of 64 x 64 x 3 images).

    python findings/xla_cpu_ynn_reduce_max_nan.py
    # prints REPRODUCED and exits 1 while the bug is there (JAX alone, no Keras)

Versions: jax / jaxlib 0.10.2, CPU.  Not found upstream (queries: "ynnpack reduce max NaN xla
cpu ynn fusion", "jnp.max NaN ignored large array CPU", "XLA CPU reduce maximum NaN
propagation 4096 elements returns -inf"); related, not the same: openxla/xla#21461 (CPU
reduce max of a 2-element parameter drops NaN; JAX 0.10.2 keeps it there),
tensorflow/tensorflow#116992 (TensorFlow's XLA on the CPU drops NaN at any size), jax#17531 /
openxla/xla#5544 (a GPU reduction over 8193 negative zeros gives -inf).  Found by audee: the
api-cpu campaign, rng 2830 (lenet5-v00006: JAX's GlobalMaxPooling1D finite on an input with
285 NaN, where TensorFlow, torch and onnxruntime's graph keep them).
"""
import json
import os
import subprocess
import sys

import numpy as np

CHILD = """
import json, numpy as np, jax, jax.numpy as jnp
from jax import lax
def one(n, pos):
    x = np.ones(n, np.float32); x[pos] = np.nan
    return float(jnp.max(x))
p = np.ones((8, 64, 64, 3), np.float32); p[0, 10, 10, 0] = np.nan
pool = lax.reduce_window(p, -np.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
print(json.dumps([jax.__version__, one(4095, 3), one(8192, 3), one(8192, 8191),
                  int(np.isnan(np.asarray(pool)).sum())]))
"""


def run(flags: str) -> tuple:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise SystemExit(f"the JAX child failed:\n{out.stderr[-2000:]}")
    return tuple(json.loads(out.stdout.strip().splitlines()[-1]))  # NaN is json's NaN token


version, small, big, last, pooled = run("")
_, _, big_off, last_off, pooled_off = run("--xla_cpu_experimental_ynn_fusion_type=-reduce")
print("jax", version)
print("max of 4095 ones with one NaN                 ", small)
print("max of 8192 ones with one NaN                 ", big, "  (YNNPACK's reduce fusion off:", big_off, ")")
print("max of 8192 ones, the NaN last                ", last, "  (off:", last_off, ")")
print("2x2 max pooling of (8, 64, 64, 3), one NaN in: NaN outputs", pooled, "  (off:", pooled_off, ")")
bug = bool(np.isnan(small) and not np.isnan(big) and np.isnan(big_off) and np.isnan(last_off) and pooled_off == 1)
print("REPRODUCED: JAX's CPU max over 4096+ elements drops NaN" if bug else "NOT REPRODUCED")
sys.exit(1 if bug else 0)
