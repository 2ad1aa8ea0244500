"""Keras 3.15.1: ZeroPadding2D(padding=-1) and ZeroPadding3D(padding=-1) are accepted at
construction -- the int form of `padding` skips the `value >= 0` check that the tuple forms
(and ZeroPadding1D, int or tuple) apply -- so the call reaches the backend's pad:
TensorFlow 2.21 raises InvalidArgumentError ("Paddings must be non-negative"), JAX 0.10.2
raises ValueError ("index can't contain negative values"), and torch 2.13 silently CROPS
(torch.nn.functional.pad treats a negative pad as cropping): a 3x3x3 input gives 1x1x1.
(The candidate's "JAX accepts" is wrong: JAX rejects; torch is the odd one out.)

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_zeropadding_negative_int.py; done
    # prints REPRODUCED and exits 1 on a backend that returns an output for a negative padding
    # instead of an error (torch, cropping, while the int form skips the check)

Found by audee (API-level fuzzing: ZeroPadding3D(padding=-1) rejected by tensorflow, jax and
onnxruntime, run by torch).  Upstream: nothing found in keras-team/keras; torch's negative pad
= crop is its documented behaviour (pytorch/pytorch#105629, open).
"""
import sys
import numpy as np
import keras

x3 = np.arange(27, dtype="float32").reshape(1, 3, 3, 3, 1)
failed = []
for cls, x, pad in [(keras.layers.ZeroPadding1D, x3[:, 0, 0], -1), (keras.layers.ZeroPadding2D, x3[:, 0], ((-1, -1), (0, 0))),
                    (keras.layers.ZeroPadding2D, x3[:, 0], -1), (keras.layers.ZeroPadding3D, x3, -1)]:
    try:
        layer = cls(pad)
    except ValueError:
        print(f"{keras.backend.backend():10s} {cls.__name__}({pad}): rejected at construction (ValueError)")
        continue
    try:
        y = keras.ops.convert_to_numpy(layer(x))
        print(f"{keras.backend.backend():10s} {cls.__name__}({pad}): input {x.shape} -> output {y.shape}, values {y.ravel().tolist()}")
        failed.append(f"{cls.__name__}({pad}) {x.shape} -> {y.shape}")
    except Exception as e:
        print(f"{keras.backend.backend():10s} {cls.__name__}({pad}): call raises {type(e).__name__}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: a negative padding gives an output, no error: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: every negative padding is refused")
