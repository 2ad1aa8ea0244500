#!/usr/bin/env python3
"""Keras 3.15's torch gaussian_blur breaks on any non-square kernel: it pads both image axes
by kernel_size[0] // 2 (keras/src/backend/torch/image.py:898,
`padding=int(kernel_size[0] // 2)`), so the width comes back as W + 2*(kh//2) - kw + 1.
keras.ops.image.gaussian_blur then silently returns a wrong shape (kernel (1, 7) on a 9x8
image -> 9x2, (3, 5) -> width 8 becomes 6, (5, 3) -> width 10), or, when the width axis is
narrower than kw - 2*(kh//2), torch's conv2d refuses ("Calculated padded input size per
channel: (6 x 3). Kernel size: (3 x 5). Kernel size can't be greater than actual input
size").  RandomGaussianBlur(kernel_size=[kh, kw]) in training hits both: its
numpy.where(should_apply_blur, blurred, images) cannot broadcast the narrowed output ("The
size of tensor a (2) must match the size of tensor b (8) at non-singleton dimension 3").  A
kernel larger than the image is not itself the trouble: a square (5, 5) kernel on a 4x1 image
runs.  JAX (padding="SAME") and TensorFlow (depthwise_conv2d, "SAME") keep the shape.  Padding
(kh // 2, kw // 2), or padding="same", mends it.  Square kernels give the same values as JAX.

Related, not part of this verdict: all backends build the 2-D kernel as
outer(g(size[1], sigma[1]), g(size[0], sigma[0])), i.e. (size[1], size[0]); torch (.view,
line 866) and TensorFlow (tf.reshape) then reshape it to (size[0], size[1]), scrambling a
non-square kernel, while JAX uses it as is (a transposed kernel), so even where TF and JAX
both run a non-square kernel their values differ; the sigma axes are swapped on every backend
(tensorflow/tensorflow#127247, fix proposed in keras-team/keras#23614).

    KERAS_BACKEND=torch python keras_torch_gaussian_blur_kernel.py
    # prints REPRODUCED and exits 1 while a non-square kernel changes the image's shape or
    # raises; else NOT REPRODUCED, 0 (JAX and TensorFlow: NOT REPRODUCED)

Found by audee's API-level fuzzer (RandomGaussianBlur in training with kernel_size=[1, 7] and
[3, 5], channels_first; TF and JAX ran both).
Upstream: not found for the torch padding (queries: "keras gaussian_blur torch non-square
kernel", "keras RandomGaussianBlur torch kernel size error", "gaussian_blur kernel_size padding
kernel_size[0] // 2 conv2d torch backend shape mismatch", "keras torch gaussian_blur padding
kernel_size[1] non-square kernel output shape changes width").  Nearest: keras-team/keras#22054
(merged; the same symmetric-padding mistake fixed in the NumPy backend only, for #22046, even
kernels), keras-team/keras#23614 (closed, unmerged as stored; kernel/sigma axis order on all
backends; what was seen of it does not mention torch's padding), tensorflow/tensorflow#127247 (open; sigma axes swapped).  Keras'
tests use square kernels only: ops/image_test.py test_gaussian_blur uses kernel_size [3, 3]
(its [6, 4] case is numpy-backend only); random_gaussian_blur_test uses kernel_size=3.
"""
import os
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

print(f"keras {keras.__version__}, backend {keras.backend.backend()}")
rng = np.random.default_rng(0)


def said(exc: Exception, n: int = 150) -> str:
    """The exception's message on one line, without Keras' terminal colours."""
    return " ".join(re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).split())[:n]


def reference(x, kernel_size, sigma, data_format):
    """Zero-padded 'same' correlation with a separable Gaussian, kernel (kh, kw) as documented."""
    def g(n, s):
        t = np.arange(n) - (n - 1) / 2
        k = np.exp(-0.5 * (t / s) ** 2)
        return k / k.sum()

    kh, kw = kernel_size
    kernel = np.outer(g(kh, sigma[0]), g(kw, sigma[1]))
    if data_format == "channels_last":
        x = x.transpose(0, 3, 1, 2)
    n, c, h, w = x.shape
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2)))
    out = np.zeros((n, c, h, w))
    for i in range(kh):
        for j in range(kw):
            out += kernel[i, j] * padded[:, :, i:i + h, j:j + w]
    return out.transpose(0, 2, 3, 1) if data_format == "channels_last" else out


# (input shape, kernel_size, data_format); sigma equal on both axes so axis order cannot matter
cases = [
    ((2, 4, 9, 8), (1, 7), "channels_first"),  # the fuzzer's first case
    ((2, 1, 4, 1), (3, 5), "channels_first"),  # the fuzzer's second case
    ((2, 9, 8, 3), (3, 5), "channels_last"),
    ((2, 9, 8, 3), (5, 3), "channels_last"),
    ((2, 9, 8, 3), (3, 3), "channels_last"),  # square: control
    ((2, 9, 8, 3), (5, 5), "channels_first"),  # square: control
    ((2, 1, 4, 1), (5, 5), "channels_first"),  # square kernel larger than the image: control
]
failed = []
for shape, ksize, fmt in cases:
    x = rng.uniform(0, 255, shape).astype("float32")
    label = f"gaussian_blur({shape}, kernel_size={ksize}, {fmt})"
    try:
        y = ops.convert_to_numpy(ops.image.gaussian_blur(x, kernel_size=ksize, sigma=(1.0, 1.0), data_format=fmt))
    except Exception as exc:  # noqa: BLE001 - what the op does is the finding
        print(f"  {label}: {type(exc).__name__}: {said(exc)}")
        failed.append(label)
        continue
    if y.shape != x.shape:
        print(f"  {label}: returned shape {y.shape}, not {x.shape}")
        failed.append(label)
        continue
    err = float(np.abs(y - reference(x, ksize, (1.0, 1.0), fmt)).max())
    note = "" if ksize[0] == ksize[1] else " (non-square: kernel orientation differs by backend, not judged)"
    print(f"  {label}: shape kept; max |diff| vs numpy reference {err:.2g}{note}")
    if ksize[0] == ksize[1] and err > 1e-3:
        print("    square-kernel values disagree with the reference")
        failed.append(label)

# The layer the fuzzer ran, in training (every image blurred: factor=1.0)
layer_label = "RandomGaussianBlur(factor=1.0, kernel_size=[1, 7], channels_first)(training=True)"
try:
    layer = keras.layers.RandomGaussianBlur(
        factor=1.0, kernel_size=[1, 7], sigma=[0.1, 1.0], value_range=[0, 255],
        data_format="channels_first", seed=1)
    out = layer(rng.uniform(0, 255, (2, 4, 9, 8)).astype("float32"), training=True)
    print(f"  {layer_label}: ran, shape {tuple(out.shape)}")
    if tuple(out.shape) != (2, 4, 9, 8):
        failed.append(layer_label)
except Exception as exc:  # noqa: BLE001
    print(f"  {layer_label}: {type(exc).__name__}: {said(exc, 230)}")
    failed.append(layer_label)

if failed:
    print(f"REPRODUCED: {len(failed)} call(s) lose the image's shape or raise (non-square kernel)")
    sys.exit(1)
print("NOT REPRODUCED: every kernel keeps the image's shape")
sys.exit(0)
