"""Keras 3.15.1 on PyTorch: ops.segment_sum / segment_max / segment_min / segment_prod compute
in float32 whatever the data's dtype: keras/src/backend/torch/math.py, _segment_reduction_fn,
`result.scatter_reduce(0, segment_ids, data.float(), ...)` on a float32 buffer, cast back to
data.dtype at the end.  So int32 values above 2**24 and float64 values come back rounded, and
an empty segment of an int32 segment_min/max is +-inf cast to int32 (-2147483648 on x86 for
both), where TensorFlow and JAX compute in the data's dtype (exact; empty int32 min =
2147483647, max = -2147483648; JAX's float64 is float32 unless jax_enable_x64, so that case
is skipped on JAX).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_segment_float32.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 exact).  Found while
triaging audee's op-level segment_min candidate (empty segments, see
keras_segment_empty_segment_fill.py).  Upstream: not found (query: "keras segment_min
segment_max empty segment value tensorflow lowest float inf torch jax inconsistent"; the
segment_sum torch fix keras-team/keras-core#263 and segment_min's addition #22829 keep
data.float()).
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
cases = [
    ("int32", np.array([16777217, 3, 2147483000], dtype="int32"), np.array([0, 1, 1], dtype="int32"), 2),
    ("float64", np.array([1.0 + 2.0 ** -40, 0.1, 0.2], dtype="float64"), np.array([0, 1, 1], dtype="int32"), 2),
    ("int32, empty segment 1", np.array([5, 7], dtype="int32"), np.array([0, 2], dtype="int32"), 3),
]
for name, data, ids, n in cases:
    if data.dtype == "float64" and keras.backend.backend() == "jax":
        print("jax        float64 skipped: JAX runs without x64 by default, float64 is float32 there (documented)")
        continue
    for fn in ("segment_sum", "segment_max", "segment_min"):
        y = ops.convert_to_numpy(getattr(ops, fn)(data, ids, num_segments=n))
        ref = np.array([getattr(np, {"segment_sum": "sum", "segment_max": "max", "segment_min": "min"}[fn])(
            data[ids == s]) if (ids == s).any() else y[s] for s in range(n)], dtype=data.dtype)
        if "empty" in name:  # the identity of the reduction in the data's dtype, as TF and JAX give it
            info = np.iinfo(data.dtype)
            ref[1] = {"segment_sum": 0, "segment_max": info.min, "segment_min": info.max}[fn]
        ok = y.dtype == data.dtype and np.array_equal(y, ref)
        if not ok:
            failed.append(f"{fn} {name}")
        print(f"{keras.backend.backend():10s} {fn:11s} {name:23s}: {y.tolist()}  ref {ref.tolist()}{'' if ok else '  WRONG'}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
