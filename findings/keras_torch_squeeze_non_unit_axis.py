"""Keras 3.15.1 on PyTorch: ops.squeeze(x, axis=a) where x.shape[a] != 1 silently returns x
unchanged; numpy, the TensorFlow backend (an explicit check: "Cannot squeeze axis=a, because
the dimension is not 1") and JAX raise.  The input is outside Keras' contract ("axis: Select a
subset of the entries of length one in the shape"), but the torch backend lets a wrong axis
through (torch.squeeze(x, dim) is a no-op on a non-unit dim by PyTorch's design), so a shape
bug in user code shows only on TF and JAX.  keras/src/backend/torch/numpy.py, squeeze: no
check; the TF backend's loop over `static_shape[a] != 1` is the fix.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_squeeze_non_unit_axis.py; done
    # prints REPRODUCED and exits 1 on torch while it accepts the call

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 raise).  Found by audee
(op-level fuzzing, `audee fuzz --op squeeze`: axis=-3 on a (0, 4, 4, 2) bfloat16 input, TF and
JAX raise, torch returns (0, 4, 4, 2)).  Upstream: not found for Keras (query: "keras ops
squeeze torch backend does not raise when axis dimension is not 1"); PyTorch's no-op is
deliberate (ONNX asked to align with it: onnx/onnx#3764, closed).
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.zeros((2, 1, 3), dtype="float32")
accepted = []
for axis in (1, 0, -1, (0, 1)):
    try:
        np.squeeze(x, axis=axis)
        ref = "ok"
    except ValueError:
        ref = "raises ValueError"
    try:
        got = f"shape {tuple(ops.squeeze(x, axis=axis).shape)}"
    except Exception as e:
        got = f"raises {type(e).__name__}"
    if ref != "ok" and not got.startswith("raises"):
        accepted.append(str(axis))
    print(f"{keras.backend.backend():10s} squeeze({x.shape}, axis={axis}): {got:22s} numpy {ref}")
if accepted:
    print(f"REPRODUCED on {keras.backend.backend()}: accepts a non-unit axis: " + ", ".join(accepted))
    sys.exit(1)
print("NOT REPRODUCED")
