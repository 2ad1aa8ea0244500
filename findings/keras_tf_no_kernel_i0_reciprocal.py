"""Keras 3.15.1 on TensorFlow: two keras.ops calls fail for want of a TensorFlow CPU kernel,
where torch and JAX compute them:
- ops.i0 on bfloat16: NotFoundError "Could not find device for node: BesselI0[T=DT_BFLOAT16]"
  (TF registers BesselI0 for half, float, double on the CPU).  The TF backend
  (keras/src/backend/tensorflow/numpy.py, i0) keeps bfloat16 on purpose
  (`elif dtype not in ["bfloat16", "float16"]`) where an upcast to float32 would do;
- ops.reciprocal on int32: NotFoundError "Could not find device for node: Reciprocal[T=DT_INT32]"
  (TF's CPU Reciprocal has no integer kernel although its docs list int types: known,
  tensorflow/tensorflow#64224 and #92921, both closed unfixed).  torch and JAX return
  float32 1/x; Keras does not promote (the open keras-team/keras#23574 promotes integer
  reciprocal/rsqrt to float on the NumPy backend, the same intent).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_no_kernel_i0_reciprocal.py; done
    # prints REPRODUCED and exits 1 on tensorflow while they fail

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right).  Found by
audee (op-level fuzzing, `audee fuzz --op i0,reciprocal`: a bfloat16 (2, 4, 4) input to i0, an
int32 (1, 2, 2, 2) input to reciprocal).  Upstream for i0: not found (query: "keras ops i0
bfloat16 tensorflow BesselI0 Could not find device for node").
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
x = np.array([0.5, 1.0, 2.0], dtype="float32")
calls = [
    ("i0 bfloat16", lambda: ops.i0(ops.cast(x, "bfloat16")), np.i0(x), 2e-2),
    ("reciprocal int32", lambda: ops.reciprocal(np.array([2, -4, 1], dtype="int32")), 1.0 / np.array([2, -4, 1]), 1e-6),
]
for name, call, ref, rtol in calls:
    try:
        y = call()
        got = ops.convert_to_numpy(ops.cast(y, "float32"))
        ok = np.allclose(got, ref, rtol=rtol)
        print(f"{keras.backend.backend():10s} {name:16s}: {keras.backend.standardize_dtype(y.dtype)} "
              f"{got.tolist()}  reference {np.round(ref, 4).tolist()}")
    except Exception as e:
        ok = False
        print(f"{keras.backend.backend():10s} {name:16s}: raises {type(e).__name__}: {str(e).splitlines()[0][:80]}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
