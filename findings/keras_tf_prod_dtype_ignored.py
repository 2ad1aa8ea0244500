"""Keras 3.15.1 on TensorFlow: ops.prod(x, dtype=...) ignores `dtype` whenever it is given.
The TF backend (keras/src/backend/tensorflow/numpy.py, prod, line 2654) casts x only in its
`if dtype is None:` branch and never uses the `dtype` argument: prod(bfloat16 x, dtype="float16")
returns bfloat16, prod(int32 x, dtype="float32") int32.  The docstring says "dtype: Data type of
the returned tensor", Keras' symbolic spec (Prod.compute_output_spec) returns `dtype`, NumPy's
prod(dtype=) and torch/JAX return it too.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_prod_dtype_ignored.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op prod`: bfloat16 x, dtype='float16', TF output
bfloat16; 20 cases, dtype float16/float32/bfloat16/int32).
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.array([1.4453125, 3.1875, -0.89453125, 1.8671875], "float32")
failed = []
for xdt, dt in [("bfloat16", "float16"), ("int32", "float32"), ("float32", "bfloat16"),
                ("float32", "int32"), ("float32", None)]:
    xx = ops.cast(x if xdt != "int32" else np.round(x), xdt)
    y = ops.prod(xx, axis=0, keepdims=True, dtype=dt)
    got = keras.backend.standardize_dtype(y.dtype)
    spec = ops.prod(keras.KerasTensor((4,), xdt), axis=0, keepdims=True, dtype=dt).dtype
    want = dt or xdt
    ok = got == want
    print(f"{keras.backend.backend():10s} prod({xdt:8s} x, dtype={str(dt):8s}): dtype {got:8s} "
          f"value {float(ops.convert_to_numpy(ops.cast(y, 'float32'))[0]):.4g} "
          f"(spec {spec}, numpy/docstring {want}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"{xdt}->{dt}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
