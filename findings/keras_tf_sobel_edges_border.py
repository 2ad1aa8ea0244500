"""Keras 3.15.1: ops.image.sobel_edges differs on the image border between backends, in any
dtype: the TensorFlow backend calls tf.image.sobel_edges, which pads with REFLECT, while the
torch and JAX backends convolve with zero padding (F.conv2d(padding=1),
lax.conv_general_dilated(padding="SAME")).  The interior pixels agree; every border pixel
differs (by up to the image's full range).  Keras' docstring says nothing about the border,
so one op has two answers depending on the backend; the campaign met it in bfloat16, but
float32 shows it alike.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_tf_sobel_edges_border.py; done
    # prints REPRODUCED and exits 1 on tensorflow (zero-padding reference) while they differ

Versions: keras 3.15.1, tensorflow 2.21.0, torch 2.13.0+cpu, jax 0.10.2.  Found by audee
(op-level fuzzing, `audee fuzz --op image.sobel_edges`, bfloat16 (5, 4, 4, 2) images: TF vs
torch out of tolerance, torch and JAX equal).  Upstream: not found (query: "keras sobel_edges
tensorflow backend reflect padding differs torch jax zero padding border"; the feature is
keras-team/keras#22149, merged, for issue #22148).
"""
import sys

import numpy as np
import keras
from keras import ops

img = (np.arange(25, dtype="float32").reshape(1, 5, 5, 1) ** 2) / 10.0


def sobel(pad_mode):
    """numpy reference: dy, dx of a 3x3 Sobel with the border padded by `pad_mode`."""
    p = np.pad(img[0, :, :, 0], 1, mode=pad_mode)
    ky = np.array([[-1, -2, -1], [0, 0, 0], [1, 2, 1]], "float32")
    out = np.zeros((5, 5, 2), "float32")
    for i in range(5):
        for j in range(5):
            w = p[i:i + 3, j:j + 3]
            out[i, j] = [(w * ky).sum(), (w * ky.T).sum()]
    return out


y = ops.convert_to_numpy(ops.image.sobel_edges(img, data_format="channels_last"))[0, :, :, 0, :]
zero, refl = sobel("constant"), sobel("reflect")
inner = (slice(1, -1), slice(1, -1))
print(f"{keras.backend.backend():10s} interior: max |y - ref| = {np.abs(y - zero)[inner].max():.3g}; whole image: "
      f"max |y - zero-padded ref| = {np.abs(y - zero).max():.3g}, max |y - reflect-padded ref| = "
      f"{np.abs(y - refl).max():.3g}")
print(f"{keras.backend.backend():10s} dy, first row: {np.round(y[0, :, 0], 2).tolist()} (zero padding "
      f"{np.round(zero[0, :, 0], 2).tolist()}, reflect {np.round(refl[0, :, 0], 2).tolist()})")
if np.abs(y - zero).max() > 1e-3:
    print(f"REPRODUCED on {keras.backend.backend()}: the border follows reflect padding, torch/JAX zero padding")
    sys.exit(1)
print("NOT REPRODUCED")
