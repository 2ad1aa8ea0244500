"""Keras torch backend: ops.image.affine_transform on a batch of 0 images fails with
'stack expects a non-empty TensorList' (torch.stack over a per-image python list).
Hits RandomRotation / RandomShear / RandomTranslation / RandomZoom."""
import argparse, os, sys
ap = argparse.ArgumentParser(); ap.add_argument("--backend", default="torch")
os.environ["KERAS_BACKEND"] = ap.parse_args().backend
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras
from keras import ops

bad = 0
def check(name, fn, want):
    global bad
    try:
        got = tuple(ops.shape(fn()))
    except Exception as e:
        got = f"{type(e).__name__}: {' '.join(str(e).split())[:70]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {name:40s} got {got} want {want}")

x0 = np.zeros((0, 8, 8, 3), "float32")
t0 = np.zeros((0, 8), "float32")
check("ops.image.affine_transform (0,8,8,3)", lambda: ops.image.affine_transform(x0, t0), (0, 8, 8, 3))
for L in (keras.layers.RandomRotation(0.2), keras.layers.RandomShear(0.2),
          keras.layers.RandomTranslation(0.2, 0.2), keras.layers.RandomZoom(0.2)):
    check(f"{type(L).__name__}(training=True)", lambda: L(x0, training=True), (0, 8, 8, 3))
print("backend:", keras.backend.backend(), "keras", keras.__version__)
if bad:
    print(f"REPRODUCED {bad} check(s) fail on a batch of 0 rows"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
