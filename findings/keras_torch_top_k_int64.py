"""Keras 3.15.1 on PyTorch: ops.top_k returns int64 indices; TensorFlow and JAX return int32,
as Keras' docstring example ("array([4 2 0], shape=(3,), dtype=int32)") and its symbolic
spec (`TopK.compute_output_spec`: indices KerasTensor(..., dtype="int32")) say.  A functional
model therefore declares int32 and produces int64 on torch, and code concatenating the
indices with other int32 tensors changes dtype by backend.  keras/src/backend/torch/math.py,
top_k: `return torch.topk(x, k, sorted=sorted)` passes torch's int64 indices through (no cast).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_top_k_int64.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 int32).  Found by audee
(op-level fuzzing, `audee fuzz --op top_k`: k=1 on a float32 (5, 5, 4, 2) input, output 1
int32 on TF and JAX, int64 on torch).  Upstream: not found (queries: "keras ops top_k indices
dtype int64 torch backend int32 tensorflow", "torch backend top_k returns int64 indices
keras"); the later is_stable rewrite (keras-team/keras#23367, merged) keeps torch's indices.
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.array([[5.0, 2.0, 7.0, 1.0], [0.5, 9.0, 3.0, 4.0]], dtype="float32")
values, indices = ops.top_k(x, 2)
eager = keras.backend.standardize_dtype(indices.dtype)
symbolic = ops.top_k(keras.KerasTensor(x.shape, "float32"), 2)[1].dtype
ref = np.argsort(-x, axis=-1)[:, :2]
same = np.array_equal(ops.convert_to_numpy(indices), ref)
print(f"{keras.backend.backend():10s} top_k indices: eager {eager}, symbolic spec {symbolic}, values "
      f"{ops.convert_to_numpy(indices).tolist()} (numpy argsort {ref.tolist()}: {'same' if same else 'DIFFERENT'})")
if eager != symbolic or not same:
    print(f"REPRODUCED on {keras.backend.backend()}: indices {eager}, spec {symbolic}")
    sys.exit(1)
print("NOT REPRODUCED")
