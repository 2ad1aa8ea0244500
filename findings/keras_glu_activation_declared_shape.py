#!/usr/bin/env python3
"""Keras 3.15 accepts glu as a layer's activation (activations.get("glu")), which halves the last
axis, while the layer declares its output as if the activation kept the shape: Dense(6,
activation="glu") declares (None, 6) and returns 3 features, Activation("glu") declares its input's
shape, a channels_first Conv2D halves its last spatial axis.  Every layer after it in a functional
model is built from the declaration and fails at run, on every backend alike, so no comparison
between backends sees it.  keras.ops.glu's own symbolic shape was fixed (keras-team/keras#21695,
#21696); the layers that call an activation (Activation, Dense, the convolutions, ...) still take it
as shape-preserving.  Maintainers may call a shape-changing function outside an activation
argument's contract; Keras neither refuses it nor declares it.  Found by audee's declared-output
oracle (a layer's computed output against its symbolic one).

    KERAS_BACKEND=jax python keras_glu_activation_declared_shape.py
    # prints REPRODUCED and exits 1 while the declared and computed shapes differ; else NOT
    # REPRODUCED, 0

Upstream: the op's face known and fixed (keras-team/keras#21695); the layers' face not found
(queries: "keras glu activation Dense layer output shape halved compute_output_shape", "keras
Activation layer glu compute_output_shape returns input shape").
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}: glu as a layer's activation")
off = 0
x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float32)
for name, make in [("Activation('glu')", lambda: keras.layers.Activation("glu")),
                   ("Dense(6, activation='glu')", lambda: keras.layers.Dense(6, activation="glu"))]:
    declared = make()(keras.Input(shape=(4,))).shape
    computed = tuple(keras.ops.convert_to_numpy(make()(x)).shape)
    off += declared[-1] != computed[-1]
    print(f"  {name} of (2, 4): declared {declared}, computed {computed}")
print(f"  keras.ops.glu of Input((4,)): {keras.ops.glu(keras.Input(shape=(4,))).shape} (the op itself, right)")
print("REPRODUCED: a layer with activation glu declares its output unhalved and computes it halved" if off
      else "NOT REPRODUCED")
sys.exit(1 if off else 0)
