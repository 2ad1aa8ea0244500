#!/usr/bin/env python3
"""Keras 3.15's RMSNormalization with an axis list mixing signs (axis=[1, -1]) applies its
scale transposed.  build() sorts the list as written, so [1, -1] becomes [-1, 1] and the scale
takes the shape (d_last, d_1); ops.rms_normalization then multiplies the normalized input by it
as it is, on the trailing axes (d_1, d_last): where d_1 == d_last each element is scaled by
another element's weight, silently; otherwise every backend refuses the layer ("Incompatible
shapes for broadcasting").  axis=[1, 2] on a rank-3 input names the same axes and is right.  The
same sort broke LayerNormalization (findings row 111), whose fix (keras-team/keras#23329,
canonicalizing the axes before sorting) did not touch RMSNormalization: Keras' master of
2026-08-21 is still wrong.  Every backend computes it alike, so no cross-backend comparison sees
it.  Found by audee's equivalence oracle (rule axis: the same layer over the trailing axes,
written as such, its weight transposed from the order the layer stores its axes in), in the
api-cpu campaign's rng 2991 (the refusal), under findings row 110's entry until a hand check.

    KERAS_BACKEND=jax python keras_rmsnorm_mixed_sign_axes.py
    # prints REPRODUCED and exits 1 while axis=[1, -1] and axis=[1, 2] differ; else NOT
    # REPRODUCED, 0

Upstream: not reported (queries: "RMSNormalization axis list negative sorted scale transposed",
"keras RMSNormalization axis [1, -1] incompatible shapes").  The sort came with
keras-team/keras#22296 (merged 2026-03, for torch's unsorted contiguous axes, #22201); #22206,
which canonicalized the axes before sorting, was closed unmerged.  Nearest keras-team/keras#23329
(LayerNormalization's sort, fixed there only) and findings row 110 (RMSNormalization's scale on
the last axis whatever its axis, another fault).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(0)
x = rng.normal(size=(2, 4, 4)).astype(np.float32)
scale = rng.uniform(0.5, 2.0, size=(4, 4)).astype(np.float32)   # scale[i, j]: axis 1 = i, axis 2 = j


def run(axis: list[int]) -> np.ndarray:
    """The layer's output with scale[i, j] at axis 1 = i, axis 2 = j, stored as the layer orders its axes."""
    layer = keras.layers.RMSNormalization(axis=axis, epsilon=1e-6)
    layer.build(x.shape)
    transposed = list(layer.axis) != sorted(a % x.ndim for a in layer.axis)   # stored as (d_2, d_1)
    layer.scale.assign(scale.T if transposed else scale)
    print(f"  axis={axis}: stored axis {list(layer.axis)}, scale shape {tuple(layer.scale.shape)}")
    return np.asarray(keras.ops.convert_to_numpy(layer(x)))


print(f"keras {keras.__version__} on {keras.backend.backend()}: RMSNormalization of a (2, 4, 4) input")
mixed, positive = run([1, -1]), run([1, 2])
reference = x / np.sqrt((x.astype(np.float64) ** 2).mean(axis=(1, 2), keepdims=True) + 1e-6) * scale
apart = float(np.abs(mixed - positive).max())
print(f"  max |[1, -1] - [1, 2]| = {apart:.3g}   max |[1, 2] - numpy| = {np.abs(positive - reference).max():.3g}")
try:
    keras.layers.RMSNormalization(axis=[1, -1])(rng.normal(size=(2, 3, 5)).astype(np.float32))
    print("  axis=[1, -1] of a (2, 3, 5) input: runs")
except Exception as exc:  # noqa: BLE001 - the other face: the transposed scale does not broadcast
    print(f"  axis=[1, -1] of a (2, 3, 5) input: {type(exc).__name__}: {' '.join(str(exc).split())[:110]}")
wrong = apart > 1e-3
print("REPRODUCED: axis=[1, -1] applies its scale stored over (d_2, d_1) to (d_1, d_2)" if wrong
      else "NOT REPRODUCED")
sys.exit(1 if wrong else 0)
