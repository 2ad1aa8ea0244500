#!/usr/bin/env python3
"""Keras 3.15's TensorFlow backend cannot trace keras.ops.arange with a float16 dtype: arange
calls tf.range(..., dtype=float16) and falls back to a float32 range and a cast only on
tf.errors.NotFoundError (keras/src/backend/tensorflow/numpy.py, arange), which is what eager
mode raises for the missing half kernel; inside a tf.function the same call fails while the
graph is built, with a ValueError ("Unsupported dtype19 for '{{node range}} = Range[Tidx=DT_HALF]'"),
which nothing catches.  So every layer that builds a grid with arange in its float16 compute
dtype runs eagerly and fails traced (model.fit, model.predict, a tf.data map, what converters
trace): CutMix (cut_mix.py, _generate_grid_xy: arange(image_height, dtype=compute_dtype)),
RandomErasing and RandomGaussianBlur, under float16 or mixed_float16.  JAX and torch trace
them (torch refuses CutMix's float16 for another reason: findings row 118).  Catching the
ValueError too, or building the range in float32 and casting, would mend them all.

    KERAS_BACKEND=tensorflow python keras_cutmix_float16_tf_graph_range.py
    # prints REPRODUCED and exits 1 while a traced float16 arange (and the layers built on it)
    # fails where eager runs; else NOT REPRODUCED, 0

Found by audee's API-level fuzzer (CutMix from the shipped api-cpu campaign once layers random in
training were called in training, their values left out and their acceptance judged; RandomErasing
and RandomGaussianBlur once configured alike).  Upstream: not found (queries: "CutMix
mixed_float16 Range DT_HALF Unsupported dtype tensorflow", "keras CutMix float16 tf.function
arange compute_dtype Range half"); Keras' cut_mix_test runs float32 only; keras-cv's older CutMix
had float16 fixes (keras-team/keras-cv#967), not this code.
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

print(f"keras {keras.__version__}, tensorflow {tf.__version__}")
x = np.random.default_rng(0).uniform(0, 255, (4, 8, 8, 3)).astype(np.float32)
failed = []


def said(exc: Exception, n: int) -> str:
    """The exception's message on one line, without Keras' terminal colours."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())[:n]


def both(name: str, call) -> None:
    """``call`` eagerly, then inside a tf.function: a failure only traced is the bug."""
    outcome = []
    for how, fn in (("eager", call), ("tf.function", tf.function(call))):
        try:
            fn(x)
            outcome.append(f"{how} ran")
        except Exception as exc:  # noqa: BLE001 - what the call does is the finding
            match = re.search(r"Unsupported dtype\w* for '\{\{node [^}]*\}\} = Range\[Tidx=DT_\w+\]",
                              said(exc, 4000))
            outcome.append(f"{how} {type(exc).__name__}: {match.group(0) if match else said(exc, 100)}")
    print(f"  {name}: {'; '.join(outcome)}")
    if outcome[0].endswith("ran") and not outcome[1].endswith("ran"):
        failed.append(name)


for dtype in ("float32", "float16"):
    both(f"keras.ops.arange(4, dtype={dtype!r})", lambda t, d=dtype: keras.ops.arange(4, dtype=d))
for policy in ("float32", "float16", "mixed_float16"):
    for layer in (keras.layers.CutMix(dtype=policy, seed=1), keras.layers.RandomErasing(dtype=policy, seed=1),
                  keras.layers.RandomGaussianBlur(dtype=policy, seed=1)):
        both(f"{type(layer).__name__}(dtype={policy!r}), training", lambda t, l=layer: l(t, training=True))
if failed:
    print(f"REPRODUCED: traced, these fail where eager runs: {', '.join(failed)}")
    sys.exit(1)
print("NOT REPRODUCED: everything traces that runs eagerly")
sys.exit(0)
