"""XLA (CPU; jax.jit, and JAX's op-by-op calls, which are jitted too): the algebraic simplifier (`algsimp`)
rewrites `A / broadcast(b)` into `A * broadcast(1 / b)`: exact over the reals, not in floating point.  In
float16 a small divisor's reciprocal overflows (1 / 1e-5 = 1e5 > 65504) to inf, so every quotient comes out
+-inf although it fits float16: f16[0.01, -0.00041] / f16(1e-5) is [999, -40.94] in NumPy and in XLA with a
full-shape divisor, [inf, -inf] with a scalar one.  Dump with XLA_FLAGS=--xla_dump_to=DIR
--xla_dump_hlo_pass_re=.*: before `algsimp` `divide(x, broadcast(y))`, after it `multiply(x,
broadcast(divide(1, y)))`.  The same happens under tf.function(jit_compile=True) with a constant divisor.

Keras' Normalization under a float16 policy meets it: a variance of 1e-12 gives (x - mean) / sqrt(var) with
sqrt(var) ~ 1.19e-7 (its floor), whose float16 reciprocal is inf; the exact quotient (e.g. -3584) fits.

    python findings/xla_cpu_div_broadcast_reciprocal_fp16.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: jax/jaxlib 0.10.2, numpy 2.4.6 (tensorflow 2.21.0 jit_compile the same), CPU.  Upstream: the rule
comes from tensorflow#24061 (2018, "Investigate precomputing reciprocals for division operations in XLA", a
speed request); its overflow is not reported (queries: "XLA algebraic simplifier divide by broadcast rewritten
as multiply by reciprocal precision float16 overflow", "jax float16 division by scalar gives inf jit reciprocal
overflow", "jnp.divide by scalar differs from numpy float16 inf jit divide broadcast scalar precision", "jit
division replaced by multiplication with reciprocal gives different result than eager, XLA divide scalar");
the same family (algsimp rewrites exact in R, wrong at overflow): openxla/xla#42732, findings row 82's
multiply reassociation.  Found by audee: the api-cpu campaign, rng 2893 (Normalization, float16, variance
1e-12: JAX and onnxruntime 4 inf more than TensorFlow and torch), triaged by hand.
"""
import sys

import numpy as np
import jax
import jax.numpy as jnp

a = np.float16([0.01, -0.00041])
b = np.float16(1e-5)
ref = a / b                                                   # NumPy float16: [999, -40.94]
scalar = np.asarray(jax.jit(jnp.divide)(a, b))                # A / broadcast(b): rewritten
full = np.asarray(jax.jit(jnp.divide)(a, np.full(2, b)))      # a full-shape divisor: a true divide
print("jax", jax.__version__, "numpy", np.__version__)
print(f"f16{a.tolist()} / f16({float(b):.3g}): numpy {ref.tolist()}, jit scalar divisor {scalar.tolist()}, "
      f"jit full-shape divisor {full.tolist()} (1/b = {1 / float(b):.3g}, over float16's 65504)")
if np.all(np.isfinite(ref)) and not np.all(np.isfinite(scalar)) and np.array_equal(full, ref):
    print("REPRODUCED: XLA divides by a broadcast scalar as a multiply by its float16 reciprocal, which overflows")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
