#!/usr/bin/env python3
"""Keras 3.15's RMSNormalization(axis=k) normalizes over axis k but multiplies by its scale,
a weight of shape (input_shape[k],), along the last axis: ops.rms_normalization multiplies
the normalized tensor by the 1-D scale as it is, and NumPy broadcasting puts it on the last
axis.  LayerNormalization reshapes its gamma to the axis (broadcast_shape); RMSNormalization
does not.  Where the axis and the last axis have one length the result is silently wrong;
otherwise the call raises "Incompatible shapes for broadcasting".  The same on TensorFlow and
JAX, and on torch where Keras does not take F.rms_norm (axes not consecutive); so no
cross-backend comparison sees it.  Found by hand in a triage of the api-cpu campaign (rng
2967, RMSNormalization(axis=1)); real models use axis=1 on channels_first convolutions.

    KERAS_BACKEND=jax python keras_rmsnorm_scale_axis.py
    # prints REPRODUCED and exits 1 while the scale lands on the last axis (or the call
    # raises); else NOT REPRODUCED, 0

Upstream: not found (queries: "RMSNormalization axis scale broadcast wrong axis", "keras
RMSNormalization axis=1 scale applied last axis incompatible shapes broadcasting"); nearest
keras-team/keras#19642 (LayerNormalization rms_scaling gamma not broadcast, fixed), #22201 /
#22206 (RMSNormalization on torch, another fault).
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

EPS = 1e-6
x = np.random.default_rng(0).normal(size=(2, 3, 3)).astype(np.float32)
scale = np.array([1.0, 2.0, 3.0], np.float32)

layer = keras.layers.RMSNormalization(axis=1, epsilon=EPS)
layer.build(x.shape)
layer.scale.assign(scale)
y = np.asarray(keras.ops.convert_to_numpy(layer(x)))
normalized = x / np.sqrt((x ** 2).mean(axis=1, keepdims=True) + EPS)
on_axis = float(np.abs(y - normalized * scale[None, :, None]).max())    # the documented result
on_last = float(np.abs(y - normalized * scale[None, None, :]).max())    # the scale on the last axis
print(f"keras {keras.__version__} on {keras.backend.backend()}: RMSNormalization(axis=1) of a (2, 3, 3) input, "
      f"scale [1, 2, 3]")
print(f"  max |y - scale on axis 1| = {on_axis:.3g}   max |y - scale on the last axis| = {on_last:.3g}")
try:
    other = keras.layers.RMSNormalization(axis=1, epsilon=EPS)
    shape = tuple(np.asarray(keras.ops.convert_to_numpy(other(np.ones((2, 3, 5), np.float32)))).shape)
    raised = None
    print(f"  a (2, 3, 5) input: output {shape}")
except Exception as exc:  # noqa: BLE001 - the fault's other face
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))   # Keras colours its messages
    lines = [ln.strip() for ln in text.splitlines() if "shape" in ln.lower()] or text.splitlines()
    raised = f"{type(exc).__name__}: {lines[0][:140]}"
    print(f"  a (2, 3, 5) input raises {raised}")
wrong = on_axis > 1e-3 and on_last < 1e-4
print("REPRODUCED: RMSNormalization scales along the last axis, not along its axis" if wrong or raised
      else "NOT REPRODUCED")
sys.exit(1 if wrong or raised else 0)
