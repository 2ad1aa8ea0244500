"""Keras 3.15.1: the gradient of `UnitNormalization` (and of `keras.ops.normalize(x, order=2)`)
at an all-zero row is NaN on torch and JAX, finite on TensorFlow.  `ops.normalize`'s L2 path
computes `x * minimum(rsqrt(sum(x**2)), 1/epsilon)`: the clamp keeps the forward value finite
(0), but the backward pass still differentiates `rsqrt(0) = inf`, and the `minimum`'s zero
cotangent times rsqrt's infinite derivative is `0 * inf = NaN` (torch, JAX); TensorFlow's
RsqrtGrad gives a finite value.  The reference is the function as written for a zero row,
`x / max(||x||, eps) = x / eps` near 0: a gradient of `upstream / eps`, finite; a nonzero row
is fine everywhere (control).  One training step of a model with such a row puts NaN in every
weight before the layer (a `Dense` without bias feeding it a zero row).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python findings/keras_normalize_zero_row_gradient.py; done
    # exit 1 and REPRODUCED on torch and jax while the bug is there

Known: keras-team/keras#23075 (closed), fixed by keras-team/keras#23093 (merged after 3.15.1:
the squared norm clamped at epsilon**2 before the rsqrt).  Found by audee's training phase
(`audee fuzz --api UnitNormalization --phase train --special-inputs 0.2`, the `zero_row`
special kind; the train_nan pinned on UnitNormalization by the backward walk).
"""
import sys

import numpy as np
import keras

backend = keras.backend.backend()
x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
x[1] = 0.0                                      # the all-zero row; rows 0 and 2 are the control
w = np.arange(1.0, 5.0, dtype="float32")        # the cotangent: loss = sum(UnitNormalization(x) * w)
layer = keras.layers.UnitNormalization()

if backend == "tensorflow":
    import tensorflow as tf

    t = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(t)
        loss = tf.reduce_sum(layer(t) * w)
    grad = tape.gradient(loss, t).numpy()
elif backend == "torch":
    import torch

    t = torch.tensor(x, requires_grad=True)
    (layer(t) * torch.tensor(w)).sum().backward()
    grad = t.grad.numpy()
else:
    import jax
    import jax.numpy as jnp

    grad = np.asarray(jax.grad(lambda v: jnp.sum(layer(v) * w))(x))

n = np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
ref = np.where(n > 0, w / np.maximum(n, 1e-12) - x * (x @ w)[:, None] / np.maximum(n, 1e-12) ** 3, w / 1e-12)
print(f"{backend:10s} gradient of the zero row: {grad[1]}  (reference: upstream / epsilon = {ref[1]})")
control = np.abs(grad[[0, 2]] - ref[[0, 2]]).max()
print(f"{backend:10s} nonzero rows: max |grad - ref| = {control:.3g}")
if not np.isfinite(grad[1]).all():
    print(f"REPRODUCED on {backend}: NaN gradient at an all-zero row")
    sys.exit(1)
print(f"NOT REPRODUCED on {backend}: the zero row's gradient is finite")
