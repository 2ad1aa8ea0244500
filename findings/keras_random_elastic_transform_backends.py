#!/usr/bin/env python3
"""Keras 3.15's RandomElasticTransform / keras.ops.image.elastic_transform fail on one backend or
another for three separate reasons, each deterministic (no random draw involved):

(a) fill_mode="mirror", TensorFlow.  The layer accepts it (random_elastic_transform.py,
    _SUPPORTED_FILL_MODES lists "mirror", although the docstring names only constant, nearest,
    wrap and reflect), and the torch, JAX and NumPy backends run it; the TensorFlow backend's
    elastic_transform checks fill_mode against AFFINE_TRANSFORM_FILL_MODES (backend/tensorflow/
    image.py:25-31, '# "mirror", not supported by TF'; check at :822) and raises "Invalid value for
    argument `fill_mode`. Expected of one ('constant', 'nearest', 'wrap', 'reflect'). Received:
    fill_mode=mirror", although the map_coordinates it then calls accepts "mirror"
    (MAP_COORDINATES_FILL_MODES, :32).  So the same layer config is built everywhere and only
    refused, at call time, on TensorFlow (and in any tf.data pipeline, which runs the TF backend).
(b) an image of height 1 or width 1, torch and JAX.  Both backends squeeze the blurred displacement
    fields with no axis (backend/torch/image.py:1007-1008 `dx.squeeze()`, backend/jax/image.py:824-825
    `jnp.squeeze(dx)`), which drops the size-1 spatial axis too, and x + alpha * dx no longer
    broadcasts: torch "The size of tensor a (16) must match the size of tensor b (32) at
    non-singleton dimension 1", JAX "Incompatible shapes for broadcasting: shapes=[(1, 16, 1),
    (32, 16)]".  It is the H == 1 or W == 1 shape, in either data format, not channels_first nor the
    draw (every sigma and seed fails); TensorFlow squeezes axis=channel_axis and runs.
(c) JAX under jit.  backend/jax/image.py:783 computes `kernel_size = (int(6 * sigma) | 1, ...)`
    from sigma = convert_to_tensor(sigma): inside jax.jit that is a tracer, so int() raises
    ConcretizationTypeError ("The problem arose with the `int` function") -- for the layer (sigma
    comes from its per-call distortion_factor draw) and even for keras.ops.image.elastic_transform
    with a Python-float sigma.  Keras' JAX trainer jits train/predict steps, so model.fit with the
    layer fails on JAX; eager calls run.  (With Keras' traceback filtering on, the error surfaces
    as "AttributeError: 'str' object has no attribute '_error_repr'": traceback_utils re-creates the
    exception as ConcretizationTypeError(message), whose constructor wants a tracer; this script
    turns filtering off to show the real error.)  TensorFlow builds the kernel size as an int32
    tensor and traces fine; torch's int() on a tensor works eagerly.

    KERAS_BACKEND=tensorflow python keras_random_elastic_transform_backends.py   # (a)
    KERAS_BACKEND=torch      python keras_random_elastic_transform_backends.py   # (b)
    KERAS_BACKEND=jax        python keras_random_elastic_transform_backends.py   # (b), (c)
    # prints REPRODUCED and exits 1 while one of them shows on this backend; else NOT REPRODUCED, 0

Found by audee's API-level fuzzer (RandomElasticTransform called with training=True).
Upstream: not found (queries: "keras RandomElasticTransform jax ConcretizationTypeError",
"elastic_transform jit int(6 * sigma) kernel_size traced jax", "keras elastic_transform fill_mode
mirror tensorflow", "RandomElasticTransform Invalid value for argument fill_mode Received:
fill_mode=mirror", "keras elastic_transform channels_first torch size mismatch",
"RandomElasticTransform width 1 squeeze shape error torch jax"); the op came in keras-team/keras#20977
and the layer in #21018.  Keras' tests call it eagerly only, with fill_mode "reflect" on square
images (ops/image_test.py test_elastic_transform; the layer test sets run_training_check=False),
so none of the three is covered.
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

keras.config.disable_traceback_filtering()  # else JAX's tracer error is masked (see docstring)
B = keras.backend.backend()
print(f"keras {keras.__version__}, backend {B}")
rng = np.random.default_rng(0)
shown = []


def said(exc: Exception, n: int = 150) -> str:
    """The exception's type and message on one line, without Keras' terminal colours."""
    text = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())
    text = text.replace("Exception encountered when calling RandomElasticTransform.call(). ", "")
    return f"{type(exc).__name__}: {text[:n]}"


def attempt(fn) -> str:
    try:
        fn()
        return "ran"
    except Exception as exc:  # noqa: BLE001 - what Keras does is the finding
        return said(exc)


# (a) fill_mode="mirror": accepted by the layer; compare with "reflect".
x = rng.uniform(0, 1, (4, 16, 3, 16)).astype("float32")
res = {}
for fill_mode in ("reflect", "mirror"):
    layer = keras.layers.RandomElasticTransform(
        factor=(0.2, 0.8), scale=0.0765, fill_mode=fill_mode, value_range=(0, 1),
        dtype="mixed_float16", seed=1)
    res[fill_mode] = attempt(lambda: layer(x, training=True))
    print(f"(a) RandomElasticTransform(fill_mode={fill_mode!r}, mixed_float16), training: {res[fill_mode]}")
if res["reflect"] == "ran" and res["mirror"] != "ran":
    shown.append("(a) fill_mode='mirror' accepted by the layer but refused by this backend")

# (b) height or width 1, op called directly with fixed alpha, sigma and seed.
res = {}
for shape, fmt in (((32, 3, 16, 8), "channels_first"), ((32, 3, 16, 1), "channels_first"),
                   ((32, 16, 1, 3), "channels_last"), ((32, 1, 16, 3), "channels_last")):
    img = rng.uniform(-1, 1, shape).astype("float32")
    res[shape] = attempt(lambda: keras.ops.image.elastic_transform(
        img, alpha=1.0, sigma=0.5, fill_mode="reflect", seed=1, data_format=fmt))
    print(f"(b) elastic_transform({shape}, {fmt}, alpha=1, sigma=0.5, seed=1): {res[shape]}")
if res[(32, 3, 16, 8)] == "ran" and any(v != "ran" for v in res.values()):
    shown.append("(b) an image of height or width 1 is refused")

# (c) traced: the layer and the op inside the backend's compiler (jax.jit / tf.function).
layer = keras.layers.RandomElasticTransform(factor=1.0, scale=0.5, value_range=(0, 1), seed=1)
eager = attempt(lambda: layer(x, training=True))
if B == "jax":
    import jax

    traced = attempt(lambda: jax.jit(lambda t: layer(t, training=True))(x))
    op = attempt(lambda: jax.jit(lambda t: keras.ops.image.elastic_transform(t, alpha=1.0, sigma=0.5, seed=1))(x))
    how = "jax.jit"
elif B == "tensorflow":
    import tensorflow as tf

    traced = attempt(lambda: tf.function(lambda t: layer(t, training=True))(x))
    op = attempt(lambda: tf.function(lambda t: keras.ops.image.elastic_transform(t, alpha=1.0, sigma=0.5, seed=1))(x))
    how = "tf.function"
else:
    traced = op = how = None
print(f"(c) RandomElasticTransform, training, eager: {eager}")
if how:
    print(f"(c) same layer in {how}: {traced}")
    print(f"(c) elastic_transform(sigma=0.5 Python float) in {how}: {op}")
    if eager == "ran" and (traced != "ran" or op != "ran"):
        shown.append(f"(c) {how} refuses what runs eagerly")
else:
    print("(c) not applicable (Keras' torch backend trains eagerly)")

if shown:
    print("REPRODUCED: " + "; ".join(shown))
    sys.exit(1)
print("NOT REPRODUCED: mirror, height/width-1 images and traced calls all run on this backend")
sys.exit(0)
