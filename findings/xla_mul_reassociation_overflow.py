"""XLA (CPU; jax.jit and TensorFlow's tf.function(jit_compile=True) alike): the algebraic
simplifier rewrites `(x * c) * broadcast(s)` into `x * broadcast(c * s)`, exact over the
reals but not in float32: where `x * c` overflows to inf and `s` is 0, op-by-op execution
computes inf * 0 = NaN, the compiled program x * 0 = 0.  The `algsimp` pass does it (dump
with XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_pass_re=.*: before it `multiply(multiply(x,
broadcast(255)), broadcast(s))`, after it `multiply(x, broadcast(multiply(s, 255)))`).

Keras' AutoContrast meets it: value_range (0, 1) first scales the image by 255, then
`scale = 255 / (high - low)` and `images * scale + offset`; a pixel near float32's max
overflows to inf in the first step, `high - low` is inf, `scale` is 0, and the pixel is
inf * 0 = NaN op by op (the layer's NaN guard then hands back the input pixel) but 0 under
XLA.  The same under JAX and TensorFlow: one XLA cause.

Upstream: the same family (algsimp rewrites exact in R, wrong at float overflow) is reported
for other rules -- openxla/xla#42732 (closed; log(exp(x)), sqrt(x*x)), tensorflow#123169
(exp(a) * exp(b)), jax-ml/jax#37919, #38099 -- and openxla/xla#45560 proposed gating those
behind fast-math; this multiply reassociation is not among them (queries: "jit reassociates
multiplication by constants overflow inf*0 NaN differs from eager", "XLA simplifier reorders
multiply by constant (x*c)*y overflow inf times zero gives 0 instead of NaN", "AutoContrast
jit_compile NaN different result overflow keras").

    python findings/xla_mul_reassociation_overflow.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: jax/jaxlib 0.10.2, tensorflow 2.21.0, keras 3.15.1, CPU.  Found by audee (the
compilers campaign, rng 2811: AutoContrast deviating in jax vs jax-eager and tensorflow-xla vs
tensorflow).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["KERAS_BACKEND"] = "jax"
import numpy as np
import jax
import tensorflow as tf
import keras

x = np.array([2.0e38, 1.0, -15.0], np.float32)  # x * 255 overflows for the first element only
s = np.float32(0.0)


def mul(a, b):
    return (a * 255.0) * b


with np.errstate(over="ignore", invalid="ignore"):
    with jax.disable_jit():
        jax_eager = np.asarray(mul(jax.numpy.asarray(x), s))
    jax_jit = np.asarray(jax.jit(mul)(x, s))
    tf_eager = mul(tf.constant(x), tf.constant(s)).numpy()
    tf_xla = tf.function(mul, jit_compile=True)(tf.constant(x), tf.constant(s)).numpy()
print("jax", jax.__version__, "tensorflow", tf.__version__, "keras", keras.__version__)
print(f"(x * 255) * 0, x = {x.tolist()}")
for name, y in [("jax op by op", jax_eager), ("jax.jit", jax_jit), ("tf eager", tf_eager), ("tf XLA", tf_xla)]:
    print(f"  {name:13s}: {y.tolist()}")

# The campaign's layer: one channel whose pixel near float32's max overflows in the 255 scaling.
image = np.array([1.6, -0.87, -15.76, 2.0789129e38], np.float32).reshape(1, 4, 1, 1)
layer = keras.layers.AutoContrast(value_range=(0, 1))
with np.errstate(over="ignore", invalid="ignore"):
    with jax.disable_jit():
        layer_eager = np.asarray(layer(image)).ravel()
    layer_jit = np.asarray(jax.jit(lambda t: layer(t))(image)).ravel()
print(f"AutoContrast(value_range=(0, 1)) on {image.ravel().tolist()}:")
print(f"  op by op: {layer_eager.tolist()}\n  jax.jit : {layer_jit.tolist()}")

same = lambda a, b: bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))  # noqa: E731
apart = [name for name, (a, b) in [("jax", (jax_eager, jax_jit)), ("tensorflow", (tf_eager, tf_xla)),
                                    ("AutoContrast", (layer_eager, layer_jit))] if not same(a, b)]
if apart:
    print("REPRODUCED: XLA turns inf * 0 = NaN into 0 after reassociating the multiplies (" + ", ".join(apart) + ")")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
