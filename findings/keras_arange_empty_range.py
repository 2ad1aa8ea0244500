"""Keras 3.15.1: ops.arange of an empty range raises on TensorFlow and PyTorch; NumPy and JAX
return an empty tensor.  NumPy (whose arange keras.ops.arange follows) defines the length as
max(ceil((stop - start) / step), 0), so arange(-2), arange(5, 2) and arange(2, 5, -1) are empty.
- TF (keras/src/backend/tensorflow/numpy.py, arange, line 844) calls tf.range, whose kernel
  requires start <= limit for a positive delta: `InvalidArgumentError: Requires start <= limit
  when delta > 0: 0/-2`.
- torch (keras/src/backend/torch/numpy.py, arange, line 337) calls torch.arange, which refuses:
  `RuntimeError: upper bound and lower bound inconsistent with step sign`.
Code computing a range from data (e.g. arange(n - k) with k > n) thus fails on two of the three
backends.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_arange_empty_range.py; done
    # prints REPRODUCED and exits 1 on tensorflow and torch while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu (JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op arange`: arange(-0.4384, step=1.117) and
arange(-3.999, step=0.3385, dtype="int32"), i.e. stop < 0 = start; TF and torch raise).
"""
import re
import sys

import numpy as np
import keras
from keras import ops

failed = []
for args in [(-2,), (5, 2), (2, 5, -1), (-0.4384, None, 1.117), (3,)]:
    ref = np.arange(*args)
    try:
        y = ops.convert_to_numpy(ops.arange(*args))
        ok = y.shape == ref.shape and np.allclose(y, ref)
        got = f"{y.tolist()}{'' if ok else '  WRONG'}"
    except Exception as e:
        ok = False
        got = f"raises {type(e).__name__}: {re.sub(r'[{][{].*?[}][}] *', '', str(e)).splitlines()[0][:60]}"
    print(f"{keras.backend.backend():10s} arange{args}: {got} (numpy {ref.tolist()})")
    if not ok:
        failed.append(f"arange{args}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
