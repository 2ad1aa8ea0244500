"""Keras 3.15.1 on torch: median / quantile / percentile / nanmedian / nanquantile of a zero-size
tensor raise `RuntimeError: quantile() input tensor must be non-empty` even when the reduced
axis is not empty, e.g. median of a (1, 5, 0, 1) tensor along axis 3 (size 1).  NumPy, Keras'
symbolic spec, TensorFlow and JAX return the empty result of shape (1, 5, 0): no value is
undefined there.  keras/src/backend/torch/numpy.py quantile (line 1704; median delegates to it)
and nanquantile (line 1493) move the reduced axes last and call torch.quantile /
torch.nanquantile, whose TORCH_CHECK(self.numel() > 0) rejects any empty input, batch
dimensions included (the check's validity was questioned in review, pytorch/pytorch#39417).
The backend needs an early return for x.size == 0.
When the reduced axis itself is empty, NumPy returns NaN with "RuntimeWarning: Mean of empty
slice" (np.quantile raises, numpy#29315); printed here for information, not counted: that
case is degenerate.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_quantile_zero_size.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Versions: keras 3.15.1, torch 2.13.0+cpu (tensorflow 2.21.0, JAX 0.10.2 right; numpy 2.4.6).
Found by audee (op-level fuzzing, ops-cpu campaign: median of a bfloat16 (1, 5, 0, 1) tensor,
axis=3: torch alone raises).
"""
import sys
import warnings

import numpy as np
import keras
from keras import ops

calls = {
    "median": (lambda t, **k: ops.median(t, **k), lambda a, **k: np.median(a, **k)),
    "quantile(q=0.3)": (lambda t, **k: ops.quantile(t, 0.3, **k), lambda a, **k: np.quantile(a, 0.3, **k)),
    "percentile(q=30)": (lambda t, **k: ops.percentile(t, 30, **k), lambda a, **k: np.percentile(a, 30, **k)),
    "nanmedian": (lambda t, **k: ops.nanmedian(t, **k), lambda a, **k: np.nanmedian(a, **k)),
    "nanquantile(q=0.3)": (lambda t, **k: ops.nanquantile(t, 0.3, **k), lambda a, **k: np.nanquantile(a, 0.3, **k)),
}
cases = [((1, 5, 0, 1), dict(axis=3), True), ((0, 4), dict(axis=1), True),
         ((0, 4), dict(axis=0), False)]   # last: the reduced axis is empty (numpy: NaN + warning)
failed = []
for shape, kw, counted in cases:
    x = np.zeros(shape, dtype="float32")
    for name, (op, ref_fn) in calls.items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                ref = np.asarray(ref_fn(x, **kw))
                ref_txt = f"{ref.shape} {ref.ravel().tolist()}"
            except Exception as exc:  # np.quantile of an empty axis raises (numpy#29315)
                ref, ref_txt = None, f"raises {type(exc).__name__}"
        why = f"numpy warns '{w[0].message}'" if w else "numpy raises"
        note = "" if counted else f" [reduced axis empty: {why}; not counted]"
        try:
            y = ops.convert_to_numpy(op(x, **kw))
            got = f"shape {y.shape} {y.ravel().tolist()}"
            ok = ref is not None and y.shape == ref.shape
        except Exception as exc:
            got, ok = f"raises {type(exc).__name__}: {str(exc).splitlines()[0][:60]}", False
        spec = op(keras.KerasTensor(shape, "float32"), **kw).shape
        label = f"{name}(x {shape}, axis={kw['axis']})"
        print(f"{keras.backend.backend():10s} {label:36s}: {got} (numpy {ref_txt}; "
              f"spec {spec}){'' if ok else ('  WRONG' if counted else '  (differs)')}{note}")
        if not ok and counted:
            failed.append(label)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
