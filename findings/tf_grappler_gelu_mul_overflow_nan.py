"""TensorFlow 2.21: grappler's arithmetic optimizer (stage MinimizeBroadcasts) reorders the
multiplications of ``a * tf.nn.gelu(x)`` inside a ``tf.function`` so that ``a * x`` comes first.
Where ``gelu(x)`` is a signed zero (x = -1e32: its erfc factor is 0) and ``a * x`` overflows
(a = 1e16), the graph computes -inf * 0 = NaN; eager TensorFlow, and the same graph with
``arithmetic_optimization`` off, give -0, as NumPy, torch and JAX do.

    python findings/tf_grappler_gelu_mul_overflow_nan.py
    # prints REPRODUCED and exits 1 while the bug is there (TensorFlow alone, no Keras)

Versions: tensorflow 2.21.0, CPU.  Not found upstream (queries: "grappler arithmetic optimizer
MinimizeBroadcasts NaN overflow", "tf.function gelu NaN eager zero", "arithmetic_optimization
reorder multiplication inf times zero"); related rewrites of other rules: tensorflow#119428,
#119429, #118675 (PR #122826).  Found by audee: the api-cpu campaign, rng 2824, a
Bidirectional LSTM with a gelu activation and linear gates whose state grows to float32's
range; TensorFlow had 30 NaN more than torch and JAX, exactly where the output is 0.
"""
import sys

import numpy as np
import tensorflow as tf

x = tf.constant(np.float32([-1e32, -30.0]))
a = tf.constant(np.float32([1e16, 1e16]))


def f(a, x):
    return a * tf.nn.gelu(x, approximate=False)


eager = f(a, x).numpy()
graph = tf.function(f)(a, x).numpy()
tf.config.optimizer.set_experimental_options({"arithmetic_optimization": False})
plain = tf.function(lambda a, x: a * tf.nn.gelu(x, approximate=False))(a, x).numpy()
print("tensorflow", tf.__version__)
print("eager                                ", eager)
print("tf.function                          ", graph)
print("tf.function, arithmetic_optimization off", plain)
bug = bool(np.isnan(graph[0]) and not np.isnan(eager[0]) and not np.isnan(plain[0]))
print("REPRODUCED: the optimized graph gives NaN where eager gives -0" if bug else "NOT REPRODUCED")
sys.exit(1 if bug else 0)
