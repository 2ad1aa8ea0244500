"""TF CPU + oneDNN: conv ops on a batch of 0 rows return the input tensor unchanged.
Run with TF_ENABLE_ONEDNN_OPTS=0 to compare (shapes become right)."""
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")  # pinned on (TF 2.21 leaves it off on CPUs without AVX-512 VNNI/BF16 or AMX)
import tensorflow as tf

bad = 0
def check(name, fn, x_full):
    global bad
    full = fn(x_full).shape
    x0 = x_full[:0]
    for mode in ("eager", "tf.function"):
        f = tf.function(fn) if mode == "tf.function" else fn
        try:
            got = tuple(f(x0).shape)
        except Exception as e:
            got = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
        want = (0,) + tuple(full[1:])
        ok = got == want
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:28s} {mode:11s} got {got} want {want}")

k1 = tf.ones((3, 4, 5)); k2 = tf.ones((3, 3, 4, 5)); k3 = tf.ones((3, 3, 3, 4, 5))
dk = tf.ones((3, 3, 4, 2))
check("conv1d", lambda x: tf.nn.conv1d(x, k1, 1, "VALID"), tf.ones((2, 8, 4)))
check("conv2d", lambda x: tf.nn.conv2d(x, k2, 1, "VALID"), tf.ones((2, 8, 8, 4)))
check("conv3d", lambda x: tf.nn.conv3d(x, k3, [1]*5, "VALID"), tf.ones((2, 8, 8, 8, 4)))
check("depthwise_conv2d", lambda x: tf.nn.depthwise_conv2d(x, dk, [1]*4, "VALID"), tf.ones((2, 8, 8, 4)))
check("avg_pool1d", lambda x: tf.nn.avg_pool1d(x, 2, 2, "VALID"), tf.ones((2, 8, 4)))
check("avg_pool2d", lambda x: tf.nn.avg_pool2d(x, 2, 2, "VALID"), tf.ones((2, 8, 8, 4)))
check("avg_pool3d", lambda x: tf.nn.avg_pool3d(x, 2, 2, "VALID"), tf.ones((2, 8, 8, 8, 4)))
check("max_pool1d", lambda x: tf.nn.max_pool1d(x, 2, 2, "VALID"), tf.ones((2, 8, 4)))
check("max_pool2d", lambda x: tf.nn.max_pool2d(x, 2, 2, "VALID"), tf.ones((2, 8, 8, 4)))
check("max_pool3d", lambda x: tf.nn.max_pool3d(x, 2, 2, "VALID"), tf.ones((2, 8, 8, 8, 4)))
print("TF", tf.__version__, "oneDNN opts env =", os.environ.get("TF_ENABLE_ONEDNN_OPTS", "<unset: default on for x86 CPU>"))
if bad:
    print(f"REPRODUCED {bad} wrong result(s) on a batch of 0 rows"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
