"""TensorFlow's CPU Conv3D through oneDNN (the default build, oneDNN on) computes a wrong float32 result when the
innermost output dimension is 1 and reached with a stride above 1: ``tf.nn.conv3d`` of a (2, 1, 2, 2, 1) input with
a 3x3x3 kernel, strides (2, 1, 2), padding SAME is off the same convolution in float64 (TensorFlow's Eigen kernel)
by about 2, the output's own size, and off TensorFlow itself with ``TF_ENABLE_ONEDNN_OPTS=0`` (which is right).
torch's float32 conv3d of the same shapes is right (mkldnn on and off); JAX is right.

    python findings/tf_onednn_conv3d_strided_unit_width.py
    # prints REPRODUCED and exits 1 while the bug is there (plain tf.nn.conv3d, float32, oneDNN on)

Versions: tensorflow 2.21.0 (CPU, oneDNN on: the default); an Intel Xeon with AVX512 (AVX512_VNNI), no AMX.
Some shapes give run-to-run different values (batch 8, 24 filters: 13.5, 13.5, 13.8 off), as if part of the output
were not written.  Found by audee: the api-cpu campaign, rng 2930 (api-ConvLSTM3D-v00000, strides (2, 1, 2),
padding same, on a (6, 1, 2, 2, 1) sequence: TensorFlow's graph 3.2 off the layer in float64, JAX and TensorFlow
without oneDNN within 3e-8 of it).

Upstream (issues corpus): not found for float32.  Query: "tensorflow conv3d oneDNN wrong results strides SAME
padding CPU".  Nearest: pytorch/pytorch#169688 (open, "[CPU] Stride 3 bfloat16 convolutions appear incorrect") and
its fix pytorch/pytorch#188426 (open: oneDNN's bf16 BRGEMM Conv3d ``brg_conv_fwd:avx10_1_512_amx`` is wrong when
``out_w == 1 and stride_w > 1``; "fp32 and fp16 select other primitives and are correct" there): the same shape class,
bfloat16 on AMX CPUs; here float32, through TensorFlow's oneDNN, on a CPU without AMX.
"""
import os
import subprocess
import sys

import numpy as np

CHECK = r"""
import numpy as np, tensorflow as tf
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 1, 2, 2, 1)).astype(np.float32)      # N, D, H, W, C
k = rng.standard_normal((3, 3, 3, 1, 2)).astype(np.float32)      # 3x3x3, 1 -> 2 channels
y = tf.nn.conv3d(x, k, strides=[1, 2, 1, 2, 1], padding="SAME").numpy()
y64 = tf.nn.conv3d(x.astype(np.float64), k.astype(np.float64), strides=[1, 2, 1, 2, 1], padding="SAME").numpy()
print(float(np.abs(y - y64).max()), float(np.abs(y64).max()), tuple(y.shape))
"""


def run(onednn: str) -> tuple[float, float, str]:
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS=onednn, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, env=env, check=True)
    err, size, shape = out.stdout.strip().split(" ", 2)
    return float(err), float(size), shape


on, size, shape = run("1")
off, _, _ = run("0")
print(f"tf.nn.conv3d float32, input (2, 1, 2, 2, 1), kernel 3x3x3 1 -> 2, strides (2, 1, 2), SAME -> {shape}")
print(f"  max |float32 - float64|: oneDNN on {on:.3g}, oneDNN off {off:.3g} (max |output| {size:.3g})")
if on > 1e-3 * max(size, 1.0) and off <= 1e-5 * max(size, 1.0):
    print("REPRODUCED: TensorFlow's oneDNN Conv3D is wrong where the innermost output dimension is 1 after a stride")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
