"""Keras 3.15.1: ops.segment_min / segment_max give an EMPTY segment (an id below num_segments
that no element carries) a different value on each backend, and Keras' docstring does not say
which: TensorFlow's unsorted path (tf.math.unsorted_segment_min/max, sorted=False) gives the
dtype's largest / lowest finite value (+-3.4e38 for float32, as TF documents), its sorted path
(tf.math.segment_min/max) gives 0 (as TF documents), PyTorch and JAX give +-inf.  The sum
agrees (0) everywhere.  A NaN/Inf oracle sees +-3.4e38 against +-inf.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_segment_empty_segment_fill.py; done
    # prints REPRODUCED and exits 1 where an empty segment is not +-inf (the JAX/torch value)

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, jax 0.10.2.  Found by audee
(op-level fuzzing, `audee fuzz --op segment_min`: segment_ids [0, 0], num_segments=2,
sorted=False: segment 1 is 3.4e38 on TF, inf on torch and JAX).  Upstream: TF's values are
its documented semantics (tensorflow/tensorflow#58123, closed, on the GPU sorted kernel not
giving the documented 0); no Keras report on the cross-backend difference found (query:
"keras segment_min segment_max empty segment value tensorflow lowest float inf torch jax
inconsistent").
"""
import sys

import numpy as np
import keras
from keras import ops

data = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], dtype="float32")
ids = np.array([0, 0, 2], dtype="int32")  # segment 1 is empty
want = {"segment_min": np.inf, "segment_max": -np.inf, "segment_sum": 0.0}
failed = []
for fn, empty in want.items():
    for sorted_ in (False, True):
        kwargs = {"sorted": sorted_}
        if not (sorted_ and keras.backend.backend() == "tensorflow"):  # TF refuses num_segments with sorted=True
            kwargs["num_segments"] = 3
        y = ops.convert_to_numpy(getattr(ops, fn)(data, ids, **kwargs))
        ok = bool(np.all(y[1] == empty))
        if not ok:
            failed.append(f"{fn} sorted={sorted_}")
        print(f"{keras.backend.backend():10s} {fn:11s} sorted={sorted_!s:5s}: empty segment -> {y[1].tolist()}"
              f"{'' if ok else f'  (torch/JAX: {empty})'}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
