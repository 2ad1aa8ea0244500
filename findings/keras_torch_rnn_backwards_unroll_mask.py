"""Keras 3.15.1 on PyTorch: a recurrent layer (SimpleRNN, GRU, LSTM) with go_backwards=True
and unroll=True called with a mask raises AttributeError: 'tuple' object has no attribute
'shape'.  keras/src/backend/torch/rnn.py (rnn, the unrolled masked branch) reverses the
per-step masks with `torch.flip(mask_list, dims=mask_list.shape)`, but `mask_list` is the
tuple `torch.unbind(mask)` returns (the fix: `mask_list = mask_list[::-1]`).  TensorFlow and
JAX run it, and equal the same layer with unroll=False; torch with unroll=False runs too.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_rnn_backwards_unroll_mask.py; done
    # prints REPRODUCED and exits 1 on torch while the bug is there

Found by audee (API-level LSTM/GRU cases with a drawn mask, `--call-mask`; go_backwards and
unroll drawn).  Upstream: not found (query: "keras torch backend rnn go_backwards unroll mask
'tuple' object has no attribute 'shape' torch.flip unbind").
"""
import re
import sys

import numpy as np
import keras

x = np.random.default_rng(0).standard_normal((2, 4, 3)).astype("float32")
mask = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], bool)  # the first row padded at its last step
failed = []
for cls in (keras.layers.SimpleRNN, keras.layers.GRU, keras.layers.LSTM):
    outs = {}
    for unroll in (False, True):
        layer = cls(2, go_backwards=True, unroll=unroll, seed=1)
        layer.build(x.shape)
        if unroll:
            layer.set_weights(weights)
        else:
            weights = layer.get_weights()
        try:
            outs[unroll] = keras.ops.convert_to_numpy(layer(keras.ops.convert_to_tensor(x),
                                                             mask=keras.ops.convert_to_tensor(mask)))
        except Exception as e:  # what the torch backend raises
            text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # Keras' bold markers
            lines = [ln for ln in text.splitlines() if "has no attribute" in ln] or text.splitlines()
            outs[unroll] = f"{type(e).__name__}: {lines[0].strip()[:80]}"
    got = outs[True]
    res = (f"max |unrolled - not unrolled| = {np.abs(got - outs[False]).max():.3g}" if not isinstance(got, str)
           else f"unroll=True RAISES {got}")
    print(f"{keras.backend.backend():10s} {cls.__name__:9s} go_backwards, masked: {res}")
    if isinstance(got, str) or np.abs(got - outs[False]).max() > 1e-5:
        failed.append(cls.__name__)
print(f"REPRODUCED on {keras.backend.backend()}: {', '.join(failed)}" if failed else "NOT REPRODUCED")
sys.exit(1 if failed else 0)
