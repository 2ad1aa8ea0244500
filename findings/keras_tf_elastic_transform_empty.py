"""Candidate 2: RandomElasticTransform on a 0-row batch (TF backend) ->
'Dimensions must be equal, but are 0 and N for SelectV2'.
Cause: keras/src/backend/tensorflow/image.py elastic_transform builds the output with
tf.stack([map_coordinates(...) for b in range(batch_size)]) per channel; for batch_size 0 the list is
empty, tf.stack([]) is a (0,) float tensor, the channel stack gives (0, C) instead of (0, C, H, W),
and the layer's where(apply_transform, transformed, images) fails to broadcast.
oneDNN is switched OFF here (TF_ENABLE_ONEDNN_OPTS=0) to show this is not cause A."""
import os, sys
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
import numpy as np, keras, tensorflow as tf
print("TF_ENABLE_ONEDNN_OPTS =", os.environ["TF_ENABLE_ONEDNN_OPTS"], "backend", keras.backend.backend())
bad = []
def check(name, fn, want):
    try:
        r = fn(); ok = tuple(r.shape) == want
        print(f"{name}: shape {tuple(r.shape)} want {want} {'OK' if ok else 'WRONG'}")
        if not ok: bad.append(name)
    except Exception as e:
        lines = [l for l in str(e).strip().splitlines() if l.strip()]
        key = next((l for l in lines if "ncompatible" in l or "Dimensions" in l or "broadcast" in l), lines[0])
        print(f"{name}: ERROR {type(e).__name__}: {key.strip()[:200]}"); bad.append(name)
for df, shp in [("channels_first", (0, 5, 2, 9)), ("channels_last", (0, 4, 6, 3))]:
    x = np.zeros(shp, np.float32)
    check(f"ops.image.elastic_transform {df}",
          lambda: keras.ops.image.elastic_transform(x, alpha=2.0, sigma=1.0, data_format=df), shp)
    L = keras.layers.RandomElasticTransform(factor=1.0, scale=0.5, value_range=(0, 255), data_format=df)
    check(f"RandomElasticTransform {df}", lambda: L(x, training=True), shp)
    check(f"RandomElasticTransform {df} tf.function", lambda: tf.function(lambda a: L(a, training=True))(tf.constant(x)), shp)
# raw: what the loop builds for batch 0
print("illustration (not a TF bug): tf.stack([tf.stack([], axis=0)] * 3, axis=1).shape =",
      tuple(tf.stack([tf.stack([], axis=0)] * 3, axis=1).shape))
if bad:
    print(f"REPRODUCED keras TF elastic_transform returns/raises wrong shape on a 0-row batch: {', '.join(bad)}"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
