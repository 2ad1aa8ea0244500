"""Keras 3.15.1 on torch: ops.imag of a real (float, int or bool) tensor raises `RuntimeError:
imag is not implemented for tensors with non-complex dtypes.`  keras.ops.imag follows
numpy.imag, which documents real input ("If val is real, the type of val is used for the
output"): zeros of the input's dtype.  TensorFlow (tf.math.imag) and JAX (jnp.imag) return
them; the torch backend (keras/src/backend/torch/numpy.py, imag) calls torch.imag, which
PyTorch refuses on real tensors on purpose (pytorch/pytorch#35728; pytorch/pytorch#51210,
open, asks to allow it), without the `zeros_like` branch a real input needs.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_imag_real_input.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (tensorflow 2.21.0, JAX 0.10.2 right; numpy 2.4).
Found by audee (op-level fuzzing, `audee fuzz --op imag`: every case, float inputs; the report
classed it as a limitation because of the words "not implemented").
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for dtype in ["float32", "int32", "bool"]:
    x = np.array([1, -2, 3]).astype(dtype)
    ref = np.imag(x)
    try:
        y = ops.imag(x)
        got = f"{ops.convert_to_numpy(y).tolist()} {keras.backend.standardize_dtype(y.dtype)}"
        ok = np.array_equal(ops.convert_to_numpy(y), ref)
    except Exception as e:  # noqa: BLE001 - the failure is what we show
        ok, got = False, f"raises {type(e).__name__}: {e}"
    print(f"{keras.backend.backend():10s} imag({dtype:7s} [1, -2, 3]): {got} (numpy {ref.tolist()} {ref.dtype})"
          f"{'' if ok else '  WRONG'}")
    if not ok:
        failed.append(dtype)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
