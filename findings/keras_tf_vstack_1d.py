"""Keras 3.15.1 on TensorFlow: ops.vstack of 1-D tensors concatenates them into one long vector
instead of stacking them as rows.  NumPy's vstack (which keras.ops.vstack follows) first turns
each 1-D input of shape (N,) into (1, N): vstack of four (3,) vectors is (4, 3).  TF returns
(12,); torch (torch.vstack) and JAX (jnp.vstack) return (4, 3).  Silent: a later op sees 12
values in a row where it expected a 4 x 3 matrix.  keras/src/backend/tensorflow/numpy.py,
vstack (line 3404): `tf.concat(xs, axis=0)` without numpy's atleast_2d.  (hstack and 2-D inputs
are right.)  Keras' symbolic spec (ops/numpy.py, Vstack.compute_output_spec) makes the same
mistake, (12,) on every backend, so on torch and JAX a functional model declares (12,) and
computes (4, 3).  The docstring says "Stack tensors in sequence vertically (row wise)", NumPy's.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_vstack_1d.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op vstack`: four float32 (3,) inputs, TF output
shape (12,), torch and JAX (4, 3)).
"""
import sys

import numpy as np
import keras
from keras import ops

rows = [np.arange(3, dtype="float32") + 10 * i for i in range(4)]
failed = []
for name, xs in [("four (3,) vectors", rows), ("one (3,) vector", rows[:1]),
                 ("(2, 3) and (1, 3)", [np.stack(rows[:2]), rows[2][None]])]:
    ref = np.vstack(xs)
    y = ops.convert_to_numpy(ops.vstack(xs))
    ok = y.shape == ref.shape and np.array_equal(y, ref)
    spec = ops.vstack([keras.KerasTensor(x.shape, "float32") for x in xs]).shape
    print(f"{keras.backend.backend():10s} vstack of {name:18s}: shape {y.shape}, symbolic spec {spec} "
          f"(numpy {ref.shape}){'' if ok else '  WRONG'}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
