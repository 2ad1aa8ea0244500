"""Keras 3.15.1 on TensorFlow 2.21: binary_crossentropy on the output of a softmax (e.g. the
last Dense(activation="softmax") of a model) is computed as sigmoid cross-entropy *of the
softmax's logits*, i.e. as if the layer had been a sigmoid -- a different loss from the one
asked for.  The TF backend's softmax() and sigmoid() both stamp `output._keras_logits = x`, and
_get_logits (keras/src/backend/tensorflow/nn.py) takes those logits whenever the attribute is
there, without checking which activation produced them (the graph-op fallback beside it does
check op.type == "Sigmoid"/"Softmax").  The reverse holds too: categorical_crossentropy on a
sigmoid output becomes softmax cross-entropy of the sigmoid's logits.  torch and JAX compute the
documented loss on the probabilities.  Control: categorical_crossentropy on a softmax output is
the intended shortcut (same loss, only TF is unclipped where torch/JAX clip at 1e-7).

    python findings/keras_tf_crossentropy_wrong_keras_logits.py   # exit 1 and REPRODUCED while the bug is there

(model.evaluate on each of tensorflow, torch, jax in a subprocess).  Found by audee's train
phase (`audee fuzz --phase train`, softmax-headed models trained with binary_crossentropy).
"""
import json
import os
import subprocess
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
X = np.array([[1.0, -0.5], [0.3, 2.0]], "float32")
K = np.array([[1.5, -1.0, 0.2], [0.4, 0.9, -1.3]], "float32")
Y = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]], "float32")
CASES = [("softmax", "binary_crossentropy"), ("sigmoid", "categorical_crossentropy"),
         ("softmax", "categorical_crossentropy")]  # the last one: intended shortcut, control

CHILD = r"""
import json, numpy as np, keras
x, k, y = (np.array(a, "float32") for a in %r); out = {}
for act, loss in %r:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3, activation=act,
        kernel_initializer=keras.initializers.Constant(k), bias_initializer="zeros")])
    model.compile(loss=loss)
    out[act + "+" + loss] = [float(model.evaluate(x, y, verbose=0)),  # graph (model.fit path)
        float(keras.ops.mean(getattr(keras.losses, loss)(y, getattr(keras.activations, act)(x @ k))))]  # eager
print("JSON" + json.dumps(out))
""" % ([X.tolist(), K.tolist(), Y.tolist()], CASES)


def reference(act, loss, z):
    eps = 1e-7
    p = np.exp(z) / np.exp(z).sum(-1, keepdims=True) if act == "softmax" else 1 / (1 + np.exp(-z))
    if loss == "binary_crossentropy":
        p = np.clip(p, eps, 1 - eps)
        return float(np.mean(-(Y * np.log(p) + (1 - Y) * np.log(1 - p))))
    p = np.clip(p / p.sum(-1, keepdims=True), eps, 1 - eps)
    return float(np.mean(-(Y * np.log(p)).sum(-1)))


def from_logits(act, loss, z):
    """What TF computes: the other activation's cross-entropy on the logits z."""
    if loss == "binary_crossentropy":  # sigmoid_cross_entropy_with_logits
        return float(np.mean(np.maximum(z, 0) - z * Y + np.log1p(np.exp(-np.abs(z)))))
    ls = z - np.log(np.exp(z).sum(-1, keepdims=True))
    return float(np.mean(-(Y * ls).sum(-1)))


if __name__ == "__main__":
    from importlib.metadata import version
    print("keras", version("keras"))
    z = X.astype("float64") @ K
    bad = []
    for b in ["tensorflow", "torch", "jax"]:
        env = dict(os.environ, KERAS_BACKEND=b, TF_CPP_MIN_LOG_LEVEL="3")
        p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env)
        line = [l for l in p.stdout.splitlines() if l.startswith("JSON")]
        if not line:
            print(f"{b:10s} failed: {p.stderr.strip().splitlines()[-1:]}")
            continue
        res = json.loads(line[0][4:])
        for act, loss in CASES:
            ref, alt = reference(act, loss, z), from_logits(act, loss, z)
            fit, eager = res[act + "+" + loss]
            print(f"{b:10s} {act:7s} + {loss:24s} evaluate {fit:.6f}  eager {eager:.6f}  "
                  f"reference {ref:.6f}  (cross-entropy of the logits: {alt:.6f})")
            if max(abs(fit - ref), abs(eager - ref)) > 1e-4:
                bad.append(f"{b} {act}+{loss}")
    if bad:
        print("REPRODUCED: loss differs from the reference:", ", ".join(bad))
        sys.exit(1)
    print("NOT REPRODUCED: all backends match the reference")
