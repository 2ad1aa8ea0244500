"""Keras 3.15.1 on JAX: ops.angle of a 0-d float16 or bfloat16 tensor returns float32.  The JAX
backend (keras/src/backend/jax/numpy.py, angle, line 300) casts x to result_type(x.dtype, float)
= float16 and calls jnp.angle, which (JAX 0.10.2, jax/_src/numpy/ufuncs angle) switches a 0-d
floating input to the default float dtype (`issubdtype(z.dtype, np.floating) and np.ndim(z) ==
0`).  Keras' spec (Angle.compute_output_spec) says float16, as do TF, torch and NumPy
(np.angle of a 0-d float16 array is float16); JAX's own 1-D float16 result is float16.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_jax_angle_scalar_dtype.py; done
    # prints REPRODUCED and exits 1 on jax while the bug is there

Versions: keras 3.15.1, JAX 0.10.2 (tensorflow 2.21.0, torch 2.13.0+cpu right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op angle`: 0-d float16 x = 1.546, JAX float32,
TF float16; 2 cases).
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for dt, shape in [("float16", ()), ("bfloat16", ()), ("float16", (3,)), ("float32", ())]:
    x = ops.cast(np.full(shape, -1.5458984375, "float32"), dt)
    y = ops.angle(x)
    got = keras.backend.standardize_dtype(y.dtype)
    spec = ops.angle(keras.KerasTensor(shape, dt)).dtype
    npdt = str(np.angle(np.full(shape, -1.5, dt if dt != "bfloat16" else "float32")).dtype)
    ok = got == spec
    print(f"{keras.backend.backend():10s} angle({dt:8s} x of shape {str(shape):5s}): dtype {got:8s} "
          f"value {np.ravel(ops.convert_to_numpy(ops.cast(y, 'float32')))[0]:.4f} "
          f"(spec {spec}; numpy {npdt if dt != 'bfloat16' else '-'}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"{dt} {shape}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
