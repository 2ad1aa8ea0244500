"""Keras 3.15.1: TimeDistributed calls its inner layer's `call()` directly, so the inner
layer's input check (its `input_spec`) never runs.  MaxPooling1D wants a 3-D input; called
on a 4-D one, every backend refuses it ("expected ndim=3, found ndim=4").  Wrapped in
TimeDistributed over a 5-D input, which hands it 4-D slices, TensorFlow silently runs a 2-D
pooling (pool_size 2 on (2, 3, 4, 4, 1) gives (2, 3, 2, 2, 1)), while torch and JAX raise
unrelated errors ("pool_size must be a tuple of 2", "could not be broadcast").

    python findings/keras_timedistributed_skips_input_spec.py
    # prints REPRODUCED and exits 1 while the bug is there (runs each Keras backend in a child)

Versions: keras 3.15.1 on tensorflow 2.21.0, torch 2.13.0, jax 0.10.2, CPU.  Not found upstream
(nearest: keras-team/keras#22037, another TimeDistributed check).  A validation gap: the model
is invalid, but TensorFlow computes another operation on it without a word.  Found by audee
(the api-cpu campaign, rng 2818: TimeDistributed(MaxPooling1D) after a Permute, torch and JAX
refusing what TensorFlow runs).
"""
import os
import subprocess
import sys

CHILD = r'''
import numpy as np, keras
x = np.random.RandomState(0).randn(2, 3, 4, 4, 1).astype("float32")
pool = lambda: keras.layers.MaxPooling1D(pool_size=2)
for name, f in [("direct on 4-D", lambda: pool()(x[:, 0])),
                ("TimeDistributed on 5-D", lambda: keras.layers.TimeDistributed(pool())(x))]:
    try:
        y = keras.ops.convert_to_numpy(f())
        print(f"{keras.backend.backend()}: {name}: ran, shape {tuple(y.shape)}")
    except Exception as e:
        print(f"{keras.backend.backend()}: {name}: refused ({type(e).__name__}: {str(e).splitlines()[0][:90]})")
'''
ran = []
for backend in ("tensorflow", "torch", "jax"):
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True).stdout
    print(out, end="")
    direct = next((ln for ln in out.splitlines() if "direct on 4-D" in ln), "")
    wrapped = next((ln for ln in out.splitlines() if "TimeDistributed" in ln), "")
    if "refused" in direct and ": ran" in wrapped:
        ran.append(backend)
if ran:
    print("REPRODUCED: TimeDistributed runs a MaxPooling1D on a 4-D input its own check refuses, on " + ", ".join(ran))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
