"""Keras' torch backend: keras.ops.pad in "reflect" or "symmetric" mode refuses a tensor whose leading dimension is 0
(a batch of zero rows), which NumPy pads: torch's reflection and replication pads read a 3-D tensor as unbatched
(C, H, W) and refuse a C of 0 ("... with possibly 0 batch size and other non-zero dimensions"). Keras'
ContrastLimitedAdaptiveHistogramEqualization pads each tile batch this way and refuses a batch of zero rows.

    python keras_torch_pad_reflect_empty.py [--backend torch|tensorflow|jax]
"""
import argparse
import os
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--backend", default="torch")
os.environ["KERAS_BACKEND"] = ap.parse_args().backend
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import keras  # noqa: E402

x = np.zeros((0, 5, 2), "float32")
width = ((0, 0), (1, 1), (1, 1))
bad = []
for mode in ("reflect", "symmetric", "constant"):
    want = np.pad(x, width, mode=mode).shape
    try:
        got = tuple(keras.ops.pad(x, width, mode=mode).shape)
    except Exception as e:  # noqa: BLE001
        got = f"{type(e).__name__}: {' '.join(str(e).split())[:110]}"
    print(f"{'ok ' if got == want else 'BAD'} ops.pad(zeros((0, 5, 2)), {width}, {mode:9s}) got {got} want {want}")
    if got != want:
        bad.append(mode)
print("backend:", keras.backend.backend(), "keras", keras.__version__)
if bad:
    print(f"REPRODUCED ops.pad refuses a leading 0 dimension in mode {', '.join(bad)}")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
