#!/usr/bin/env python3
"""Keras 3.15's MultiHeadAttention builds its sliding-window mask from axis 1 of the query and
the value, whatever axes it attends over.  _compute_sliding_window_mask takes
T = shape(query)[1] and S = shape(value)[1] and makes a (1, T, S) band, which _masked_softmax
lines up with the last two axes of the scores (the query and key attention axes).  With
attention_axes=(2,) on a rank-4 input (batch, A, C, features) the scores' attention axes have
length C, not A: Softmax refuses the mask ("The `mask` must be broadcastable to `inputs`")
where A != C; the same layer over axis 1 of the transposed input (attention_axes=(1,)) runs and
matches NumPy.  Where A is 1 the (1, 1, 1) band broadcasts: the layer runs and silently drops its
window, computing exactly the attention without one (the api-cpu campaign, rng 3010: every
backend 6.4 off the windowed result).  Every backend fails alike (the layer's own code), so no cross-backend comparison
sees it.  Found by audee's equivalence oracle (rule axis: MultiHeadAttention over the axes just
before the features, the inputs permuted).  The causal mask (_compute_causal_mask) reads the
same axis 1.

    KERAS_BACKEND=jax python keras_mha_sliding_window_attention_axes.py
    # prints REPRODUCED and exits 1 while attention_axes=(2,) fails or differs from the same
    # attention over axis 1 of the transposed input; else NOT REPRODUCED, 0

Upstream: sliding_window came with keras-team/keras#22814 (merged 2026-05); Keras' master of
2026-08-21 reads axis 1 still.  Not reported (queries: "MultiHeadAttention sliding_window
attention_axes", "use_causal_mask attention_axes rank 4"); nearest tensorflow/tensorflow#58726
(the Keras input masks of a query with attention_axes, tf.keras 2.11, closed stale).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

HEADS, KEY_DIM, WINDOW = 2, 4, 2
rng = np.random.default_rng(0)
q = rng.normal(size=(2, 3, 5, 8)).astype(np.float32)   # (batch, A=3, C=5, features)
v = rng.normal(size=(2, 3, 5, 8)).astype(np.float32)


def layer(axes: tuple[int, ...], weights: list[np.ndarray] | None, shape: tuple[int, ...] = q.shape,
          window: int | None = WINDOW) -> keras.layers.MultiHeadAttention:
    mha = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, use_bias=False, attention_axes=axes,
                                          sliding_window=window)
    mha.build(shape, shape)
    if weights is not None:
        mha.set_weights(weights)
    return mha


def reference(x: np.ndarray, y: np.ndarray, ws: list[np.ndarray]) -> np.ndarray:
    """Attention over axis 1 of a (batch, T, X, features) query x and value y in NumPy, each
    query position seeing the keys within WINDOW - 1 of it."""
    wq, wk, wv, wo = (w.astype(np.float64) for w in ws)
    qp, kp, vp = (np.einsum("btxd,dnh->btxnh", a, w) for a, w in ((x, wq), (y, wk), (y, wv)))
    scores = np.einsum("btxnh,bsxnh->bxnts", qp / np.sqrt(KEY_DIM), kp)
    t = np.arange(x.shape[1])
    scores = np.where(np.abs(t[:, None] - t[None, :]) < WINDOW, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("btxnh,nhe->btxe", np.einsum("bxnts,bsxnh->btxnh", p, vp), wo)


print(f"keras {keras.__version__} on {keras.backend.backend()}: MultiHeadAttention(sliding_window={WINDOW}) "
      f"of a {q.shape} query and value")
over_1 = layer((1,), None)                      # attends over axis 1 of the transposed input: q's axis 2
ws = over_1.get_weights()
qt, vt = q.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
expected = np.asarray(keras.ops.convert_to_numpy(over_1(qt, vt))).transpose(0, 2, 1, 3)
print(f"  attention_axes=(1,) on the transposed input: max |keras - numpy| = "
      f"{np.abs(expected - reference(qt, vt, ws).transpose(0, 2, 1, 3)).max():.3g}")
try:
    got = np.asarray(keras.ops.convert_to_numpy(layer((2,), ws)(q, v)))
    apart = float(np.abs(got - expected).max())
    print(f"  attention_axes=(2,): max |(2,) - (1,) transposed| = {apart:.3g}")
    wrong, why = apart > 1e-4, "computes another attention"
except Exception as exc:  # noqa: BLE001 - the refusal is the bug's face
    print(f"  attention_axes=(2,): {type(exc).__name__}: {' '.join(str(exc).split())[:220]}")
    wrong, why = True, "refuses its own sliding-window mask (built from axis 1, length 3, not axis 2, length 5)"
# where axis 1 has length 1 the band is (1, 1, 1) and broadcasts: the window is silently dropped
q1, v1 = q[:, :1], v[:, :1]                     # (batch, 1, C=5, features)
q1t, v1t = q1.transpose(0, 2, 1, 3), v1.transpose(0, 2, 1, 3)
want = np.asarray(keras.ops.convert_to_numpy(layer((1,), ws, q1t.shape)(q1t, v1t))).transpose(0, 2, 1, 3)
unwindowed = np.asarray(keras.ops.convert_to_numpy(layer((2,), ws, q1.shape, window=None)(q1, v1)))
got1 = np.asarray(keras.ops.convert_to_numpy(layer((2,), ws, q1.shape)(q1, v1)))
off, same = float(np.abs(got1 - want).max()), float(np.abs(got1 - unwindowed).max())
dropped = same < 1e-6 < off
print(f"  attention_axes=(2,) on a {q1.shape} query: max |(2,) - (1,) transposed| = {off:.3g}, "
      f"max |(2,) - no window| = {same:.3g}" + (" (the window silently dropped)" if dropped else ""))
if dropped:
    why = f"{why}; where axis 1 has length 1 it runs and silently drops the window" if wrong else \
        "silently drops its window where axis 1 has length 1"
wrong = wrong or dropped
# the causal mask reads axis 1 alike (use_causal_mask=True, no window)
causal = keras.layers.MultiHeadAttention(HEADS, KEY_DIM, use_bias=False, attention_axes=(2,))
try:
    causal(q, v, use_causal_mask=True)
    print("  attention_axes=(2,), use_causal_mask=True: runs")
except Exception as exc:  # noqa: BLE001 - the same fault's other face
    print(f"  attention_axes=(2,), use_causal_mask=True: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}")
print(f"REPRODUCED: attention_axes=(2,) {why}" if wrong else "NOT REPRODUCED")
sys.exit(1 if wrong else 0)
