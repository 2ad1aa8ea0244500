#!/usr/bin/env python3
"""Keras 3.15's CutMix cannot be traced by TensorFlow in training under a float16 or
mixed_float16 policy: it builds its box mask from keras.ops.arange(image_height,
dtype=compute_dtype) (cut_mix.py, _generate_grid_xy), which in a tf.function, where the height
is a tensor of the traced shape, becomes a Range node with Tidx=half, and TensorFlow has no
Range for half ("Unsupported dtype19 for '{{node .../range}} = Range[Tidx=DT_HALF]").  Called
eagerly (concrete sizes) the same layer runs, so every graph path fails: model.fit, a
tf.data map, tf.function, and what converters trace (tf2onnx, LiteRT).  JAX and torch trace it
(torch refuses float16 for another reason: findings row 118).  Building the grid in float32 or
int32 and casting would mend it.

    KERAS_BACKEND=tensorflow python keras_cutmix_float16_tf_graph_range.py
    # prints REPRODUCED and exits 1 while a traced CutMix refuses float16 that eager CutMix runs;
    # else NOT REPRODUCED, 0

Found by audee's API-level fuzzer from the shipped api-cpu campaign once CutMix was configured
to be called in training (its values, random by design, left out; acceptance judged).
Upstream: not found (queries: "CutMix mixed_float16 Range DT_HALF Unsupported dtype tensorflow",
"keras CutMix float16 tf.function arange compute_dtype Range half"); Keras' cut_mix_test runs
float32 only; keras-cv's older CutMix had float16 fixes (keras-team/keras-cv#967), not this code.
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


for policy in ("float32", "float16", "mixed_float16"):
    layer = keras.layers.CutMix(dtype=policy, seed=1)
    eager = graph = None
    try:
        layer(x, training=True)
        eager = "ran"
    except Exception as exc:  # noqa: BLE001 - what the layer does is the finding
        eager = f"{type(exc).__name__}: {said(exc, 60)}"
    try:
        tf.function(lambda t: layer(t, training=True))(x)
        graph = "ran"
    except Exception as exc:  # noqa: BLE001
        match = re.search(r"Unsupported dtype\w* for '\{\{node [^}]*range\}\} = Range\[Tidx=DT_\w+\]", said(exc, 4000))
        graph = f"{type(exc).__name__}: {match.group(0) if match else said(exc, 120)}"
    print(f"  CutMix(dtype={policy!r}), training: eager {eager}; tf.function {graph}")
    if eager == "ran" and graph != "ran":
        failed.append(policy)
if failed:
    print(f"REPRODUCED: a traced CutMix refuses {', '.join(failed)} that eager CutMix runs")
    sys.exit(1)
print("NOT REPRODUCED: CutMix traces under every policy it runs eagerly")
sys.exit(0)
