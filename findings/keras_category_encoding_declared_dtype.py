#!/usr/bin/env python3
"""Keras 3.15's CategoryEncoding under a mixed dtype policy declares its compute dtype (float16)
and returns its variable dtype (float32).  compute_output_spec builds the symbolic output with
self.compute_dtype; call() encodes with dtype=self.dtype, which a mixed policy sets to the variable
dtype.  Every layer after it in a functional model is built for a float16 input and fed float32,
and model.summary() says float16.  TensorFlow, torch and JAX return float32 alike, so no comparison
between them sees it.  Found by audee's declared-output oracle (a layer's computed output against
its symbolic one).

    KERAS_BACKEND=jax python keras_category_encoding_declared_dtype.py
    # prints REPRODUCED and exits 1 while the declared and returned dtypes differ; else NOT
    # REPRODUCED, 0

Upstream: not reported (queries: "keras CategoryEncoding mixed precision output dtype float32 instead
of compute dtype", "CategoryEncoding mixed_float16 dtype"); Keras' master of 2026-08-21 passes
dtype=self.dtype too.  Nearest keras-team/keras#19583 (CategoryEncoding casting its ids to the output
dtype in graph mode; closed).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}: CategoryEncoding(dtype='mixed_float16')")
off = 0
for mode in ("multi_hot", "count", "one_hot"):
    layer = keras.layers.CategoryEncoding(num_tokens=5, output_mode=mode, dtype="mixed_float16")
    ids = np.array([[1, 2], [3, 4]], np.int32) if mode != "one_hot" else np.array([1, 3], np.int32)
    declared = layer(keras.Input(shape=ids.shape[1:], dtype="int32")).dtype
    returned = keras.backend.standardize_dtype(layer(ids).dtype)
    off += declared != returned
    print(f"  output_mode={mode}: declared {declared}, returned {returned} (compute dtype {layer.compute_dtype})")
print("REPRODUCED: CategoryEncoding declares its compute dtype and returns its variable dtype" if off
      else "NOT REPRODUCED")
sys.exit(1 if off else 0)
