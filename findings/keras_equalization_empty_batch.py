"""Candidate 1: RandAugment on a 0-row batch (TF backend) -> 'slice index 0 of dimension 0 out of bounds'.
Cause: keras Equalization._apply_equalization does cdf_min = take(cdf, nonzero(cdf)[0][0]); an empty
batch gives an all-zero histogram, nonzero() is empty and [0][0] is out of bounds. RandAugment always
evaluates every sub-layer (selected later via where), so it hits Equalization for any num_ops."""
import os, sys
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import numpy as np, keras
import tensorflow as tf
x = np.zeros((0, 3, 5, 1), np.float32)
bad = []
def check(name, fn):
    try:
        r = fn(); ok = tuple(r.shape) == x.shape
        print(f"{name}: shape {tuple(r.shape)} {'OK' if ok else 'WRONG'}")
        if not ok: bad.append(name)
    except Exception as e:
        print(f"{name}: ERROR {type(e).__name__}: {str(e).strip().splitlines()[0][:140]}"); bad.append(name)
eq = keras.layers.Equalization(value_range=(0, 1), data_format="channels_first")
check("Equalization eager", lambda: eq(x, training=True))
check("Equalization tf.function", lambda: tf.function(lambda a: eq(a, training=True))(tf.constant(x)))
ra = keras.layers.RandAugment(value_range=(0, 1), num_ops=1, factor=0.3975, interpolation="nearest",
                              data_format="channels_first")
check("RandAugment tf.function", lambda: tf.function(lambda a: ra(a, training=True))(tf.constant(x)))
# raw op level: the indexing Keras does
check("nonzero(zeros(256))[0][0] (raw)", lambda: tf.reshape(
    keras.ops.take(tf.zeros(256), keras.ops.nonzero(tf.zeros(256))[0][0]), [0, 3, 5, 1]))
# control: one non-empty row works
check("Equalization 1 row (control)", lambda: eq(np.random.rand(1, 3, 5, 1).astype("float32"), training=True)[:0])
if bad:
    print(f"REPRODUCED keras Equalization (used by RandAugment) fails on a 0-row batch [{keras.backend.backend()}]: {', '.join(bad)}"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
