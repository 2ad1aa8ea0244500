#!/usr/bin/env python3
"""Keras 3.15's RandomCrop cannot be traced by jax.jit on the JAX backend in training: it slices
the image at a random offset whose start indices are traced arrays (images[:, h_start:h_start + height, ...]), and JAX slicing needs static integers
("IndexError: Slice entries must be static integers. Got slice(JitTracer(int32[]), ...)").  Eager
calls run; TensorFlow and torch run it (at inference RandomCrop returns its input unchanged,
keras-team/keras#21868).  A limitation Keras declares: the layer sets supports_jit = False, so
Keras' own fit and predict run a model holding it uncompiled; only a user's jax.jit (a custom
loop over stateless_call) meets it.  jax.lax.dynamic_slice with the static crop size would mend it.

    KERAS_BACKEND=jax python keras_jax_random_crop_traced_slice.py
    # prints REPRODUCED and exits 1 while a jitted RandomCrop fails where eager runs; else NOT
    # REPRODUCED, 0 (TensorFlow and torch print NOT REPRODUCED: no jit there)

Found by audee's API-level fuzzer (the api-cpu campaign, rng 3015: RandomCrop(1, 12) on a
(7, 16, 3) image).  Upstream: not found (query: "keras RandomCrop jax jit Slice entries must be
static integers"); Keras' RandomCrop PRs #21871 and #22328 are about inference doing nothing.
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}")
x = np.random.default_rng(0).uniform(0, 1, (4, 7, 16, 3)).astype(np.float32)
failed = []
for training in (True, False):
    layer = keras.layers.RandomCrop(4, 12, seed=1)
    eager = tuple(layer(x, training=training).shape)
    if keras.backend.backend() != "jax":
        print(f"  RandomCrop(4, 12), training={training}: eager {eager}; no jit on this backend")
        continue
    import jax

    try:
        traced = tuple(jax.jit(lambda t, tr=training: layer(t, training=tr))(x).shape)
    except Exception as exc:  # noqa: BLE001 - the refusal is the finding
        text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())
        m = re.search(r"Slice entries must be static integers", text)
        traced = f"{type(exc).__name__}: {m.group(0) if m else text[:100]}"
        failed.append(f"training={training}")
    print(f"  RandomCrop(4, 12), training={training}: eager {eager}; jax.jit {traced}")
if failed:
    print(f"REPRODUCED: a jitted RandomCrop fails ({', '.join(failed)}) where eager runs")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
