"""Keras 3.15.1 on JAX: ConvLSTM1D/2D/3D called with a mask (and unroll=False, the only ConvLSTM
mode) broadcast the per-sample mask against the wrong axes of the state.  keras/src/backend/jax/
rnn.py, rnn(), the lax.scan step (lines 152-175): `is_masked = jnp.all(~mask_t, axis=-1,
keepdims=True)` has shape (batch, 1) and goes straight into `jnp.where(is_masked, state,
new_state)`; a plain RNN state (batch, units) lines up, a ConvLSTM state (batch, H, W, filters)
aligns (batch, 1) with (W, filters) instead.  So the call raises "Incompatible shapes for
broadcasting" unless W == batch (or 1), and when W == batch it silently masks sample i's column
i of every sample.  The unrolled branch expands the mask (`_expand_mask`); TF and torch are right.
Reference: the same layer without a mask on each sample cut at its length (post-padding).

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_jax_convlstm_mask.py; done
    # prints REPRODUCED and exits 1 on jax while the bug is there

Versions: keras 3.15.1, JAX 0.10.2 (TF 2.21.0, torch 2.13.0+cpu right).  Found by audee
(layer-level fuzzing: ConvLSTM3D(5, 4, strides=2, padding="same", channels_first) on (8, 3, 5, 6,
7, 6) with a (8, 3) mask; JAX `Incompatible shapes for broadcasting: shapes=[(8, 1), (8, 5, 3,
4, 3), (8, 5, 3, 4, 3)]`, TF runs).
"""
import re
import sys

import numpy as np
import keras
from keras import ops

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
failed = []
for batch, width in ((2, 2), (3, 2)):
    x = rng.standard_normal((batch, 4, 3, width, 2)).astype("float32")
    lengths = [4 - i % 3 for i in range(batch)]  # 4, 3, 2: post-padded sequences
    mask = np.array([[t < n for t in range(4)] for n in lengths])
    layer = keras.layers.ConvLSTM2D(2, 3, padding="same", recurrent_dropout=0.0)
    layer.build(x.shape)
    ref = np.concatenate([ops.convert_to_numpy(layer(x[i:i + 1, :n])) for i, n in enumerate(lengths)])
    name = f"batch {batch}, width {width}"
    try:
        y = ops.convert_to_numpy(layer(x, mask=mask))
        err = float(np.abs(y - ref).max())
        ok = err < 1e-5
        print(f"{keras.backend.backend():10s} ConvLSTM2D with a mask, {name}: max |y - ref| = {err:.2g}"
              f"{'' if ok else '  WRONG'}")
    except Exception as e:
        ok = False
        lines = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).splitlines()
        why = next((ln for ln in lines if "Incompatible" in ln), lines[0])
        print(f"{keras.backend.backend():10s} ConvLSTM2D with a mask, {name}: raises {type(e).__name__}: {why[:110]}")
    if not ok:
        failed.append(name)
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
