"""Keras 3.15.1: ops.size(x) returns a different type on each backend: an int32 tensor on
TensorFlow (tf.size), an int64 tensor on PyTorch (torch.prod of the shape), a Python int on
JAX (jnp.size; numpy's np.size also returns a Python int), while Keras' symbolic spec
(`Size.compute_output_spec`) declares an int32 scalar.  Known upstream:
keras-team/keras#23495 (open: "keras.ops.size returns int64 on four of five backends but
declares int32"), with the open PR keras-team/keras#23496 that makes ops.size a Python int
everywhere, as ops.shape is.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_size_dtype.py; done
    # prints REPRODUCED and exits 1 where the eager result is not the declared int32 tensor

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, jax 0.10.2.  Found by audee
(op-level fuzzing, `audee fuzz --op size`: int32 on TF, int64 on torch and JAX (a Python int
read as numpy int64)); which side is "right" is the open question of #23495/#23496.
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.zeros((3, 4), dtype="float32")
s = ops.size(x)
kind = type(s).__name__
dtype = keras.backend.standardize_dtype(s.dtype) if hasattr(s, "dtype") else f"python {kind}"
spec = ops.size(keras.KerasTensor(x.shape, "float32")).dtype
print(f"{keras.backend.backend():10s} ops.size -> {kind} {dtype} = {int(s)}; symbolic spec {spec}; np.size -> "
      f"{type(np.size(x)).__name__} {np.size(x)}")
if dtype != spec:
    print(f"REPRODUCED on {keras.backend.backend()}: {dtype}, declared {spec}")
    sys.exit(1)
print("NOT REPRODUCED")
