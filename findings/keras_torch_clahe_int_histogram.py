"""Keras 3.15.1 on torch: ContrastLimitedAdaptiveHistogramEqualization equalizes nothing when its
clip limit per tile is below one pixel count.  The layer builds its tile histograms with
`self.backend.nn.one_hot(...)` without a dtype; the torch backend's one_hot returns int64
(`keras.ops.one_hot` gives float32, TensorFlow's and JAX's backend functions float32), so
`limit = clip_limit * tile_h * tile_w / 256` is cast to int64 and truncated (0.9375 -> 0 for a
4x4 tile and clip_limit 15).  Every bin is then clipped to 0 and the excess spread uniformly: the
mapping is the identity and torch returns the pixels unequalized (floor(x)), where TensorFlow and
JAX stretch a low-contrast image and agree.

    python keras_torch_clahe_int_histogram.py   # runs each Keras backend in a child process
    # prints REPRODUCED and exits 1 while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu, tensorflow 2.21.0, JAX 0.10.2.  Found by audee (the
api-cpu campaign, rng 2811: a deviation with torch odd on CLAHE(value_range=(-1, 1),
clip_limit=1, tile_grid_size=(2, 2))).
"""
import os
import subprocess
import sys

CODE = r"""
import numpy as np, keras
x = np.random.default_rng(0).uniform(100, 120, (1, 8, 8, 1)).astype(np.float32)  # low contrast
layer = keras.layers.ContrastLimitedAdaptiveHistogramEqualization(
    value_range=(0, 255), clip_limit=15.0, tile_grid_size=(2, 2))  # 4x4 tiles: limit 15 * 16 / 256
y = keras.ops.convert_to_numpy(layer(x))
hot = keras.src.backend.standardize_dtype(layer.backend.nn.one_hot(np.array([1, 2], np.int32), 4).dtype)
np.save(os.environ["OUT"], y)
print(hot, float(np.abs(y - np.floor(x)).max()))
"""

outs, lines = {}, {}
for backend in ("tensorflow", "jax", "torch"):
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"clahe_{os.getpid()}_{backend}.npy")
    p = subprocess.run([sys.executable, "-c", "import os\n" + CODE],
                       env={**os.environ, "KERAS_BACKEND": backend, "OUT": path, "TF_CPP_MIN_LOG_LEVEL": "3"},
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{backend:10s} raises: {p.stderr.strip().splitlines()[-1][:200]}")
        continue
    import numpy as np

    outs[backend] = np.load(path)
    os.remove(path)
    hot, to_floor = p.stdout.split()
    print(f"{backend:10s} backend.nn.one_hot dtype {hot:8s} max |y - floor(x)| {float(to_floor):7.2f}")
if {"tensorflow", "jax", "torch"} <= set(outs):
    tf_jax = float(np.abs(outs["tensorflow"] - outs["jax"]).max())
    tf_torch = float(np.abs(outs["tensorflow"] - outs["torch"]).max())
    print(f"max |tensorflow - jax| {tf_jax:.3g}, max |tensorflow - torch| {tf_torch:.3g}")
    if tf_jax < 1e-2 and tf_torch > 10.0:
        print("REPRODUCED: torch's CLAHE leaves the image unequalized (its int64 histogram truncates the clip limit)")
        sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
