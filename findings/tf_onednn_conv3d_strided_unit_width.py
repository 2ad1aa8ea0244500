"""oneDNN's float32 BRGEMM convolution (``brg_conv_fwd:avx512_core``) computes wrong values where the innermost
output dimension is 1 and reached with a stride above 1.  Two faces, one kernel:

- TensorFlow's CPU Conv3D (oneDNN on, the default): ``tf.nn.conv3d`` of a (2, 1, 2, 2, 1) input with a 3x3x3 kernel,
  strides (2, 1, 2), padding SAME is off the same convolution in float64 (TensorFlow's Eigen kernel) by about 2, the
  output's own size, and off TensorFlow itself with ``TF_ENABLE_ONEDNN_OPTS=0`` (which is right);
- torch's CPU conv2d / conv3d (mkldnn on, the default) of a channels-last input with ONE input channel, batch 2 or
  more, height stride 1, width stride above 1 and output width 1: ``F.conv2d`` of a (2, 1, 4, 3) NHWC-strided input,
  kernel 3x3 1 -> 8, stride (1, 2) is about 5.7 off float64; with ``torch.backends.mkldnn.enabled = False`` right.
  Keras' torch backend makes every conv kernel channels-last (``keras.ops.conv``), which reaches it from Conv2D,
  Conv3D and the ConvLSTM layers; a tensor with standard strides, or more input channels, takes another kernel.

    python findings/tf_onednn_conv3d_strided_unit_width.py
    # prints REPRODUCED and exits 1 while either face is there (plain tf.nn.conv3d; plain torch F.conv2d)

Versions: tensorflow 2.21.0 (CPU, oneDNN on: the default), torch 2.13.0+cpu (oneDNN v3.12.0); an Intel Xeon with
AVX512 (AVX512_VNNI), no AMX; oneDNN's AVX2 kernel (``ONEDNN_MAX_CPU_ISA=AVX2``) is right.  Some shapes give run-to-run
different values on TensorFlow (batch 8, 24 filters: 13.5, 13.5, 13.8 off), as if part of the output were not
written; on torch the first output row of each sample is right and the later rows read wrong input positions.
Found by audee: the api-cpu campaign, rng 2930 (api-ConvLSTM3D-v00000, strides (2, 1, 2), padding same, on a
(6, 1, 2, 2, 1) sequence: TensorFlow's graph 3.2 off the layer in float64, torch 0.03-3.4 off, JAX and TensorFlow
without oneDNN within 3e-8 of it).

Upstream (issues corpus): not found for float32.  Queries: "tensorflow conv3d oneDNN wrong results strides SAME
padding CPU", "brg_conv_fwd avx512_core incorrect results nhwc ic=1 stride", "conv2d channels_last wrong result CPU
single input channel stride mkldnn", "oneDNN brgemm convolution wrong result ow=1 stride_w > 1 mb>1".  Nearest:
pytorch/pytorch#169688 (open, "[CPU] Stride 3 bfloat16 convolutions appear incorrect") and its fix
pytorch/pytorch#188426 (open: oneDNN's bf16 BRGEMM Conv3d ``brg_conv_fwd:avx10_1_512_amx`` is wrong when
``out_w == 1 and stride_w > 1``; "fp32 and fp16 select other primitives and are correct" there, and its guard is
bfloat16-only): the same shape class, bfloat16 on AMX CPUs; here float32 on a CPU without AMX.
pytorch/pytorch#82060 (closed, torch 1.12: a single-channel channels-last convolution, stride 1) is related, fixed.
"""
import os
import subprocess
import sys


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split(":", 1)[1].split()}
    except OSError:
        return set()


# The bug is in oneDNN's AVX-512 kernels (brg_conv_fwd:avx512_core): on a CPU without AVX-512, TensorFlow
# hands bfloat16 and float16 to its own Eigen kernels and oneDNN runs AVX2 ones, so this machine can
# show neither the bug nor its fix
if "avx512f" not in _cpu_flags():
    print("NOT TESTABLE HERE: this CPU has no AVX-512 (/proc/cpuinfo flags), and the bug needs oneDNN's "
          "AVX-512 kernels (brg_conv_fwd:avx512_core)")
    sys.exit(2)


CHECK = r"""
import numpy as np, tensorflow as tf
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 1, 2, 2, 1)).astype(np.float32)      # N, D, H, W, C
k = rng.standard_normal((3, 3, 3, 1, 2)).astype(np.float32)      # 3x3x3, 1 -> 2 channels
y = tf.nn.conv3d(x, k, strides=[1, 2, 1, 2, 1], padding="SAME").numpy()
y64 = tf.nn.conv3d(x.astype(np.float64), k.astype(np.float64), strides=[1, 2, 1, 2, 1], padding="SAME").numpy()
print(float(np.abs(y - y64).max()), float(np.abs(y64).max()), tuple(y.shape))
"""


TORCH = r"""
import sys, torch, torch.nn.functional as F
torch.backends.mkldnn.enabled = sys.argv[1] == "1"
g = torch.Generator().manual_seed(0)
x = torch.randn(2, 4, 3, 1, generator=g).permute(0, 3, 1, 2)    # (2, 1, 4, 3) with NHWC strides: channels-last
w = torch.randn(8, 1, 3, 3, generator=g)
y = F.conv2d(x, w, stride=(1, 2)).double()
y64 = F.conv2d(x.double(), w.double(), stride=(1, 2))            # float64: torch's own kernel, no oneDNN
print(float((y - y64).abs().max()), float(y64.abs().max()), tuple(y.shape))
"""


def measure(code: str, on: bool) -> tuple[float, float, str]:
    """``code`` run in a fresh interpreter with oneDNN on or off (TensorFlow's environment switch,
    torch's flag as the argument): max |float32 - float64|, max |float64|, the output's shape."""
    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1" if on else "0", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code, "1" if on else "0"], capture_output=True, text=True, env=env,
                         check=True)
    err, size, shape = out.stdout.strip().split(" ", 2)
    return float(err), float(size), shape


def face(name: str, code: str, what: str, switch: str) -> bool:
    """One face: wrong where oneDNN's result is off float64 by much more than rounding and the
    other kernel's is not; printed either way."""
    on, size, shape = measure(code, True)
    off, _, _ = measure(code, False)
    bad = on > 1e-3 * max(size, 1.0) and off <= 1e-5 * max(size, 1.0)
    print(f"{name} float32, {what} -> {shape}")
    print(f"  max |float32 - float64|: {switch} on {on:.3g}, {switch} off {off:.3g} (max |output| {size:.3g})"
          f" {'WRONG' if bad else 'ok'}")
    return bad


tf_face = face("tf.nn.conv3d", CHECK, "input (2, 1, 2, 2, 1), kernel 3x3x3 1 -> 2, strides (2, 1, 2), SAME", "oneDNN")
try:
    torch_face = face("torch F.conv2d", TORCH, "channels-last input (2, 1, 4, 3), kernel 3x3 1 -> 8, stride (1, 2)",
                      "mkldnn")
except (subprocess.CalledProcessError, ValueError) as exc:  # torch not installed here: TensorFlow's face alone
    torch_face = False
    print(f"torch face not checked: {exc}")
if tf_face or torch_face:
    print("REPRODUCED: oneDNN's float32 convolution is wrong where the innermost output dimension is 1 after a stride"
          f" ({', '.join(n for n, f in (('TensorFlow', tf_face), ('torch', torch_face)) if f)})")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
