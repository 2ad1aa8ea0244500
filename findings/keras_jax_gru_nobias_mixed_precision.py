"""Keras 3.15.1, JAX backend: GRU(use_bias=False) under a mixed precision policy (mixed_float16, mixed_bfloat16)
fails at call time: ``TypeError: scan body function carry input and carry output must have equal types`` (the
carry h is float16[batch, units] going in and float32 coming out).  The same layer runs with use_bias=True, in
float32, and on the TensorFlow and torch backends.

Mechanism: Keras 3.15's JAX GRU fast path, keras/src/backend/jax/rnn.py ``gru`` (the lax.scan version added by
keras-team/keras#22401, taken on CPU too whenever reset_after=True, no mask and no unroll), stands in for a
missing bias with ``input_bias = jnp.zeros(3 * hidden_size)`` and ``recurrent_bias = jnp.zeros(3 *
hidden_size)`` (lines 497-498 of the installed file): float32, whatever the policy.  Under a mixed policy the
inputs, h_0 and the kernels reach it as float16 (or bfloat16), so ``h @ recurrent_kernel + recurrent_bias`` is
promoted to float32, h_new comes out float32, and lax.scan refuses the carry.  Fix: make the zeros in the
kernel's (or h_0's) dtype.  reset_after=False takes the generic loop and runs.

    python findings/keras_jax_gru_nobias_mixed_precision.py
    # prints REPRODUCED and exits 1 while the bug is there (plain Keras on JAX, no audee)

Versions: keras 3.15.1, jax 0.10.2 (CPU).  Upstream: not found (queries, issues corpus: "GRU use_bias False
mixed_float16 jax carry type", "jax gru cudnn path zeros bias dtype", "lax.scan carry float16 float32 GRU
keras"); nearest, not the same: keras-team/keras#15140 (2021, closed: stateful LSTM/GRU under mixed_float16 on
TensorFlow), jax-ml/jax#18867 (open: a cuDNN GRU / bf16 request for JAX, naming #22401).  Still on Keras' main
(commit 3422977, 2026-08-21, version 3.16.0 dev): ``gru`` there keeps ``jnp.zeros(3 * hidden_size)`` with no
dtype, and no released version has a fix.
Found by audee: the api-cpu campaign, rng 2876 (api-Bidirectional-v00002: Bidirectional(GRU(use_bias=False,
reset_after=True)) under mixed_float16, the first case of its root).
"""
import os
import re
import sys

os.environ["KERAS_BACKEND"] = "jax"
import numpy as np  # noqa: E402
import keras  # noqa: E402

x = np.random.RandomState(0).randn(2, 5, 4).astype("float32")
failed = None
for policy, use_bias in (("mixed_float16", False), ("mixed_float16", True), ("float32", False)):
    layer = keras.layers.GRU(3, use_bias=use_bias, dtype=keras.mixed_precision.DTypePolicy(policy))
    try:
        y = layer(x)
        print(f"GRU(3, use_bias={use_bias}) {policy:14s} runs: output {tuple(y.shape)} {y.dtype}")
    except TypeError as e:
        msg = re.sub(r"\x1b\[[0-9;]*m", "", str(e))  # Keras wraps the message in ANSI bold
        lines = [s.strip() for s in msg.splitlines() if "carry" in s] or [msg.splitlines()[0]]
        print(f"GRU(3, use_bias={use_bias}) {policy:14s} TypeError: " + "\n    ".join(lines))
        if "carry" in msg and not use_bias and policy.startswith("mixed"):
            failed = lines[-1]
        else:
            raise
if failed:
    print("REPRODUCED: lax.scan refuses GRU(use_bias=False) under mixed_float16 on JAX:", failed)
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
