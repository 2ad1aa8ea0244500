"""Keras 3.15.1 on TensorFlow: ops.histogram of an input whose values are all equal (one element,
or a constant tensor) returns bins + 1 identical edges and puts every count in the LAST bin.  NumPy
(which keras.ops.histogram follows, as do torch.histogram and jnp.histogram) widens an empty range
to (v - 0.5, v + 0.5), giving distinct edges and the count in the middle bin.  The TF backend
(keras/src/backend/tensorflow/numpy.py, histogram, line 3848) uses reduce_min/reduce_max as the
range without that rule.  Silent.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_histogram_constant_input.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op histogram`: x = [-2.0734], bins=2: TF edges all
-2.0734; 8 cases).
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for x, bins in [([-2.073436975479126], 2), ([-0.5], 4), ([3.0, 3.0], 3), ([1.0, 2.0, 3.0, 4.0, 5.0], 4)]:
    x = np.array(x, "float32")
    rc, re = np.histogram(x, bins=bins)
    c, e = ops.histogram(x, bins=bins)
    c, e = ops.convert_to_numpy(c), ops.convert_to_numpy(e)
    ok = np.array_equal(c, rc) and np.allclose(e, re, rtol=1e-6)
    print(f"{keras.backend.backend():10s} histogram({x.tolist()}, bins={bins}): counts {c.astype(int).tolist()} "
          f"edges {np.round(e, 3).tolist()} (numpy {rc.tolist()} {np.round(re, 3).tolist()}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"{x.tolist()} bins={bins}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + "; ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
