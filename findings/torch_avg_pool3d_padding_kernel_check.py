"""PyTorch 2.13 CPU: F.avg_pool3d with padding refuses an input whose unpadded size is smaller
than the kernel, although the padded input holds the kernel and the output size by torch's own
documented formula ((in + 2 * padding - kernel) / stride + 1) is valid.  avg_pool3d(zeros(1, 1,
7, 2, 6), 3, 1, padding=1) raises "input image (T: 7 H: 2 W: 6) smaller than kernel size", with
count_include_pad True or False; max_pool3d and avg_pool2d accept the same shapes.  Keras'
AveragePooling3D(3, strides=1, padding='same') on a side of 2 passes padding=1 to it and
fails on torch, where TensorFlow and JAX compute the layer.

    python torch_avg_pool3d_padding_kernel_check.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: torch 2.13.0+cpu.  Found by audee (the api-cpu campaign, rng 2811: torch refusing an
AveragePooling3D(pool_size=3, padding='same', data_format='channels_first') on a (7, 2, 6)
input that TensorFlow runs).
"""
import sys

import torch
import torch.nn.functional as F

x = torch.arange(84, dtype=torch.float32).reshape(1, 1, 7, 2, 6)
want = tuple(1 + (n + 2 * 1 - 3) // 1 for n in x.shape[2:])  # torch's documented output size
ref = F.avg_pool3d(F.pad(x, (1, 1, 1, 1, 1, 1)), 3, 1)  # pad by hand: count_include_pad=True
refused = []
for include in (True, False):
    try:
        y = F.avg_pool3d(x, 3, 1, padding=1, count_include_pad=include)
        extra = f", max |y - hand-padded| {float((y - ref).abs().max()):.3g}" if include else ""
        print(f"avg_pool3d(count_include_pad={include}): shape {tuple(y.shape)}{extra}")
    except RuntimeError as e:
        print(f"avg_pool3d(count_include_pad={include}): raises {str(e).splitlines()[0]}")
        refused.append(f"count_include_pad={include}")
print(f"documented output size: {want}; hand-padded avg_pool3d: {tuple(ref.shape[2:])}")
print(f"max_pool3d same shapes: {tuple(F.max_pool3d(x, 3, 1, padding=1).shape)}")
print(f"avg_pool2d (1, 1, 2, 6) same kernel/padding: {tuple(F.avg_pool2d(x[:, :, 0], 3, 1, padding=1).shape)}")
if refused:
    print("REPRODUCED: avg_pool3d checks the unpadded input against the kernel (" + ", ".join(refused) + ")")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
