"""Keras 3.15.1: Resizing(interpolation='bicubic') on torch 2.13 differs from TensorFlow 2.21 /
JAX 0.10.2 by a few percent of the data range on ORDINARY inputs in [0, 1], with or without
crop_to_aspect_ratio: Keras's torch backend calls torch's bicubic, whose cubic-convolution
kernel uses a = -0.75 (as OpenCV), while tf.image.resize and jax.image.resize use Keys' kernel
with a = -0.5 (as Pillow).  Not an overflow artefact (the campaign input also held near-max
values, but they are not needed).  Compared at interior pixels (edge handling differs too)
against a numpy separable cubic resize (half-pixel centres) with each a:

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_torch_bicubic_kernel.py; done
    # prints REPRODUCED and exits 1 on a backend whose interior pixels are more than 1e-3 off Keys'
    # a = -0.5, the kernel TensorFlow and JAX use (torch while it uses a = -0.75)

Found by audee (API-level fuzzing of Resizing).  Upstream: known -- jax-ml/jax#15768 (open;
"JAX/pillow/TF use Keys a=-0.5, PyTorch/OpenCV a=-0.75"); keras-team/keras-core#220 notes that
torch bicubic "causes a different result from that of tf.image and jax.image"; keras#16510.
"""
import sys
import numpy as np
import keras


def cubic_matrix(n_in, n_out, a):  # rows: output pixels; taps clamped to the border
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        c = (i + 0.5) * n_in / n_out - 0.5
        for k in range(int(np.floor(c)) - 1, int(np.floor(c)) + 3):
            t = abs(c - k)
            w = (a + 2) * t**3 - (a + 3) * t**2 + 1 if t <= 1 else (a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a if t < 2 else 0)
            m[i, min(max(k, 0), n_in - 1)] += w
    return m


x = np.random.default_rng(1).uniform(size=(1, 6, 6, 1)).astype("float32")
failed = []
for crop in (False, True):
    y = keras.ops.convert_to_numpy(keras.layers.Resizing(9, 9, interpolation="bicubic", crop_to_aspect_ratio=crop)(x))[0, :, :, 0]
    errs = []
    for a in (-0.5, -0.75):
        ref = cubic_matrix(6, 9, a) @ x[0, :, :, 0] @ cubic_matrix(6, 9, a).T
        err = np.abs(y - ref)[2:-2, 2:-2].max()
        errs.append(f"a={a}: {err:.2g}")
        if a == -0.5 and not err <= 1e-3:
            failed.append(f"crop_to_aspect_ratio={crop}: {err:.2g} off a=-0.5")
    print(f"{keras.backend.backend():10s} crop_to_aspect_ratio={crop!s:5s} interior max |y - ref|  " + ", ".join(errs))
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: bicubic interior within 1e-3 of Keys' a = -0.5")
