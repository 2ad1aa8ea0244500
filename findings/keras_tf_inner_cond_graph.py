"""Keras 3.15.1, TensorFlow backend: `keras.ops.inner` branches on the inputs' ranks with
`tf.cond(rank(x1) == 0 or rank(x2) == 0, lambda: x1 * x2, lambda: tensordot(x1, x2, [[-1],
[-1]]))`.  Eagerly only the taken branch runs; in a graph (tf.function, model.predict, the
TFLite converter) both branches are traced, so the call fails wherever the branch it does
not take is invalid, and XLA refuses a tf.cond whose branches differ in rank:

  - two vectors (4,) . (4,) under tf.function(jit_compile=True): `left_branch_shape.
    dimensions_size() != right_branch_shape.dimensions_size() (1 vs 0)` (eager: 20.0);
  - (2, 3) . (4, 3) in any tf.function: the unused `x1 * x2` fails shape inference,
    `Dimensions must be equal, but are 2 and 4 ... node cond/mul` (eager: numpy's (2, 4));
  - a scalar . (3,) in any tf.function: the unused tensordot raises `IndexError: list
    index out of range` (eager: numpy's (3,)).

The ranks are static here, so a Python `if` on `x1.shape.rank` would trace one branch (the
JAX and torch backends call jnp.inner / torch.inner).  Keras' tests of `inner` run eagerly
(keras/src/ops/numpy_test.py, test_inner), and the implementation is unchanged on Keras'
master (3422977, 2026-08-21).  Not found upstream (query: "keras ops.inner tensorflow
backend tf.cond tf.function fails jit_compile"; TF's own #56560, a tf.function tracing both
branches of a size test, is the same pattern in user code).

    KERAS_BACKEND=tensorflow python findings/keras_tf_inner_cond_graph.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: keras 3.15.1, tensorflow 2.21.0, CPU.  Found by audee (the compilers campaign, rng
2811: the op unit's tensorflow-xla mode refusing `inner` of two (4,) vectors).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "tensorflow"
import numpy as np
import tensorflow as tf
import keras

tf.get_logger().setLevel("ERROR")

cases = [((4,), (4,)), ((2, 3), (4, 3)), ((), (3,))]
modes = [("eager", None), ("tf.function", False), ("XLA", True)]
failed = []
print("keras", keras.__version__, "tensorflow", tf.__version__)
for a, b in cases:
    x1 = np.arange(1, 1 + int(np.prod(a)), dtype=np.float32).reshape(a)
    x2 = np.arange(2, 2 + int(np.prod(b)), dtype=np.float32).reshape(b)
    want = np.inner(x1, x2)
    for name, jit in modes:
        fn = keras.ops.inner if jit is None else tf.function(keras.ops.inner, jit_compile=jit)
        try:
            y = np.asarray(fn(x1, x2))
            ok = y.shape == want.shape and np.allclose(y, want)
            print(f"inner {a} . {b} {name:11s}: shape {y.shape}, {'= numpy' if ok else 'differs from numpy'}")
            if not ok:
                failed.append(f"{a}.{b} {name}")
        except Exception as e:  # what a graph of the op raises (InvalidArgumentError, ValueError, StagingError)
            lines = [ln.strip() for ln in str(e).splitlines() if "Error" in ln or "!=" in ln] or [str(e)]
            print(f"inner {a} . {b} {name:11s}: {type(e).__name__}: {lines[0][:150]}")
            failed.append(f"{a}.{b} {name}")
if failed:
    print("REPRODUCED: keras.ops.inner fails in a TensorFlow graph (" + "; ".join(failed) + ")")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
