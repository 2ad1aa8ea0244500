#!/usr/bin/env python3
"""Keras 3.15's CenterCrop on TensorFlow returns float32 under a float16 or bfloat16 policy where
the crop is larger than the input, while it declares its compute dtype (float16, bfloat16) and
JAX and torch return it.  Where the target is larger than the input the layer resizes
(image_utils.smart_resize -> the TensorFlow backend's image.resize -> tf.image.resize, which
returns float32 for every method but nearest) and never casts the result back; the Resizing layer
casts its own (keras-team/keras#20213, which dropped the backend's cast), CenterCrop's path was left
out.  A crop no larger than the input only slices, and keeps the dtype.  Every layer after it in a
functional model is built for the compute dtype and fed float32.  No comparison of values between
backends sees it: float32 is only more precise.  Keras' master of 2026-08-21 alike.

    KERAS_BACKEND=tensorflow python keras_tf_center_crop_resize_dtype.py
    # prints REPRODUCED and exits 1 while the resized crop comes back float32; else NOT REPRODUCED, 0

Found by audee's declared-output oracle (a layer's computed output against its symbolic one) in
the shipped api-cpu campaign, rng 3000: CenterCrop(1, 14, channels_first) under bfloat16, a
(4, 4, 8) input, TensorFlow alone computing float32.  Upstream: not found (queries: "keras
CenterCrop float16 returns float32 tensorflow backend smart_resize dtype", "CenterCrop layer output
dtype mixed precision float16 image larger than crop resize"); nearest keras-team/keras#20213 (the
Resizing layer's cast back to the input dtype) and keras-team/keras-cv#967 (keras-cv's layers).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

print(f"keras {keras.__version__} on {keras.backend.backend()}: CenterCrop of a (2, 4, 4, 8) input")
x = np.random.default_rng(0).normal(size=(2, 4, 4, 8)).astype(np.float32)
off = 0
for policy in ("float16", "bfloat16", "mixed_float16"):
    for height, width in ((6, 6), (2, 2)):
        layer = keras.layers.CenterCrop(height, width, dtype=policy)
        declared = layer(keras.Input(shape=(4, 4, 8))).dtype
        returned = keras.backend.standardize_dtype(layer(x).dtype)
        off += declared != returned
        how = "resizes" if height > 4 else "slices"
        print(f"  {policy}, crop ({height}, {width}) ({how}): declared {declared}, returned {returned}")
print("REPRODUCED: CenterCrop returns float32 where it resizes, unlike the dtype it declares" if off
      else "NOT REPRODUCED")
sys.exit(1 if off else 0)
