"""Candidate 3: RandomElasticTransform on a 0-row batch (torch backend) ->
'RuntimeError: stack expects a non-empty TensorList'.
Cause: keras/src/backend/torch/image.py elastic_transform fills each channel with
torch.stack([map_coordinates(...) for b in range(batch_size)]); for batch_size 0 the list is empty.
This is the elastic_transform call site, not affine_transform (cause D) - the script prints the
innermost keras frame of the traceback to show which function raised."""
import os, sys, traceback
os.environ.setdefault("KERAS_BACKEND", "torch")
import numpy as np, keras, torch
keras.config.disable_traceback_filtering()
bad = []
def check(name, fn, want):
    try:
        r = fn(); ok = tuple(r.shape) == want
        print(f"{name}: shape {tuple(r.shape)} want {want} {'OK' if ok else 'WRONG'}")
        if not ok: bad.append(name)
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)
        frames = [f for f in tb if "keras/src/backend/torch" in f.filename]
        where = f"{frames[-1].name}() {os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
        msg = [l for l in str(e).strip().splitlines() if l.strip()]
        key = next((l for l in msg if "stack expects" in l), msg[0])
        print(f"{name}: ERROR {type(e).__name__}: {key.strip()[:120]} [raised in {where}]"); bad.append(name)
for df, shp in [("channels_first", (0, 5, 2, 9)), ("channels_last", (0, 4, 6, 3))]:
    x = np.zeros(shp, np.float32)
    check(f"ops.image.elastic_transform {df}",
          lambda: keras.ops.image.elastic_transform(x, alpha=2.0, sigma=1.0, data_format=df), shp)
    L = keras.layers.RandomElasticTransform(factor=1.0, scale=0.5, value_range=(0, 255), data_format=df)
    check(f"RandomElasticTransform {df}", lambda: L(x, training=True), shp)
try: torch.stack([]); print("raw torch.stack([]): ok")
except RuntimeError as e: print("raw torch.stack([]): RuntimeError:", str(e)[:60])
if bad:
    print(f"REPRODUCED keras torch elastic_transform fails on a 0-row batch: {', '.join(bad)}"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
