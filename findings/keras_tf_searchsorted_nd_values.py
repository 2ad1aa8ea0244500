"""Keras 3.15.1 on TensorFlow: ops.searchsorted(sorted_sequence, values) raises when `values`
has more than one dimension ("Leading dim_size of both tensors must match"), although Keras
documents `values` as an "N-D tensor of query insertion values" and numpy, torch and JAX
search every value in the 1-D sequence.  keras/src/backend/tensorflow/numpy.py, searchsorted,
passes N-D values straight to tf.searchsorted, which wants matching leading dimensions.
Known and fixed upstream: keras-team/keras#23436 (merged after 3.15.1: "Fix searchsorted for
multi-dimensional values in Tensorflow backend"; issue #23452, closed).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_searchsorted_nd_values.py; done
    # prints REPRODUCED and exits 1 on tensorflow while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0 (torch 2.13.0+cpu, JAX 0.10.2 right).  Found by
audee (op-level fuzzing, `audee fuzz --op searchsorted`: a sequence of 5, values (1, 1, 3, 5),
side='right').
"""
import re
import sys

import numpy as np
import keras
from keras import ops


def short(e):
    """The error's first line without TF's {{function_node ...}} prefix."""
    return re.sub(r"\{\{.*?\}\}\s*", "", str(e)).splitlines()[0][:60]


seq = np.array([-1.0, 0.0, 0.5, 2.0], dtype="float32")
values = np.array([[[-2.0, 0.5, 3.0], [0.0, 1.0, 2.0]]], dtype="float32")
failed = []
for side in ("left", "right"):
    ref = np.searchsorted(seq, values, side=side)
    try:
        y = ops.convert_to_numpy(ops.searchsorted(seq, values, side=side))
        ok = np.array_equal(y, ref)
        got = str(y.tolist())
    except Exception as e:
        ok, got = False, f"raises {type(e).__name__}: {short(e)}"
    print(f"{keras.backend.backend():10s} side={side:5s} values {values.shape}: {got}  numpy {ref.tolist()}")
    if not ok:
        failed.append(side)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
