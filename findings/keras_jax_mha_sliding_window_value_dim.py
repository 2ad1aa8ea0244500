"""Keras 3.15 MultiHeadAttention with value_dim != key_dim fails on JAX, with or without a sliding window.

TensorFlow and torch compute the layer; JAX raises "cannot reshape array of shape (2, 9, 1, 1, 6)
into shape (2, 9, 1, 2)": the layer calls ops.dot_product_attention (no dropout, no scores
returned; a sliding window is not needed, the rng 2848 check found), and the JAX backend's
fallback (after jax.nn.dot_product_attention refuses a value head size other than the key's)
reshapes the result to the query's shape, head size key_dim, not value_dim.

    python keras_jax_mha_sliding_window_value_dim.py   # runs each Keras backend in a child process
    # prints REPRODUCED and exits 1 while the bug is there

Versions: keras 3.15.1, JAX 0.10.2 (tensorflow 2.21.0, torch 2.13.0+cpu right).  Found by audee
(the api-cpu campaign, rng 2811: MultiHeadAttention(key_dim=2, value_dim=6, sliding_window=...)
refused by JAX, run by TensorFlow).
Prints REPRODUCED (exit 1) or NOT REPRODUCED (exit 0)."""
import os
import re
import subprocess
import sys

CODE = """
import numpy as np, keras
q = np.random.default_rng(0).random((2, 9, 3), dtype=np.float32)
v = np.random.default_rng(1).random((2, 18, 8), dtype=np.float32)
for window in (None, 7):   # None first: the window is not needed
    mha = keras.layers.MultiHeadAttention(num_heads=1, key_dim=2, value_dim=6, sliding_window=window)
    print(f"sliding_window={window}:", tuple(mha(q, v).shape), end="; ")
print()
"""
out = {}
for backend in ("tensorflow", "torch", "jax"):
    p = subprocess.run([sys.executable, "-c", CODE], env={**os.environ, "KERAS_BACKEND": backend},
                       capture_output=True, text=True)
    out[backend] = p.stdout.strip().splitlines()[-1] if p.returncode == 0 else "error: " + next(
        (re.sub(r"\x1b\[[0-9;]*m", "", l).strip() for l in reversed(p.stderr.splitlines())
         if "Error" in l or "cannot reshape" in l),
        p.stderr.strip()[-200:])  # the last: JAX logs a caught ValueError of its xla attention first
    print(f"{backend:10s} {out[backend]}")
ok = [b for b in out if not out[b].startswith("error")]
if "jax" not in ok and {"tensorflow", "torch"} <= set(ok):
    print("REPRODUCED: jax refuses the layer TensorFlow and torch compute")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
