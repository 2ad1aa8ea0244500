#!/usr/bin/env python3
"""Keras 3.15's LayerNormalization with an axis list mixing signs (axis=[1, -1]) scrambles its
gamma and beta.  build() sorts the list as written, so [1, -1] becomes [-1, 1] and the weights
take the shape (d_last, d_1); ops.layer_normalization then *reshapes* them (not transposes) to
the broadcast shape (1, d_1, ..., d_last), so each element is scaled and shifted by another
element's gamma and beta.  axis=[1, 3] on a rank-4 input names the same axes and is right.
Every backend computes it alike (torch too), and the default weights (ones and zeros) hide it,
so neither a cross-backend comparison nor a fresh layer sees it; trained or loaded weights do.
Found by audee's equivalence oracle (rule axis: the same normalization over the trailing axes of
the permuted input).

    KERAS_BACKEND=jax python keras_layernorm_mixed_sign_axes.py
    # prints REPRODUCED and exits 1 while axis=[1, -1] and axis=[1, 3] differ; else NOT
    # REPRODUCED, 0

Upstream: fixed on Keras' master after 3.15.1 as a side effect of keras-team/keras#23329
(merged 2026-08-04: build() canonicalizes the axes before sorting; the pull request names the
duplicate-axis and out-of-bounds cases, not this one).  Not reported as an issue (queries:
"keras LayerNormalization axis list negative and positive mixed gamma shape wrong"); nearest
keras-team/keras#19642 (axis [-2, 3] with rms_scaling, another fault).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

rng = np.random.default_rng(0)
x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
gamma = rng.uniform(0.5, 2.0, size=(3, 5)).astype(np.float32)    # per (axis 1, axis 3) pair
beta = rng.normal(size=(3, 5)).astype(np.float32)


def run(axis: list[int]) -> np.ndarray:
    """The layer's output with gamma[i, j] and beta[i, j] at axis 1 = i, axis 3 = j."""
    layer = keras.layers.LayerNormalization(axis=axis, epsilon=1e-3)
    layer.build(x.shape)
    transposed = list(layer.axis) != sorted(a % x.ndim for a in layer.axis)   # stored as (d_3, d_1)
    layer.gamma.assign(gamma.T if transposed else gamma)
    layer.beta.assign(beta.T if transposed else beta)
    print(f"  axis={axis}: stored axis {list(layer.axis)}, gamma shape {tuple(layer.gamma.shape)}")
    return np.asarray(keras.ops.convert_to_numpy(layer(x)))


print(f"keras {keras.__version__} on {keras.backend.backend()}: LayerNormalization of a (2, 3, 4, 5) input")
mixed, positive = run([1, -1]), run([1, 3])
mean = x.mean(axis=(1, 3), keepdims=True)
reference = (x - mean) / np.sqrt(x.var(axis=(1, 3), keepdims=True) + 1e-3) * gamma[None, :, None, :] \
    + beta[None, :, None, :]
apart = float(np.abs(mixed - positive).max())
print(f"  max |[1, -1] - [1, 3]| = {apart:.3g}   max |[1, 3] - numpy| = {np.abs(positive - reference).max():.3g}"
      f"   max |[1, -1] - numpy| = {np.abs(mixed - reference).max():.3g}")
wrong = apart > 1e-3
print("REPRODUCED: axis=[1, -1] applies gamma and beta reshaped from (d_3, d_1), not transposed" if wrong
      else "NOT REPRODUCED")
sys.exit(1 if wrong else 0)
