"""Keras 3.15.1, JAX backend: average pooling of a float16 tensor sums each window in float16 and then divides,
so a window whose sum passes 65504 gives +inf where its mean (the answer) fits float16 easily.
keras/src/backend/jax/nn.py ``average_pool`` calls ``_pool(inputs, 0.0, lax.add, ...)``, a
``jax.lax.reduce_window`` add in the input's dtype, then divides by the window size (or by a second reduce_window
of ones for ``padding="same"``); that reduce_window is where the float16 accumulation happens
(``lax.reduce_window(full(27, 7031, float16), 0, add, (27,), (1,), "VALID")`` = inf, while ``jnp.mean`` of the
same values gives 7030, since jnp's reductions accumulate float16 in float32).  The JAX twin of torch's CPU
adaptive_avg_pool3d half accumulation (pytorch/pytorch#140696).

Shown by AveragePooling1D (pool 12), AveragePooling2D (pool 4x4) and AveragePooling3D (pool 3x3x3) on a constant
7031 input under the float16 and mixed_float16 policies, and by keras.ops.average_pool; valid and same padding
alike.  Not shown by GlobalAveragePooling1D/2D/3D (they go through ops.mean: 7032).  Under float32 all give 7031;
bfloat16 never overflows (its range is float32's).  Away from overflow the float16 sum is off by about 2 float16
ulps of the mean (random windows of 27 values): rounding-level, no separate deviation face.

    python findings/keras_jax_avg_pool_half_accum.py
    # prints REPRODUCED and exits 1 while the bug is there (Keras on JAX; reference: NumPy float64 mean)

Versions: keras 3.15.1, jax 0.10.2 (CPU).  Not found upstream (queries, issues corpus: "keras jax average pooling
float16 overflow inf", "jax reduce_window avg_pool float16 overflow inf accumulation keras average pooling half
precision", "AveragePooling2D float16 inf jax backend mixed_float16", "jax avg_pool float16 accumulate in float32
reduce_window sum overflow", "flax avg_pool float16 overflow inf"); nearest, not the same: pytorch/pytorch#140696
(torch CPU adaptive_avg_pool3d sums float16 in float16, open) and #104602.  Found by audee: the api-cpu campaign,
rng 2866 (case nan-AveragePooling3D-jax-onnxruntime-58217570: AveragePooling3D(3, strides 1, same) under
float16 on rows near 7031, JAX +inf at 640 of 672 values per sample where onnxruntime gives the mean; filed under
ort-fp16-cast-roundtrip-elided, triaged by hand).
"""
import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
import numpy as np  # noqa: E402
import keras  # noqa: E402

VALUE = 7031.0  # float16-exact; a window of 12, 16 or 27 of them sums past float16's 65504
L = keras.layers
cases = [
    ("AveragePooling1D(12)", L.AveragePooling1D, (1, 12, 1), dict(pool_size=12)),
    ("AveragePooling2D(4)", L.AveragePooling2D, (1, 4, 4, 1), dict(pool_size=4)),
    ("AveragePooling3D(3, strides 1, same)", L.AveragePooling3D, (1, 6, 4, 4, 1),
     dict(pool_size=3, strides=1, padding="same")),
    ("GlobalAveragePooling3D", L.GlobalAveragePooling3D, (1, 3, 3, 3, 1), {}),
]
bad = []
for name, cls, shape, kw in cases:
    x = np.full(shape, VALUE, np.float32)
    want = x.astype(np.float64).mean()  # every window's mean: 7031
    for policy in ("float16", "mixed_float16", "float32"):
        y = np.asarray(cls(dtype=policy, **kw)(x)).astype(np.float64)
        n_inf = int((~np.isfinite(y)).sum())
        print(f"{name:38s} {policy:14s} non-finite {n_inf:3d}/{y.size:3d}  (float64 mean {want:g})")
        if n_inf:
            bad.append(f"{name} {policy}")
y = np.asarray(keras.ops.average_pool(np.full((1, 27, 1), VALUE, np.float16), (27,), strides=(1,)))
print("keras.ops.average_pool(float16, (27,)):", y.ravel(), y.dtype)
if not np.isfinite(y).all():
    bad.append("ops.average_pool float16")
if bad:
    print("REPRODUCED: +inf where the float64 mean is", VALUE, "in", "; ".join(bad))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
