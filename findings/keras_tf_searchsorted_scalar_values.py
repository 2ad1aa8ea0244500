"""Keras 3.15.1 on TensorFlow: ops.searchsorted with 0-D (scalar) values raises; NumPy, torch and
JAX return a 0-D index.  Keras documents values as "N-D tensor of query insertion values" and
the result as having values' shape; keras/src/backend/tensorflow/numpy.py, searchsorted (line
2884), passes the scalar to tf.searchsorted, which slices values.shape[-1]:
`InvalidArgumentError: slice index -1 of dimension 0 out of bounds. [Op:StridedSlice]`.
The TF half is known: tensorflow/tensorflow#127778 (open), fix in tensorflow/tensorflow#127779
(open).  Sibling of the N-D values failure (keras_tf_searchsorted_nd_values.py, fixed in Keras by
keras-team/keras#23436, whose reshape is not checked here for 0-D values).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_searchsorted_scalar_values.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, `audee fuzz --op searchsorted`: int32 sequence [-5, -1, 2, 7],
0-d value -9).
"""
import re
import sys

import numpy as np
import keras
from keras import ops

seq = np.array([-5, -1, 2, 7], dtype="int32")
failed = []
for side in ("left", "right"):
    for v in (np.array(-9, "int32"), np.array(2, "int32"), np.array([2], "int32")):
        ref = np.searchsorted(seq, v, side=side)
        try:
            y = ops.convert_to_numpy(ops.searchsorted(seq, v, side=side))
            ok = y.shape == np.shape(ref) and np.array_equal(y, ref)
            got = f"{y.tolist()} shape {y.shape}{'' if ok else '  WRONG'}"
        except Exception as e:
            ok = False
            got = f"raises {type(e).__name__}: {re.sub(r'[{][{].*?[}][}] *', '', str(e)).splitlines()[0][:70]}"
        print(f"{keras.backend.backend():10s} searchsorted(seq, {v.tolist()!s:>4}, {side!r:7}): {got} "
              f"(numpy {np.asarray(ref).tolist()})")
        if not ok:
            failed.append(f"{v.tolist()} {side}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
