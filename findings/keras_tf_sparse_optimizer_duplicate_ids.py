"""Keras 3.15.1 on TensorFlow 2.21: Adam / RMSprop / Adagrad applied to an Embedding's sparse
gradient (tf.IndexedSlices, what tf.gather's gradient is) with a repeated id square each
slice *before* the duplicates are summed, so the second-moment accumulator gets
sum(g_i ** 2) instead of (sum g_i) ** 2.  Keras' optimizers call ops.square(gradient); the TF
backend's square is wrapped by sparse.elementwise_unary, which squares x.values and keeps the
duplicate indices; assign_add / ops.add then sum them (scatter_add / densify).  With an id
seen twice in a batch the row moves sqrt(2) times too far at step 1 (Adam, RMSprop).  torch
and JAX have dense gradients and match the numpy reference; SGD (no square) is right on TF.
Keras 2 (optimizer_v2) summed duplicate indices first (_deduplicate_indexed_slices).

    python findings/keras_tf_sparse_optimizer_duplicate_ids.py   # exit 1 and REPRODUCED while the bug is there

(runs model.fit on each of tensorflow, torch, jax in a subprocess).  Found by audee's train
phase (`audee fuzz --phase train`, Embedding models with Adam / RMSprop).
"""
import json
import os
import subprocess
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
TABLE = np.array([[1.0, -2.0], [0.5, 3.0], [-1.0, 1.0]], "float32")  # input_dim 3, dim 2
IDS = np.array([[0, 0, 1]], "int32")  # id 0 twice, id 2 unused
LR = 0.1
OPTS = ["SGD", "Adam", "RMSprop", "Adagrad"]

CHILD = r"""
import json, numpy as np, keras
table = np.array(%r, "float32"); ids = np.array(%r, "int32"); out = {}
for name in %r:
    keras.utils.set_random_seed(0)
    emb = keras.layers.Embedding(3, 2, embeddings_initializer=keras.initializers.Constant(table))
    model = keras.Sequential([keras.Input((3,), dtype="int32"), emb])
    model.compile(optimizer=getattr(keras.optimizers, name)(learning_rate=%r), loss="mse")
    model.fit(ids, np.zeros((1, 3, 2), "float32"), batch_size=1, epochs=1, shuffle=False, verbose=0)
    out[name] = keras.ops.convert_to_numpy(emb.embeddings).tolist()
print("JSON" + json.dumps(out))
""" % (TABLE.tolist(), IDS.tolist(), OPTS, LR)


def reference(name):
    """One step with the dense gradient of mse = mean(e ** 2) over the 6 looked-up values."""
    g = np.zeros_like(TABLE, dtype="float64")
    for i in IDS.ravel():
        g[i] += 2 * TABLE[i] / IDS.size / 2  # d/dE of mean over (1, 3, 2) elements
    w = TABLE.astype("float64")
    if name == "SGD":
        return w - LR * g
    if name == "Adam":  # beta_1 0.9, beta_2 0.999, epsilon 1e-7, step 1
        m, v = 0.1 * g, 0.001 * g * g
        alpha = LR * np.sqrt(1 - 0.999) / (1 - 0.9)
        return w - m * alpha / (np.sqrt(v) + 1e-7)
    if name == "RMSprop":  # rho 0.9, epsilon 1e-7
        v = 0.1 * g * g
        return w - LR * g / np.sqrt(v + 1e-7)
    if name == "Adagrad":  # initial_accumulator_value 0.1, epsilon 1e-7
        acc = 0.1 + g * g
        return w - LR * g / np.sqrt(acc + 1e-7)


if __name__ == "__main__":
    from importlib.metadata import version
    print("keras", version("keras"), "| ids", IDS.tolist(), "| lr", LR)
    bad = []
    for b in ["tensorflow", "torch", "jax"]:
        env = dict(os.environ, KERAS_BACKEND=b, TF_CPP_MIN_LOG_LEVEL="3")
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env)
        line = [l for l in p.stdout.splitlines() if l.startswith("JSON")]
        if not line:
            print(f"{b:10s} failed: {p.stderr.strip().splitlines()[-1:]}")
            continue
        res = json.loads(line[0][4:])
        for name in OPTS:
            ref = reference(name)
            got = np.array(res[name])
            err = np.abs(got - ref).max()
            # how far row 0 (the repeated id) moved, relative to the reference step
            ratio = np.abs(got[0] - TABLE[0]).max() / np.abs(ref[0] - TABLE[0]).max()
            print(f"{b:10s} {name:8s} row 0 -> {np.round(got[0], 5).tolist()!s:22s} "
                  f"ref {np.round(ref[0], 5).tolist()!s:22s} max|w - ref| {err:.2e}  step ratio {ratio:.4f}")
            if err > 1e-5:
                bad.append(f"{b} {name}")
    if bad:
        print("REPRODUCED: updates differ from the dense reference:", ", ".join(bad))
        sys.exit(1)
    print("NOT REPRODUCED: all backends match the reference")
