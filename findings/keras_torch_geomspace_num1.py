"""Keras 3.15.1 on PyTorch: ops.geomspace(start, stop, num=1) returns [nan] instead of
[start] (numpy.geomspace, TensorFlow and JAX), for every dtype and endpoint.  The torch
backend's geomspace passes start/stop to logspace as 0-d tensors; 0-d torch tensors have
__len__, so logspace takes its array branch, whose `torch.arange(num) / (num - 1)` is 0/0
when num == 1 (keras/src/backend/torch/numpy.py, logspace).  ops.logspace with tensor
start/stop and num=1 meets the same division.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_geomspace_num1.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 right).  Found by audee
(op-level fuzzing, `audee fuzz --op geomspace`: geomspace(2.901, 18.72, num=1,
endpoint=False, dtype=float16): torch NaN, TF and JAX 2.9).  Upstream: not found (query:
"keras geomspace logspace num=1 nan torch backend"; geomspace was added by
keras-team/keras#22257, merged).
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for name, start, stop in [("geomspace", 2.9, 18.7), ("logspace", ops.convert_to_tensor(0.5), ops.convert_to_tensor(1.5))]:
    for num in (1, 2, 3):
        for endpoint in (True, False):
            y = ops.convert_to_numpy(getattr(ops, name)(start, stop, num=num, endpoint=endpoint, dtype="float32"))
            ref = getattr(np, name)(float(start), float(stop), num=num, endpoint=endpoint)
            ok = y.shape == ref.shape and np.allclose(y, ref, rtol=1e-5)
            if not ok:
                failed.append(f"{name} num={num} endpoint={endpoint}")
                print(f"{keras.backend.backend():10s} {name}(num={num}, endpoint={endpoint}) -> {y.tolist()}, "
                      f"numpy {ref.tolist()}  WRONG")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: geomspace/logspace num in 1..3: all match numpy")
