"""Keras 3.15.1 on torch: LayerNormalization / RMSNormalization with axis=1 on a (B, 5, 1, 5)
input normalize over the LAST axis, silently (no error), because torch's fused kernels are
used for a consecutive but non-trailing axis whose length equals the trailing axis' length.

    KERAS_BACKEND=torch python keras_torch_norm_axis_silent.py   -> max |y - ref| ~ 1-2 (wrong)
    KERAS_BACKEND=jax   python keras_torch_norm_axis_silent.py   -> ~2e-7 (right)
    # prints REPRODUCED and exits 1 where max |y - ref| > 1e-4 (torch while the bug is there)

Found by audee (API-level fuzzing, RMSNormalization(axis=1)); same root cause as the error
form fixed by keras-team/keras#23510.
"""
import sys
import numpy as np
import keras

x = np.random.default_rng(0).normal(size=(2, 5, 1, 5)).astype("float32")
eps = 1e-6
failed = []
for layer, ref in [
    (keras.layers.RMSNormalization(axis=1, epsilon=eps), x / np.sqrt((x ** 2).mean(1, keepdims=True) + eps)),
    (keras.layers.LayerNormalization(axis=1, epsilon=eps, center=False, scale=False),
     (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps)),
]:
    y = keras.ops.convert_to_numpy(layer(x))
    err = np.abs(y - ref).max()
    print(f"{keras.backend.backend()} {type(layer).__name__}(axis=1): max |y - ref| = {err:.3g}")
    if not err <= 1e-4:
        failed.append(f"{type(layer).__name__}(axis=1) max |y - ref| = {err:.3g}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: axis=1 normalized over axis 1")
