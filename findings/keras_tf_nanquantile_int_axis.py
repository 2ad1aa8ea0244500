"""Keras 3.15.1 on TensorFlow: nanmedian / nanquantile / nanpercentile of an integer tensor along
an axis raise `InvalidArgumentError: TensorArray dtype is int32 but Op is trying to write dtype
float32`.  NumPy (which they follow, promoting integers to float as median does), torch, JAX and
Keras' symbolic spec give a float32 result.  keras/src/backend/tensorflow/numpy.py, nanquantile
(line 2460): the per-row `tf.map_fn(_nanquantile_1d, ...)` declares
`fn_output_signature=tf.TensorSpec(shape=q_shape, dtype=x.dtype)` -- the *input's* int32 -- while
`quantile` of an int32 row returns float32 (and the all-NaN fallback builds
`tf.constant(nan, dtype=x.dtype)`, not representable in an integer dtype).  axis=None takes a
path without map_fn and is right; float inputs are right.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_nanquantile_int_axis.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, ops-cpu campaign: nanmedian of int32 (1, 4, 1), (3, 5),
(3, 4, 3, 5) with a negative axis and keepdims=True: TensorFlow alone raises).
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.array([[7, 2, -10, -2, 5], [1, 1, 4, 9, -3], [0, 6, 6, 2, 8]], dtype="int32")
calls = {
    "nanmedian": (lambda t, **k: ops.nanmedian(t, **k), lambda a, **k: np.nanmedian(a, **k)),
    "nanquantile(q=0.25)": (lambda t, **k: ops.nanquantile(t, 0.25, **k), lambda a, **k: np.nanquantile(a, 0.25, **k)),
    "nanpercentile(q=75)": (lambda t, **k: ops.nanpercentile(t, 75, **k), lambda a, **k: np.nanpercentile(a, 75, **k)),
}
failed = []
for dtype, kw in [("int32", dict(axis=-1, keepdims=True)), ("int32", dict(axis=0)),
                  ("int32", dict(axis=None)), ("float32", dict(axis=-1, keepdims=True))]:
    xs = x.astype(dtype)
    for name, (op, ref_fn) in calls.items():
        ref = np.asarray(ref_fn(xs, **kw))
        try:
            out = op(xs, **kw)
            y = ops.convert_to_numpy(out)
            got = f"{keras.backend.standardize_dtype(out.dtype)} {y.ravel().tolist()}"
            ok = y.shape == ref.shape and np.allclose(y, ref)
        except Exception as exc:
            got, ok = f"raises {type(exc).__name__}: {str(exc).splitlines()[0][:90]}", False
        spec = op(keras.KerasTensor(x.shape, dtype), **kw)
        label = f"{name}({dtype} (3, 5), {', '.join(f'{k}={v}' for k, v in kw.items())})"
        print(f"{keras.backend.backend():10s} {label:58s}: {got} (numpy {ref.ravel().tolist()}; "
              f"spec {spec.dtype} {spec.shape}){'' if ok else '  WRONG'}")
        if not ok:
            failed.append(label)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
