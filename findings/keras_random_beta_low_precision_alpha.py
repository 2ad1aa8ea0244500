#!/usr/bin/env python3
"""Keras 3.15's CutMix refuses to run in training under a float16, bfloat16 or mixed_float16
policy on torch (CPU), and under bfloat16 on TensorFlow, while JAX runs every policy.  CutMix
draws its mixing weight with keras.random.beta(alpha, alpha, dtype=compute_dtype), alpha a
tensor of the compute dtype (random.uniform + 1e-6).  The torch backend samples
torch.distributions.Beta in alpha's dtype and casts afterwards, and torch's CPU dirichlet and
gamma kernels have no Half or BFloat16 ("dirichlet" not implemented for 'Half'); the TensorFlow
backend passes a bfloat16 alpha to a gamma sampler that takes float32 ("Tensor conversion
requested dtype float32 for Tensor with dtype bfloat16").  keras.random.gamma and .beta with a
Python float alpha run in every dtype, which is all Keras' random_test checks; MixUp and AugMix
pass a float and run.  Sampling in float32 and casting the draw would mend both backends.

    KERAS_BACKEND=torch python keras_random_beta_low_precision_alpha.py
    # prints REPRODUCED and exits 1 while CutMix (or keras.random.beta with a low-precision alpha
    # tensor) refuses a policy JAX runs; else NOT REPRODUCED, 0

Found by audee's probe experiments/probes/declared_in_training.py (each training-mode layer under
four dtype policies on three backends), not by the fuzzer: audee calls a layer random in
training (CutMix among them) in inference mode only, since the backends' draws cannot agree.
Upstream: not found (queries: "keras CutMix float16 dirichlet not implemented for 'Half' torch",
"keras 3 random.beta random.gamma bfloat16 alpha tensor error torch tensorflow backend"); Keras'
random_test checks gamma and beta with float alphas only.
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}")
x = np.random.default_rng(0).uniform(0, 255, (2, 8, 8, 3)).astype(np.float32)
refused = 0


def said(exc: Exception, n: int) -> str:
    """The exception's message on one line, without Keras' terminal colours."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())[:n]


for policy in ("float32", "float16", "bfloat16", "mixed_float16"):
    try:
        y = keras.layers.CutMix(dtype=policy, seed=1)(x, training=True)
        print(f"  CutMix(dtype={policy!r}), training: ran, {keras.backend.standardize_dtype(y.dtype)}")
    except Exception as exc:  # the refusal is the bug; any kind of exception shows it
        refused += 1
        print(f"  CutMix(dtype={policy!r}), training: {type(exc).__name__}: "
              f"{said(exc, 110)}")
for dtype in ("float16", "bfloat16"):
    alpha = keras.ops.ones((), dtype=dtype)
    try:
        keras.random.beta((4,), alpha, alpha, seed=1, dtype=dtype)
        print(f"  keras.random.beta with a {dtype} alpha tensor: ran")
    except Exception as exc:
        refused += 1
        print(f"  keras.random.beta with a {dtype} alpha tensor: {type(exc).__name__}: "
              f"{said(exc, 90)}")
print("REPRODUCED: a low-precision alpha tensor makes keras.random.beta (and CutMix) refuse a dtype JAX runs"
      if refused else "NOT REPRODUCED")
sys.exit(1 if refused else 0)
