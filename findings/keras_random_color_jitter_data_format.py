#!/usr/bin/env python3
"""Keras 3.15.1's RandomColorJitter takes data_format but builds its RandomSaturation and
RandomHue sub-layers without it (random_color_jitter.py, __init__), so they read the image as
channels_last whatever the layer was given.  A channels_first image with a saturation or hue
step fails at call on TensorFlow, torch and JAX where its width is not 3 (rgb_to_hsv splits the
last axis in three: "Dimension must be 3 but is 8", "split_with_sizes expects split_sizes to sum
exactly to 8", "array split does not result in an equal division"), and where the width is 3 it
runs and treats the width as the colors: silently another image than RandomSaturation(...,
data_format="channels_first") gives.  Its brightness and contrast steps do not read the channel
axis; RandAugment and AugMix pass data_format to their sub-layers.

    KERAS_BACKEND=jax python keras_random_color_jitter_data_format.py   # or tensorflow, torch
    # prints REPRODUCED and exits 1 while the sub-layers ignore data_format

Versions: keras 3.15.1 (and master as stored at keras-team/keras 0a54048: the sub-layers are still built without
data_format).  Upstream: not found (queries: "keras RandomColorJitter data_format channels_first", "RandomColorJitter
RandomSaturation RandomHue sub-layers data_format"); Keras' random_color_jitter_test.py tests channels_first with
brightness and contrast only.  Found while configuring the layer for the API-level fuzzer (a scratch fuzz, rng 91:
the failing draws are refused alike by every backend, which the fuzzer reads as a consistent rejection).
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import keras  # noqa: E402
import numpy as np  # noqa: E402

found = []
jitter = keras.layers.RandomColorJitter(saturation_factor=[0.0, 0.0], data_format="channels_first", seed=1)
print(f"keras {keras.__version__} on {keras.backend.backend()}: the saturation sub-layer's data_format is "
      f"{jitter.random_saturation.data_format!r}")
if jitter.random_saturation.data_format != "channels_first":
    found.append("the sub-layer ignores data_format")
try:
    jitter(np.zeros((2, 3, 8, 8), "float32"), training=True)
    print("a (2, 3, 8, 8) channels_first image: runs")
except Exception as exc:  # noqa: BLE001 - the backend's own words
    print(f"a (2, 3, 8, 8) channels_first image: {type(exc).__name__}: {' '.join(str(exc).split())[:100]}")
    found.append("a channels_first image of width 8 is refused")
x = np.random.default_rng(0).uniform(0, 255, (2, 3, 8, 3)).astype("float32")  # width 3: runs, on the wrong axis
alone = keras.layers.RandomSaturation(factor=[0.0, 0.0], data_format="channels_first", seed=1)
a, b = (np.asarray(keras.ops.convert_to_numpy(layer(x, training=True))) for layer in (jitter, alone))
print(f"a (2, 3, 8, 3) channels_first image, saturation 0: max |jitter - RandomSaturation| = {np.abs(a - b).max():.4g}")
if np.abs(a - b).max() > 1e-3:
    found.append("a channels_first image of width 3 is desaturated along its width")
if found:
    print("REPRODUCED: " + "; ".join(found))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
