"""Keras 3.15.1 on torch: keras.ops.moments returns a negative variance for data with a large
mean and a small spread, where TensorFlow and JAX return the right small positive value.

The torch backend computes the variance as E[x^2] - E[x]^2 in float32 and does not clamp it;
keras-team/keras#18795 clamped it at 0 for TensorFlow and JAX only ("it won't guarantee that
variance >= 0 ... which causes issues when used with BatchNorm").  Rows around 5217 with a
spread of 0.04 give -4.0 and -2.0 on torch; the float64 variance is about 0.0015.  Normalization
layers that take their statistics from moments (BatchNormalization in training mode,
GroupNormalization) then divide by sqrt(negative + epsilon): NaN or huge values.

    python keras_torch_moments_negative_variance.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu, tensorflow 2.21.0, jax 0.10.2.  Found by audee (the
api-cpu campaign, rng 2812: a GroupNormalization after a Conv2D, torch's labels apart).
"""
import os
import subprocess
import sys

CODE = r"""
import numpy as np, keras
rng = np.random.default_rng(0)
x = (5217.0 + rng.standard_normal((4, 64)) * 0.04).astype(np.float32)
_, v = keras.ops.moments(x, axes=[1])
print(" ".join(repr(float(a)) for a in np.asarray(keras.ops.convert_to_numpy(v))))
"""

got = {}
for backend in ("torch", "tensorflow", "jax"):
    run = subprocess.run([sys.executable, "-c", CODE], env={**os.environ, "KERAS_BACKEND": backend},
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"{backend}: cannot run: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}")
        sys.exit(0)
    got[backend] = [float(a) for a in run.stdout.split()]
    print(f"{backend:10s} variance: {got[backend]}")
if min(got["torch"]) < 0 and min(got["tensorflow"]) > 0 and min(got["jax"]) > 0:
    print("REPRODUCED: keras.ops.moments gives a negative variance on torch")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
