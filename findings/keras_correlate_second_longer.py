"""Keras 3.15.1: ops.correlate(x1, x2) departs from numpy.correlate (which Keras mimics) when x2
is LONGER than x1, on TensorFlow and PyTorch; JAX (jnp.correlate) is right.  NumPy swaps the
inputs (and reverses the result) when len(v) > len(a); the TF and torch backends do not:

- torch, mode='same' (keras/src/backend/torch/numpy.py, correlate: `result[..., start_idx :
  start_idx + x1_len]`): the output has len(x1) elements, not max(len(x1), len(x2)) as the
  docstring promises: correlate([1, 2, 3], 6 values, 'same') -> 3 values, numpy 6;
- tensorflow, mode='same': right length, wrong window (start = (full - out) // 2 counted on the
  unswapped full correlation): values shifted by one when len(x2) - len(x1) is odd;
- tensorflow, mode='valid': tf.nn.conv1d with a filter longer than the input: InvalidArgumentError
  ("Computed output size would be negative") when len(x2) > len(x1) + 1, and when
  len(x2) == len(x1) + 1 (a 0-wide VALID conv) oneDNN's eager conv returns a (1, len(x1), 1)
  tensor of zeros/garbage instead of an empty one, so Keras returns len(x1) wrong values where
  numpy returns len(x2) - len(x1) + 1 (that TF part is known: tensorflow/tensorflow#109175,
  open, "on CPU it silently returns a tensor with an incorrect shape"; fix PR #109275 open).
A side effect seen on the way: torch's correlate ends with torch.squeeze(result), so a
length-1 'valid' result comes back 0-d (shape ()) instead of shape (1,).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_correlate_second_longer.py; done
    # prints REPRODUCED and exits 1 on tensorflow and torch while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, jax 0.10.2.  Found by audee
(op-level fuzzing, `audee fuzz --op correlate`: x1 of 3, x2 of 6, mode='same', torch's output
has 3 elements, TF and JAX 6).  Upstream: keras-team/keras#21617 (open) and its fix #21778
(merged) are about TF 'full'/'same' with x1 longer; the longer-x2 case not found (queries:
"keras ops correlate mode same torch backend output length wrong", "correlate second input
longer than first numpy swaps keras torch same mode length x1", "tensorflow oneDNN conv1d
VALID filter longer than input by one returns wrong shape").
"""
import sys

import numpy as np
import keras
from keras import ops

failed = []
for n, m in [(3, 6), (2, 5), (3, 4), (3, 3), (6, 3)]:
    a = np.arange(1, n + 1, dtype="float32")
    v = np.array([2.0, -1.0, 3.0, 0.5, -2.0, 1.0], dtype="float32")[:m]
    for mode in ("valid", "same", "full"):
        ref = np.correlate(a, v, mode)
        try:
            y = ops.convert_to_numpy(ops.correlate(a, v, mode=mode))
            ok = y.shape == ref.shape and np.allclose(y, ref, atol=1e-5)
            got = f"shape {y.shape} {np.round(y, 3).ravel().tolist()}"
        except Exception as e:
            ok, got = False, f"raises {type(e).__name__}"
        if not ok:
            failed.append(f"len {n},{m} {mode}")
        print(f"{keras.backend.backend():10s} len(x1)={n} len(x2)={m} {mode:5s}: {got:45s} numpy shape {ref.shape} "
              f"{ref.tolist()}{'' if ok else '  WRONG'}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
