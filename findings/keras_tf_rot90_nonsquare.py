"""Keras 3.15.1 on TensorFlow: ops.rot90(x, k, axes) with k = 2 on an input of rank > 2 mixes
elements across the other axes when the rotated plane is not square (h != w) (k = 1 and 3 are
right on the (2, 3, 4) input below): the TF backend flattens the axes outside the plane into
(-1, h, w) and reshapes back, which goes wrong for k = 2 on a non-square plane.  torch and JAX follow numpy.rot90.  Known: tensorflow/tensorflow#127248
(reported there), fixed in keras-team/keras#23435 (merged after 3.15.1); regression tests
asked for in keras-team/keras#23694.  Shipped as known issue keras-tf-rot90-nonsquare.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_rot90_nonsquare.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right).  Found by
audee (op-level fuzzing, `audee fuzz --op rot90`: k=2, axes (0, 1) on a bfloat16 (1, 2, 5, 5)
input: TF vs torch out of tolerance).
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.arange(2 * 3 * 4, dtype="float32").reshape(2, 3, 4)
failed = []
for axes in ((0, 1), (1, 2), (0, 2)):
    for k in (1, 2, 3):
        ref = np.rot90(x, k, axes)
        y = ops.convert_to_numpy(ops.rot90(x, k=k, axes=axes))
        ok = y.shape == ref.shape and np.array_equal(y, ref)
        if not ok:
            failed.append(f"k={k} axes={axes}")
            err = np.abs(y - ref).max() if y.shape == ref.shape else f"shape {y.shape} vs {ref.shape}"
            print(f"{keras.backend.backend():10s} rot90(k={k}, axes={axes}) of {x.shape}: max |y - numpy| = {err}  WRONG")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: rot90 k in 1..3 over three planes of {x.shape}: all equal numpy")
