#!/usr/bin/env python3
"""Keras 3.15's RandomPerspective fails on an image one pixel high (or wide), even with
factor=0.0, where it should leave the image as it is: it maps the image's four corners to
drawn ones by solving an 8x8 system (ops.image.perspective_transform), and on a one-pixel axis
two source corners coincide, so the system is singular.  TensorFlow's MatrixSolve and torch's
linalg.solve refuse it ("Input matrix is not invertible", "the input matrix is singular") for
every factor; JAX's solve does not check and returns NaN, so JAX's output is all NaN for a factor
above 0 (at 0 it is the identity).  kornia has the same degenerate solve (noted in
kornia/kornia#4538's review).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_random_perspective_unit_axis.py; done
    # prints REPRODUCED and exits 1 while RandomPerspective refuses a one-pixel-high image, or
    # returns NaN for it; else NOT REPRODUCED, 0

Found by audee's API-level fuzzer (RandomPerspective in training, its values left out and its
acceptance judged; a helper's scratch run of the newly configured random augmentation layers).
Upstream: not found (query: "keras RandomPerspective singular matrix linalg solve small image
height 1"); Keras' random_perspective_test uses larger images.
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}")
x = np.random.default_rng(0).uniform(0, 1, (4, 1, 6, 3)).astype(np.float32)   # one pixel high
bad = []
for factor in (0.0, 1.0):
    try:
        y = keras.ops.convert_to_numpy(keras.layers.RandomPerspective(factor=factor, scale=0.5, seed=1)(x, training=True))
        finite = bool(np.isfinite(y).all())
        print(f"  RandomPerspective(factor={factor}) of a (4, 1, 6, 3) image: ran, "
              f"{'finite' if finite else 'NaN/Inf'}, max change {float(np.nanmax(np.abs(y - x))):.3g}")
        if not finite:
            bad.append(f"factor={factor}: NaN output")
    except Exception as exc:  # noqa: BLE001 - the refusal is the finding
        text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())
        why = re.search(r"(not invertible|singular)[^.]*", text)
        print(f"  RandomPerspective(factor={factor}): {type(exc).__name__}: {why.group(0) if why else text[:100]}")
        bad.append(f"factor={factor}: {type(exc).__name__}")
if bad:
    print(f"REPRODUCED: a one-pixel-high image: {'; '.join(bad)}")
    sys.exit(1)
print("NOT REPRODUCED: RandomPerspective takes a one-pixel-high image")
sys.exit(0)
