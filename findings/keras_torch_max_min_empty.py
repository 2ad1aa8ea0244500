"""Keras torch backend: ops.max/ops.min refuse any tensor with 0 elements, even when
the reduced axis is non-empty (NumPy: np.max(np.zeros((0,3,4)), axis=1).shape == (0,4)).
Also `initial=` ignores `axis` and returns a scalar / all-ones shape.
Same refusal on --backend tensorflow in eager mode (tf.assert_greater(size(x), 0)); jax is fine."""
import argparse, os, sys
ap = argparse.ArgumentParser(); ap.add_argument("--backend", default="torch")
os.environ["KERAS_BACKEND"] = ap.parse_args().backend
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras
from keras import ops

x = np.zeros((0, 3, 4), "float32")
bad = 0
def check(name, fn, want):
    global bad
    try:
        got = tuple(ops.shape(fn()))
    except Exception as e:
        got = f"{type(e).__name__}: {' '.join(str(e).split())[:70]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {name:45s} got {got} want {want}")

for op, npop in (("max", np.max), ("min", np.min)):
    f = getattr(ops, op)
    check(f"ops.{op}(x(0,3,4), axis=1)", lambda: f(x, axis=1), npop(x, axis=1).shape)
    check(f"ops.{op}(x, axis=(1,2), keepdims=True)", lambda: f(x, axis=(1, 2), keepdims=True), npop(x, axis=(1, 2), keepdims=True).shape)
    check(f"ops.{op}(x, axis=1, initial=0.)", lambda: f(x, axis=1, initial=0.0), npop(x, axis=1, initial=0.0).shape)
gm = keras.layers.GlobalMaxPooling1D()
check("GlobalMaxPooling1D on (0,3,4)", lambda: gm(x), (0, 4))
print("backend:", keras.backend.backend(), "keras", keras.__version__)
if bad:
    print(f"REPRODUCED {bad} check(s) fail on a batch of 0 rows"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
