"""JAX 0.10.2 on the CPU: jax.nn.dot_product_attention (implementation 'xla') on float16 inputs
fails under jax.jit with "ValueError: The precision 'F16_F16_F32' is not supported by
dot_general on CPU", eagerly it runs.  jax/_src/nn/functions.py (_dot_product_attention_core)
asks for the DotAlgorithmPreset F16_F16_F32 for float16 logits and guards it with try/except
to fall back to the default precision, but under jit the error is raised when the traced
program is lowered, after the try block has returned, so the fallback never fires.  Keras
3.15.1's JAX backend (keras.ops.dot_product_attention) calls it, so MultiHeadAttention /
GroupQueryAttention under a float16 policy fail on JAX in every jitted path (model.predict,
fit, audee's workers) where TensorFlow and torch run them.

    python jax_dot_product_attention_fp16_cpu_jit.py   # prints REPRODUCED and exits 1 while the bug is there

Found by audee (training campaign experiments/campaigns/train-cpu.yaml, API-level case
api-GroupQueryAttention-v00000: GroupQueryAttention(head_dim=3, num_query_heads=2,
num_key_value_heads=2) under the float16 policy; a divergent acceptance, JAX the one that
refuses; the run classed it 'harness' because JAX's filtered traceback ended in audee's frame).
Upstream: known, keras-team/keras-hub#2354 (merged: "JAX's nn.dot_product_attention does not
support float16 on the CPU", worked around in KerasHub by computing in float32); no JAX issue
found (queries: "dot_product_attention float16 CPU jit F16_F16_F32 not supported by
dot_general", "jax.nn.dot_product_attention float16 fails on CPU under jit precision not
supported").
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")
import jax
import jax.numpy as jnp
import numpy as np

q = jnp.asarray(np.random.default_rng(0).standard_normal((2, 4, 2, 3)), jnp.float16)  # (B, T, N, H)


def attention(q):
    return jax.nn.dot_product_attention(q, q, q)


ref = None
failed = []
for name, fn in (("float32 eager", lambda q: attention(q.astype(jnp.float32))), ("float16 eager", attention),
                 ("float16 jit", jax.jit(attention)), ("float16 jit(grad)", jax.jit(jax.grad(lambda q: attention(q).astype(jnp.float32).sum())))):
    try:
        y = np.asarray(fn(q), dtype="float32")
        if ref is None:
            ref = y
        err = float(np.max(np.abs(y - ref))) if "grad" not in name else 0.0
        print(f"jax.nn.dot_product_attention {name:18s}: runs" + ("" if "grad" in name else f", max |y - float32| = {err:.2g}"))
    except Exception as e:
        print(f"jax.nn.dot_product_attention {name:18s}: {type(e).__name__}: {str(e).splitlines()[0]}")
        failed.append(name)
import keras  # noqa: E402  the Keras layer that reaches it

layer = keras.layers.GroupQueryAttention(head_dim=3, num_query_heads=2, num_key_value_heads=2, dtype="float16")
x = keras.Input((4, 5))
model = keras.Model(x, layer(x, x))
try:
    model.predict(np.ones((2, 4, 5), "float16"), verbose=0)
    print("keras GroupQueryAttention float16 model.predict (jax): runs")
except Exception as e:
    print(f"keras GroupQueryAttention float16 model.predict (jax): {type(e).__name__}: {str(e).splitlines()[0]}")
    failed.append("keras GroupQueryAttention float16 model.predict")
if failed:
    print("REPRODUCED: " + ", ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED")
