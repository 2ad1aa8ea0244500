"""Keras TensorFlow backend: keras.ops.add(x1, x2) rewrites the add into tf.nn.bias_add when x2
'looks like a bias'. The test keeps only dims that are None or > 1, so a 0-sized batch dim is
treated as squeezable: x2 of shape (0,5,1) -> 'bias' of (0,5) -> BiasAdd fails
('Biases must be 1D: [0,5]'). Hits Average, LSTM/GRU cells (Bidirectional(LSTM)), any ops.add
of two same-shaped tensors with a batch of 0 rows. (Not grappler: fails in eager too.)"""
import argparse, os, re, sys
ap = argparse.ArgumentParser(); ap.add_argument("--backend", default="tensorflow")
os.environ["KERAS_BACKEND"] = ap.parse_args().backend
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras
from keras import ops

bad = 0
def check(name, fn, want):
    global bad
    try:
        got = tuple(ops.shape(fn()))
    except Exception as e:
        msg = re.sub(r"\{\{function_node [^}]*\}\}|Exception encountered when calling \S+|\x1b\[\d+m", "", str(e))
        got = f"{type(e).__name__}: {' '.join(msg.split())[:60]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {name:40s} got {got} want {want}")

a = np.zeros((0, 5, 1), "float32"); b = np.zeros((0, 12), "float32")
check("ops.add((0,5,1), (0,5,1))", lambda: ops.add(a, a), np.add(a, a).shape)
check("ops.add((0,12), (0,12))", lambda: ops.add(b, b), np.add(b, b).shape)
check("ops.add((2,5,1), (2,5,1)) [control]", lambda: ops.add(np.ones((2, 5, 1), "float32"), np.ones((2, 5, 1), "float32")), (2, 5, 1))
check("layers.Average()([(0,5,1)]*2)", lambda: keras.layers.Average()([a, a]), (0, 5, 1))
check("layers.LSTM(3) on (0,5,1)", lambda: keras.layers.LSTM(3)(a), (0, 3))
print("backend:", keras.backend.backend(), "keras", keras.__version__)
if bad:
    print(f"REPRODUCED {bad} check(s) fail on a batch of 0 rows"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
