"""Keras 3.15.1: ops.clip(x, x_min, x_max) with Python-float bounds of another kind than x does not
return x's dtype, which Keras' symbolic spec (Clip.compute_output_spec: x.dtype, bool -> int32)
promises, and each backend departs differently:
- TensorFlow, integer x with non-integral float bounds: raises `TypeError: Cannot convert -2.922
  to EagerTensor of dtype int32` (tf.clip_by_value converts the bounds to x's dtype);
- PyTorch, integer x: returns float32 (torch.clip promotes to the float bound's type), values
  not clipped to integers; 0-d bfloat16 x: returns float32 (the bounds become 0-d float32
  tensors, and between 0-d tensors torch promotes to float32), where TF/JAX keep bfloat16;
- JAX, integer x: returns float32 (jnp.clip promotes with the weak float bound).
NumPy itself promotes (int32 with float bounds -> float64).  The docstring says only "x_min:
Minimum value. x_max: Maximum value."  One fix: compute the result dtype once (the spec's, or
NumPy's promotion) and cast x and the bounds to it in every backend.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_clip_bound_dtype.py; done
    # prints REPRODUCED and exits 1 on a backend whose result departs from the spec

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, JAX 0.10.2, numpy 2.4.6.
Found by audee (op-level fuzzing, `audee fuzz --op clip`: int32 x with bounds (-2.922, 0.5118):
TF TypeError (6 cases); 0-d bfloat16 x -2.64 with (-1.653, 2.753): torch float32, TF/JAX
bfloat16 (2 cases)).
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for name, vals, dt, lo, hi in [
        ("int32 (3,), float bounds", [-2, 0, 3], "int32", -2.922, 0.5118),
        ("bfloat16 0-d, float bounds", -2.640625, "bfloat16", -1.653, 2.753),
        ("bfloat16 (3,), float bounds", [-2.640625, 0.5, 3.0], "bfloat16", -1.653, 2.753),
        ("int32 (3,), int bounds", [-2, 0, 3], "int32", -1, 2),
        ("float32 (3,), int bounds", [-2.5, 0.5, 3.0], "float32", -1, 2)]:
    x = ops.cast(np.array(vals, "float32"), dt)
    spec = ops.clip(keras.KerasTensor(np.shape(vals), dt), lo, hi).dtype
    ref = np.clip(np.array(vals, "float32" if dt != "int32" else "int32"), lo, hi)
    try:
        y = ops.clip(x, lo, hi)
        got = keras.backend.standardize_dtype(y.dtype)
        v = np.round(ops.convert_to_numpy(ops.cast(y, "float32")), 4).tolist()
        what, ok = f"dtype {got:8s} {v}", got == spec
    except Exception as e:  # noqa: BLE001
        what, ok = f"raises {type(e).__name__}: {str(e)[:60]}", False
    print(f"{keras.backend.backend():10s} clip({name:27s}, {lo}, {hi}): {what} "
          f"(spec {spec}; numpy {ref.dtype} {np.round(ref, 4).tolist()}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + "; ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
