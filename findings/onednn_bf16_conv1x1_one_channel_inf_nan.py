"""oneDNN's x64 bfloat16 1x1 convolution on ONE input channel (kernel ``brgconv_1x1:avx512_core_bf16``, reached by
both TensorFlow's and torch's CPU conv2d) puts a NaN at the pixel BEFORE a lone +inf: a 1x1 convolution cannot
mix pixels, so the exact answer is +-inf at that pixel (x * w) and finite values everywhere else; JAX gives it.
The reading: IC = 1 is padded to a bf16 VNNI pair (weights ``ABcd16a2b``), the pair's second slot holds the next
pixel's input, and its zero-padded weight times +inf gives NaN on the previous pixel.  Right with oneDNN off
(``TF_ENABLE_ONEDNN_OPTS=0``, ``torch.backends.mkldnn.enabled = False``), with ``ONEDNN_MAX_CPU_ISA=AVX512_CORE``
(no bf16 instructions), in float32, and on JAX.  Keras reaches it through a Conv2D (and a SeparableConv2D's
pointwise step) with one input channel and a 1x1 kernel under the bfloat16 policy, on TensorFlow and torch.

    python findings/onednn_bf16_conv1x1_one_channel_inf_nan.py
    # prints REPRODUCED and exits 1 while the bug is there (plain tf.nn.conv2d and torch conv2d, bfloat16)

Versions: tensorflow 2.21 (CPU, oneDNN on, the default), torch 2.13.0+cpu; jax 0.10.2 right.  CPU note: the
effect needs a CPU with avx512_bf16 (oneDNN then picks the avx512_core_bf16 kernel); seen on an AMD EPYC with
AVX512_BF16 and no AMX.  On a CPU with AVX512 and without avx512_bf16 (an Intel Xeon with AVX512_VNNI) the 1x1
face is right, and torch's kernel-3 conv1d (oneDNN's ``jit_bf16:avx512_core``, which pads IC = 1 to a pair too)
puts a NaN on the output before the window holding the +inf: the script checks both faces (the api-cpu campaign,
rng 2923: a bfloat16 Conv1D, kernel 3, on one input channel, torch alone NaN).

Upstream (issues corpus): not found.  Queries: "bf16 1x1 convolution NaN inf neighbour", "brgconv 1x1 bf16 NaN",
"oneDNN bfloat16 convolution single input channel padding NaN", "torch conv2d bfloat16 cpu inf input produces
NaN at adjacent position mkldnn".  Nearest: pytorch/pytorch#163347 (open, "Incorrect bf16 results in Conv": a
bf16 conv2d with ONE input channel, 2x2 kernel, of ones gives 1 instead of 4 on an AMD CPU, right with mkldnn
off): the same corner (oneDNN bf16, IC = 1) with another face, a wrong finite value; pytorch/pytorch#157237
(open, float32 Conv1d, extra NaNs beside NaN inputs depending on batch size): the same face in float32, another
path; uxlfoundation/oneDNN#5717 / pytorch/pytorch#171034 (bf16 matmul, +-inf times a zero pad in the K tail):
the same family (findings row 94).  Found by audee: the api-cpu campaign, rng 2867 (api-SeparableConv2D-v00004:
a bfloat16 adapter Conv2D(2 filters, 1x1, no activation) on one input channel fed one +inf; TensorFlow and
torch NaN at the pixel before it, JAX only +-inf; the first case of its root, filed under
tf-onednn-fused-relu-nan, triaged by hand).
"""
import os
import sys


def _cpu_flags() -> set:
    try:
        with open("/proc/cpuinfo") as f:
            return {w for line in f if line.startswith("flags") for w in line.split(":", 1)[1].split()}
    except OSError:
        return set()


# The bug is in oneDNN's AVX-512 kernels (brgconv_1x1:avx512_core_bf16, jit_bf16:avx512_core): on a CPU without AVX-512, TensorFlow
# hands bfloat16 and float16 to its own Eigen kernels and oneDNN runs AVX2 ones, so this machine can
# show neither the bug nor its fix
if "avx512f" not in _cpu_flags():
    print("NOT TESTABLE HERE: this CPU has no AVX-512 (/proc/cpuinfo flags), and the bug needs oneDNN's "
          "AVX-512 kernels (brgconv_1x1:avx512_core_bf16, jit_bf16:avx512_core)")
    sys.exit(2)

# oneDNN on, as on the CPUs where TensorFlow turns it on by default (AVX-512 VNNI/BF16, AMX): on others
# (an AVX2 CPU) TensorFlow 2.21 leaves it off, and its own kernels compute this right
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
import numpy as np

W = np.array([-2.25, 0.375], np.float32).reshape(1, 1, 1, 2)  # HWIO: 1x1 kernel, 1 input channel, 2 filters


def tf_conv(x, dtype):
    import tensorflow as tf
    return tf.cast(tf.nn.conv2d(tf.cast(x, dtype), tf.cast(W, dtype), 1, "VALID"), tf.float32).numpy()


def torch_conv(x, dtype):
    import torch
    y = torch.nn.functional.conv2d(torch.tensor(x).permute(0, 3, 1, 2).to(dtype),
                                   torch.tensor(W).permute(3, 2, 0, 1).to(dtype))
    return y.float().permute(0, 2, 3, 1).numpy()


def where(mask):
    return [tuple(int(i) for i in p[:3]) for p in np.unique(np.argwhere(mask)[:, :3], axis=0)]


bad = []
for shape, pos in [((8, 7, 6), (1, 1, 5)), ((1, 1, 32), (0, 0, 3))]:
    x = np.ones(shape + (1,), np.float32)
    x[pos + (0,)] = np.inf
    exact = x.astype(np.float64) * W.reshape(1, 1, 1, 2).astype(np.float64)  # the exact 1x1 convolution
    print(f"x {shape + (1,)} of ones, +inf at pixel {pos}; exact: non-finite only at {where(~np.isfinite(exact))}")
    for name, fn, dtypes in [("tensorflow", tf_conv, ("bfloat16", "float32")),
                             ("torch", torch_conv, ("bfloat16", "float32"))]:
        for dt in dtypes:
            if name == "torch":
                import torch
                dtype = getattr(torch, dt)
            else:
                import tensorflow as tf
                dtype = getattr(tf, dt)
            y = fn(x, dtype)
            off = ~np.isfinite(y)
            off[pos] = False
            print(f"  {name:10s} {dt:8s}: NaN at {where(np.isnan(y))}, +-inf at {where(np.isinf(y))}, "
                  f"at the inf pixel {y[pos].tolist()}" + ("  <- wrong" if off.any() else ""))
            if off.any() and dt == "bfloat16":
                bad.append(f"{name} {shape} non-finite at {where(off)}")
# the same padding on a CPU without avx512_bf16: oneDNN's jit_bf16:avx512_core direct convolution (kernel 3)
# pads IC = 1 to a pair as well; a conv1d output reads only its window, so only windows holding the +inf may be
# non-finite (torch's face here; TensorFlow's kernel-3 path is right on such a CPU)
K3 = np.array([[0.5, -1.0], [0.25, 0.75], [-0.5, 1.5]], np.float32).reshape(3, 1, 2)  # WIO: kernel 3, 1 -> 2


def tf_conv1d(x, dtype):
    import tensorflow as tf
    return tf.cast(tf.nn.conv1d(tf.cast(x, dtype), tf.cast(K3, dtype), 1, "VALID"), tf.float32).numpy()


def torch_conv1d(x, dtype):
    import torch
    # (N, C, L) built anew (as Keras' torch backend hands it on): with C = 1 a permuted tensor, or one made from a
    # transposed NumPy array, keeps a stride of 1 on C, which oneDNN reads as channels-last and computes right
    y = torch.nn.functional.conv1d(torch.tensor(x.transpose(0, 2, 1).tolist()).to(dtype),
                                   torch.tensor(K3).permute(2, 1, 0).contiguous().to(dtype))
    return y.float().permute(0, 2, 1).numpy()


x = np.ones((1, 8, 1), np.float32)
x[0, 3, 0] = np.inf
windows = [t for t in range(6) if t <= 3 < t + 3]  # the outputs whose window holds the +inf
print(f"x (1, 8, 1) of ones, +inf at 3, kernel 3: only outputs {windows} may be non-finite (+-inf, no NaN)")
for name, fn in [("tensorflow", tf_conv1d), ("torch", torch_conv1d)]:
    if name == "torch":
        import torch
        dtype = torch.bfloat16
    else:
        import tensorflow as tf
        dtype = tf.bfloat16
    y = fn(x, dtype)
    off = ~np.isfinite(y[0]).all(axis=1)
    off[windows] = False
    off |= np.isnan(y[0]).any(axis=1)  # one +inf times non-zero weights: +-inf in its windows, never NaN
    nan = [int(t) for t in np.flatnonzero(np.isnan(y[0]).any(axis=1))]
    print(f"  {name:10s} bfloat16: NaN at outputs {nan}" + ("  <- wrong" if off.any() else ""))
    if off.any():
        bad.append(f"{name} kernel 3: NaN or non-finite outside the windows at outputs {[int(t) for t in np.flatnonzero(off)]}")
if bad:
    print("REPRODUCED: a bfloat16 convolution on one input channel puts a NaN or a non-finite value outside the "
          "+inf's windows:",
          "; ".join(bad))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
