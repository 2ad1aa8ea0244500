"""Keras 3.15.1 on JAX: median / nanmedian / quantile / percentile (and their nan* forms) of a
0-d tensor with `axis=None, keepdims=True` return shape (1,) instead of the 0-d shape ().
NumPy, Keras' symbolic spec, TensorFlow and torch keep the input's rank (0), as keepdims says.
The cause is in JAX, reached unguarded: jax/_src/numpy/reductions.py `_quantile` sets
`keepdim = [1] * a.ndim` (an empty list for a 0-d input), ravels `a` to shape (1,), and at the end
restores the shape only `if keepdims and keepdim:` -- the empty list is falsy, so the (1,) of the
raveled, keepdims reduction comes back.  `jnp.median(jnp.float32(3), keepdims=True).shape` is
(1,).  Keras' JAX backend median only adds missing dims (`while result.ndim < x.ndim`), it
never removes one.  Silent: the rank grows by one.  (N-D inputs are right since
jax-ml/jax#20251.)

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_jax_median_0d_keepdims.py; done
    # prints REPRODUCED and exits 1 on jax while the bug is there

Versions: keras 3.15.1, jax/jaxlib 0.10.2 (tensorflow 2.21.0, torch 2.13.0+cpu right; numpy 2.4.6).
Found by audee (op-level fuzzing, ops-cpu campaign: median and nanmedian of a 0-d float32 /
float16 / int32 tensor, axis=None, keepdims=True: "out0:shape" deviation, JAX the odd one).
"""
import sys

import numpy as np
import keras
from keras import ops

calls = {
    "median": (lambda t, **k: ops.median(t, **k), lambda a, **k: np.median(a, **k)),
    "nanmedian": (lambda t, **k: ops.nanmedian(t, **k), lambda a, **k: np.nanmedian(a, **k)),
    "quantile(q=0.5)": (lambda t, **k: ops.quantile(t, 0.5, **k), lambda a, **k: np.quantile(a, 0.5, **k)),
    "percentile(q=50)": (lambda t, **k: ops.percentile(t, 50, **k), lambda a, **k: np.percentile(a, 50, **k)),
    "nanquantile(q=0.5)": (lambda t, **k: ops.nanquantile(t, 0.5, **k), lambda a, **k: np.nanquantile(a, 0.5, **k)),
}
failed = []
for shape in [(), (2, 3)]:
    xs = np.full(shape, 3.0, dtype="float32")
    for name, (op, ref_fn) in calls.items():
        ref = np.asarray(ref_fn(xs, axis=None, keepdims=True))
        try:
            y = ops.convert_to_numpy(op(xs, axis=None, keepdims=True))
            got = f"shape {y.shape} value {y.ravel().tolist()}"
            ok = y.shape == ref.shape and np.allclose(y, ref)
        except Exception as exc:  # not expected here
            got, ok = f"raises {type(exc).__name__}: {str(exc)[:80]}", False
        try:
            spec = op(keras.KerasTensor(shape, "float32"), axis=None, keepdims=True).shape
        except Exception as exc:
            spec = f"raises {type(exc).__name__}"
        label = f"{name}(x {shape}, axis=None, keepdims=True)"
        print(f"{keras.backend.backend():10s} {label:50s}: {got} (numpy {ref.shape}; spec {spec})"
              f"{'' if ok else '  WRONG'}")
        if not ok:
            failed.append(label)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
