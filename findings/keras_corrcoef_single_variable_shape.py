"""Keras 3.15.1: ops.corrcoef of a 2-D input holding ONE variable, shape (1, D), has a different
shape on each backend.  Keras' docstring: "x: A 2D tensor of shape (N, D) ... Returns: A tensor of
shape (N, N)", i.e. (1, 1).  TensorFlow (its own matmul-based corrcoef) returns (1, 1) = [[1.0]];
torch (torch.corrcoef) and JAX (jnp.corrcoef) return a 0-d scalar 1.0, as numpy.corrcoef does
(numpy squeezes the matrix of a single variable).  A (N, D) input with N >= 2 has the same (N, N)
shape everywhere.  So the same call gives (1, 1) on one backend and () on the others; Keras
promises one result shape.  Keras' 3.15.1 symbolic spec (ops/numpy.py, Corrcoef.compute_output_spec)
says x.shape, (1, D), which is neither (keras-team/keras#23424, merged after 3.15.1, makes the spec
(N, N) for 2-D inputs, which torch and JAX still contradict for N = 1).

Not the same as findings row 41 (a 1-D input raising on TF, outside the 3.15.1 docstring): here the
input is the documented 2-D (N, D) with N = 1.

Reproduced on a backend = its shape differs from the docstring's (N, N) (torch, JAX); TensorFlow's
line says where it differs from numpy instead.  Which side to change is Keras' call; the
inconsistency is the bug.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_corrcoef_single_variable_shape.py; done
    # exits 1 on torch and jax while the shapes disagree

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, JAX 0.10.2, numpy 2.4.6.
Found by audee (op-level fuzzing, ops-cpu campaign: op-corrcoef-v00003, x float32 (1, 2): TF
output shape (1, 1), torch and JAX (); also (1, 3), (1, 4), (1, 5) float16/float32 cases).
"""
import sys

import numpy as np
import keras
from keras import ops

b = keras.backend.backend()
cases = [
    ("(1, 3)", np.array([[1.0, 2.0, 4.0]], dtype="float32")),
    ("(1, 5)", np.array([[0.5, -1.0, 2.0, 3.5, -2.0]], dtype="float32")),
    ("(2, 3) control", np.array([[1.0, 2.0, 4.0], [2.0, 1.0, 0.5]], dtype="float32")),
]
failed = []
for name, x in cases:
    ref = np.corrcoef(x)
    doc = (x.shape[0], x.shape[0])
    y = ops.convert_to_numpy(ops.corrcoef(x))
    spec = ops.corrcoef(keras.KerasTensor(x.shape, "float32")).shape
    notes = []
    if y.shape != doc:
        notes.append("differs from the docstring's (N, N)")
    if y.shape != ref.shape:
        notes.append("differs from numpy")
    print(f"{b:10s} corrcoef of {name:14s}: shape {y.shape} {np.round(y, 4).tolist()}; "
          f"docstring {doc}; numpy {ref.shape} {np.round(ref, 4).tolist()}; symbolic spec {spec}"
          + (("  <- " + ", ".join(notes)) if notes else ""))
    if y.shape != doc:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {b}: shape is not the docstring's (N, N) for " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {b} (shape = docstring's (N, N); see the numpy note above)")
