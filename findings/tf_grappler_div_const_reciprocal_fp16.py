"""TensorFlow 2.21: grappler's constant folding rewrites `x / c`, c a constant, into `x * (1 / c)` with the
reciprocal folded into a new constant (named `.../truediv_recip`).  Exact over the reals, not in float16: for a
small c the folded 1 / c overflows to inf (1 / 1e-5 = 1e5 > 65504), so a tf.function gives +-inf where the
quotient fits: f16[0.01, -0.00041] / f16(1e-5) is [999, -40.94] eagerly and in NumPy, [inf, -inf] in the
graph.  With `constant_folding` off (tf.config.optimizer.set_experimental_options) the graph gives the eager
result; with only `arithmetic_optimization` off it still overflows; a non-constant divisor is not rewritten.

tf2onnx runs grappler on the graph it exports, so a frozen Keras model carries the inf constant into ONNX:
Keras' Normalization under a float16 policy with a variance of 1e-12 divides by sqrt(var) ~ 1.19e-7 (its
floor), and the exported graph multiplies by `ConstantFolding/.../truediv_recip` = inf, so onnxruntime gives
+-inf where TensorFlow (whose own Keras graph divides by a variable) gives the finite quotient.

    python findings/tf_grappler_div_const_reciprocal_fp16.py
    # prints REPRODUCED and exits 1 while the bug is there (TensorFlow alone, no Keras)

Versions: tensorflow 2.21.0, numpy 2.4.6, CPU.  Upstream: not found (queries: "grappler constant folding
division by constant replaced by multiplication reciprocal inf overflow", "tf.function divide by small constant
float16 gives inf but eager gives finite", "truediv_recip ConstantFolding tf2onnx inf", "grappler constant
folding Div by constant converted to Mul reciprocal precision loss frozen graph different result").  Nearest:
tensorflow#102771 and its fix #126208 (another constant-folding rule, Div(ones, y) -> Reciprocal(y), removed
for breaking eager/graph parity), tensorflow#59324 (closed, stalled: float16 x / 255.0 inf in Dataset.map, not
this: 1/255 does not overflow, and 2.21 gives the right answer).  Found by audee: the api-cpu campaign, rng
2893 (Normalization, float16, variance 1e-12: onnxruntime and JAX 4 inf more than TensorFlow and torch),
triaged by hand.
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

a = np.float16([0.01, -0.00041])
b = np.float16(1e-5)
x = tf.constant(a)


def div(x):
    return x / tf.constant(b)


eager = div(x).numpy()
graph = tf.function(div)(x).numpy()
tf.config.optimizer.set_experimental_options({"constant_folding": False})
no_folding = tf.function(div)(x).numpy()
tf.config.optimizer.set_experimental_options({"constant_folding": True})
print("tensorflow", tf.__version__, "numpy", np.__version__)
print(f"f16{a.tolist()} / constant f16({float(b):.3g}): numpy {(a / b).tolist()}, eager {eager.tolist()}, "
      f"tf.function {graph.tolist()}, tf.function with constant_folding off {no_folding.tolist()}")
if np.all(np.isfinite(eager)) and not np.all(np.isfinite(graph)) and np.array_equal(no_folding, eager):
    print("REPRODUCED: grappler's constant folding turns the division by a constant into a multiply by its "
          "float16 reciprocal, which overflows")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
