"""Keras 3.15.1: any layer whose weights use the Orthogonal initializer -- GRU, LSTM and
SimpleRNN by default (recurrent_initializer='orthogonal'), hence Bidirectional(GRU(...)) --
fails to BUILD with dtype='float16' on torch 2.13 (NotImplementedError: "geqrf_cpu" not
implemented for 'Half') and on JAX 0.10.2 (NotImplementedError: Unsupported dtype float16),
while TensorFlow 2.21 builds it (its Qr kernel has a half version).  With dtype='bfloat16' all
three fail (TF: "Value for attr 'T' of bfloat16 is not in the list of allowed values").
keras.initializers.Orthogonal runs the QR decomposition in the variable's own dtype instead
of in float32 followed by a cast.  The campaign's "activation='sigmoid'" is incidental.
(dtype='mixed_float16' is unaffected: its variables are float32.)

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python keras_orthogonal_init_low_precision.py; done
    # prints REPRODUCED and exits 1 on a backend where one of them fails to build (torch and JAX in
    # float16; all three in bfloat16)

Found by audee (Bidirectional(GRU(activation='sigmoid')) in float16: build error on torch, jax).
Upstream: known -- keras-team/keras#16970 (Keras 2 era, Orthogonal/Identity with half and
bfloat16, closed); the backend limitation is jax-ml/jax#30176 (lax.linalg.qr has no 16-bit
kernel, open) and pytorch/pytorch#9315.  No Keras 3 report found.
"""
import sys
import keras

failed = []
for dtype in ("float16", "bfloat16"):
    for name, make in [("Orthogonal()((4, 4))", lambda d: keras.initializers.Orthogonal(seed=0)((4, 4), dtype=d)),
                       ("GRU(3).build", lambda d: keras.layers.GRU(3, dtype=d).build((None, 2, 3))),
                       ("Bidirectional(GRU(3)).build", lambda d: keras.layers.Bidirectional(keras.layers.GRU(3, dtype=d), dtype=d).build((None, 2, 3)))]:
        try:
            make(dtype)
            res = "ok"
        except Exception as e:
            res = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:70]}"
            failed.append(f"{dtype} {name}")
        print(f"{keras.backend.backend():10s} {dtype:8s} {name:28s} {res}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: fails to build: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: every one builds in float16 and bfloat16")
