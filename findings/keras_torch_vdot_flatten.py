"""Keras 3.15.1 on PyTorch: ops.vdot(x1, x2) raises on 2-D (or higher) inputs,
"RuntimeError: 1D tensors expected, but got 2D and 2D tensors", although Keras documents
"Multidimensional tensors are flattened before the dot product is taken" (numpy.vdot's
contract) and TensorFlow and JAX return the dot product of the flattened inputs.
keras/src/backend/torch/numpy.py, vdot: `torch.vdot(x1, x2)` without flattening (torch.vdot
takes 1-D tensors only).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_vdot_flatten.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 right).  Found by audee
(op-level fuzzing, `audee fuzz --op vdot`: two int32 (4, 4) inputs).  Upstream: not found
(queries: "keras ops vdot torch backend 1D tensors expected multidimensional flatten", "keras
vdot torch RuntimeError 1D tensors expected but got 2D"); the sibling torch ops.dot fix for
rank > 2 is keras-team/keras#23247 (merged).
"""
import sys

import numpy as np
import keras
from keras import ops

x1 = np.arange(6, dtype="float32").reshape(2, 3)
x2 = np.array([[1.0, -1.0, 2.0], [0.5, 3.0, -2.0]], dtype="float32")
failed = []
for a, b in [(x1[0], x2[0]), (x1, x2), (x1.reshape(1, 2, 3), x2.reshape(1, 2, 3))]:
    ref = np.vdot(a, b)
    try:
        y = float(ops.convert_to_numpy(ops.vdot(a, b)))
        ok, got = np.isclose(y, ref), f"{y}"
    except Exception as e:
        ok, got = False, f"raises {type(e).__name__}: {str(e).splitlines()[0]}"
    print(f"{keras.backend.backend():10s} vdot of {a.shape}: {got}  numpy {ref}")
    if not ok:
        failed.append(str(a.shape))
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
