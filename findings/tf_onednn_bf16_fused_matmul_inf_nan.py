"""TensorFlow 2.21 on the CPU with oneDNN on (the default): a bfloat16 MatMul followed by BiasAdd inside a
tf.function (grappler's remapper fuses them into oneDNN ``_FusedMatMul``) returns NaN for a row whose last
K entry is +-inf, where the answer is +-inf (eager, and the same graph without the bias, give it).  It needs at
least 2 rows, an odd K (K = 1, 3, 5) and the +-inf at the last K position; other rows are unaffected.
float32/float16, even K, M = 1, a finite 1e30 at that place and ``TF_ENABLE_ONEDNN_OPTS=0`` all give the right
+-inf.  The reading: the bf16 VNNI pair (x[K-1], padding) meets a zero-padded weight row, so +-inf * 0 = NaN in
oneDNN's K tail (seen on an AVX512_BF16 CPU without AMX).  Keras reaches it through Dense / EinsumDense under
the bfloat16 policy on TensorFlow (Keras runs the model in a tf.function).

    python findings/tf_onednn_bf16_fused_matmul_inf_nan.py
    # prints REPRODUCED and exits 1 while the bug is there (plain TensorFlow; tf.function against eager)

Versions: tensorflow 2.21 (CPU, oneDNN on).  Not found upstream as this face (queries, issues corpus:
"tensorflow bfloat16 matmul bias_add inf becomes NaN onednn _FusedMatMul", "oneDNN bf16 matmul odd K inf input
produces NaN zero padding", "tf.function bfloat16 Dense NaN instead of -inf graph mode eager differs", "oneDNN
avx512_bf16 matmul inf times zero padding NaN K tail vnni", "pytorch matmul bf16 cpu inf gives nan K=3
incorrect result matmul_bf16").  Nearest: uxlfoundation/oneDNN#5717 (closed) / PR #5723 (merged 2026-07-31),
AMX brgemm bf16 K tail (K > 32, K % 32 != 0) leaking NaN from adjacent rows through NaN * 0 against B's zero
padding: the same family (a zero-padded K tail times a non-finite value) but another ISA, shape and row;
pytorch/pytorch#171034 (closed; torch's CPU bf16 matmul, K = 3, a row [inf, 0, -inf] gives NaN where the answer
is inf): the same face on torch's oneDNN path, a year earlier; how it was closed was not visible.  If #5723's fix
covers every bf16 K-tail path, this is oneDNN#5717 arriving in TensorFlow's bundled oneDNN.  Found by audee: the
api-cpu campaign, rng 2866 (case nan-Dense-tensorflow-a431c98e: Dense(2) under bfloat16, x of (8, 3) with a
lone -inf at position 2 of a row; TensorFlow NaN where torch and JAX give -inf; filed under
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


# The bug is in oneDNN's AVX-512 kernels (avx512_core_bf16 matmul's K tail): on a CPU without AVX-512, TensorFlow
# hands bfloat16 and float16 to its own Eigen kernels and oneDNN runs AVX2 ones, so this machine can
# show neither the bug nor its fix
if "avx512f" not in _cpu_flags():
    print("NOT TESTABLE HERE: this CPU has no AVX-512 (/proc/cpuinfo flags), and the bug needs oneDNN's "
          "AVX-512 kernels (avx512_core_bf16 matmul's K tail)")
    sys.exit(2)

# oneDNN on, as on the CPUs where TensorFlow turns it on by default (AVX-512 VNNI/BF16, AMX): on others
# (an AVX2 CPU) TensorFlow 2.21 leaves it off, and its own kernels compute this right
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
import numpy as np
import tensorflow as tf

fused = tf.function(lambda x, w, b: tf.nn.bias_add(tf.matmul(x, w), b))


def run(k, pos, value, dtype=tf.bfloat16, rows=2):
    x = np.zeros((rows, k), np.float32)
    x[0, pos] = value
    x, w, b = (tf.constant(a, dtype) for a in (x, np.ones((k, 2), np.float32), np.zeros(2, np.float32)))
    graph = fused(x, w, b).numpy().astype(np.float64)
    eager = tf.nn.bias_add(tf.matmul(x, w), b).numpy().astype(np.float64)
    return graph, eager


bad = []
for k, pos, value, dtype, rows in [(3, 2, -np.inf, tf.bfloat16, 2), (3, 2, np.inf, tf.bfloat16, 2),
                                   (5, 4, -np.inf, tf.bfloat16, 2), (1, 0, -np.inf, tf.bfloat16, 2),
                                   (3, 1, -np.inf, tf.bfloat16, 2), (4, 3, -np.inf, tf.bfloat16, 2),
                                   (3, 2, -np.inf, tf.bfloat16, 1), (3, 2, -np.inf, tf.float32, 2),
                                   (3, 2, -np.inf, tf.float16, 2)]:
    graph, eager = run(k, pos, value, dtype, rows)
    want = np.full(2, value)  # +-inf * 1 + zeros + bias 0
    ok = np.array_equal(graph[0], want)
    print(f"K={k} {value:+} at {pos}, M={rows}, {dtype.name:8s}: tf.function row 0 {graph[0]}, eager {eager[0]}"
          + ("" if ok else "  <- wrong"))
    if not ok:
        bad.append(f"K={k} {value:+} at {pos}")
if bad:
    print("REPRODUCED: the fused bfloat16 MatMul+BiasAdd gives NaN where eager and the answer are +-inf:",
          "; ".join(bad))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
