"""Keras 3.15.1 on PyTorch: ops.nonzero(x) returns ONE int32 tensor of shape (x.ndim, N) (the
transposed torch.nonzero) instead of a tuple of x.ndim index vectors of shape (N,), which is
what numpy.nonzero, the TensorFlow and JAX backends and Keras' own symbolic spec
(`Nonzero.compute_output_spec`: a tuple of KerasTensor((None,), "int32"), fixed to that in
keras-team/keras#19910) return.  `x[ops.nonzero(x)]` is the sign: with the tuple it gathers
the N non-zero elements, with the stacked tensor torch indexes the first axis instead.
keras/src/backend/torch/numpy.py, nonzero: `cast(torch.nonzero(x).T, "int32")`; the fix is
`torch.nonzero(x, as_tuple=True)` (PyTorch's numpy-compatible form, pytorch/pytorch#64502).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_nonzero_stacked.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (TF 2.21.0, JAX 0.10.2 right).  Found by audee
(op-level fuzzing, `audee fuzz --op nonzero`: an int32 (1, 4, 1) input, TF and JAX three
outputs of shape (4,), torch one of shape (3, 4)).  Upstream: not found for Keras (queries:
"keras.ops.nonzero torch backend returns tensor instead of tuple", "keras nonzero torch returns
2D tensor not tuple of index arrays inconsistent with numpy"); PyTorch's own default is
deliberate (pytorch/pytorch#45499, #64502, open).
"""
import sys

import numpy as np
import keras
from keras import ops

x = np.array([[0, 3, 0], [4, 0, 5]], dtype="int32")
ref = np.nonzero(x)
out = ops.nonzero(x)
is_tuple = isinstance(out, (tuple, list))
parts = [ops.convert_to_numpy(t) for t in out] if is_tuple else [ops.convert_to_numpy(out)]
print(f"{keras.backend.backend():10s} ops.nonzero -> {type(out).__name__} of {len(parts) if is_tuple else 1}: "
      f"shapes {[p.shape for p in parts]}; numpy: tuple of {len(ref)}, shapes {[r.shape for r in ref]}")
ok = is_tuple and len(parts) == len(ref) and all(np.array_equal(p, r) for p, r in zip(parts, ref))
idx = tuple(parts) if is_tuple else parts[0]  # what x[ops.nonzero(x)] means, on the numpy copy
try:
    vals = x[idx]
    got = f"shape {vals.shape} {vals.ravel().tolist()}"
    ok = ok and np.array_equal(vals, x[ref])
except IndexError as e:
    got, ok = f"IndexError: {e}", False
print(f"{keras.backend.backend():10s} x[ops.nonzero(x)] -> {got}; x[np.nonzero(x)] -> {x[ref].tolist()}")
if not ok:
    print(f"REPRODUCED on {keras.backend.backend()}: nonzero is not a tuple of index vectors")
    sys.exit(1)
print("NOT REPRODUCED")
