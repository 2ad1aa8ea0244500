"""Keras 3.15.1 on torch and JAX (and the NumPy backend): ops.image.rgb_to_hsv first sets every
channel value below the dtype's machine epsilon to 0 (`where(abs(images) < finfo(dtype).eps, 0,
images)`, keras/src/backend/{jax,torch,numpy}/image.py, rgb_to_hsv), so a dark pixel loses its
hue, saturation and value: eps is 1.2e-7 in float32, 9.8e-4 in float16 and 7.8e-3 in bfloat16,
so in bfloat16 the 8-bit level 1/255 (0.0039) is already flushed -- the pixel (1, 1, 0)/255
becomes black (0, 0, 0) instead of hue 1/6, saturation 1.  TensorFlow's backend calls
tf.image.rgb_to_hsv, which computes the standard formula (Python's colorsys) on the same
values.  Keras' docstring: "the output is only well defined if the values in `images` are in
[0, 1]" -- these values are.  Silent.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_rgb_to_hsv_eps_flush.py; done
    # prints REPRODUCED and exits 1 on torch and jax while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, jax 0.10.2, numpy 2.4.
Found by audee (op-level fuzzing, `audee fuzz --op image.rgb_to_hsv` with special inputs:
"tiny" rows of ~1e-37 in a bfloat16 image; the campaign named TensorFlow the odd backend
because torch and JAX share the flush).
"""
import colorsys
import sys

import numpy as np
import keras
from keras import ops

CASES = [  # (name, dtype, pixel, tolerance on h, s, v)
    ("float32 dark pixel (2, 5, 3)e-10", "float32", (2e-10, 5e-10, 3e-10), 1e-5),
    ("float32 ordinary (0.2, 0.5, 0.3)", "float32", (0.2, 0.5, 0.3), 1e-5),
    ("bfloat16 8-bit (1, 1, 0)/255", "bfloat16", (1 / 255, 1 / 255, 0.0), 2e-2),
    ("bfloat16 8-bit (1, 2, 0)/255", "bfloat16", (1 / 255, 2 / 255, 0.0), 2e-2),
    ("float16 (5e-4, 1e-3, 2e-3)", "float16", (5e-4, 1e-3, 2e-3), 2e-3),
    ("bfloat16 ordinary (0.2, 0.5, 0.3)", "bfloat16", (0.2, 0.5, 0.3), 2e-2),
]
failed = []
for name, dtype, pixel, tol in CASES:
    x = ops.cast(ops.convert_to_tensor(np.array(pixel, "float32").reshape(1, 1, 3)), dtype)
    xin = ops.convert_to_numpy(ops.cast(x, "float32")).astype("float64").reshape(3)
    y = ops.convert_to_numpy(ops.cast(ops.image.rgb_to_hsv(x), "float32")).reshape(3)
    ref = np.array(colorsys.rgb_to_hsv(*xin))
    err = float(np.abs(y - ref).max())
    ok = err <= tol
    print(f"{keras.backend.backend():10s} {name:34s}: hsv [{y[0]:.4g}, {y[1]:.4g}, {y[2]:.4g}] "
          f"(colorsys [{ref[0]:.4g}, {ref[1]:.4g}, {ref[2]:.4g}]) max err {err:.2g}{'' if ok else '  WRONG'}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
