"""Keras 3.15.1 on TensorFlow 2.21: Conv{1,2,3}DTranspose(padding='same', output_padding=0)
with an EVEN kernel size fails on TensorFlow, in every mode, while torch and JAX compute it.
Keras computes the 'same' output length with an explicit output_padding as
(in - 1) * stride + kernel % 2 + output_padding (backend/common/backend_utils.py,
_get_output_shape_given_tf_padding) and the TF backend passes that length to
tf.nn.conv_transpose(padding='SAME'), whose contract needs ceil(out / stride) == in, i.e.
(in - 1) * stride < out <= in * stride.  With an even kernel and output_padding 0 the length
is (in - 1) * stride: one input row short, so TF's kernels refuse it --
"Conv2DCustomBackpropInput: Size of out_backprop doesn't match computed" (oneDNN off),
"Conv2DBackpropInput: ..." (XLA), AbortedError "could not create a primitive descriptor for
the convolution forward propagation primitive" (oneDNN, the CPU default, eager and graph).
output_padding=0 is documented as valid ("must be lower than the stride").  JAX and torch
compute exactly the shape Keras declares (compute_output_shape) and agree with a numpy
reference of the transposed convolution cropped like TF's SAME (max |y - ref| ~ 1e-6).
When the declared length is 0 (in == 1, stride 1, even kernel) oneDNN returns the empty
tensor while TF's own kernels and XLA still refuse it -- the campaign's tensorflow-noonednn and
tensorflow-xla "Conv3DBackpropInput ... Size of out_backprop doesn't match computed" reports;
tf2onnx then fails on the same graph ("output dims cannot be smaller than input dims", logged,
leaving a half-converted ConvTranspose that onnxruntime refuses with "Type 'tensor(int32)' of
input parameter ... of operator (ConvTranspose)"), and in the campaign LiteRT refused the
same cases at prepare ("computed_input_height != SizeOfDimension (15 != 16)",
"unused_out_depth != SizeOfDimension (4 != 5)", "Invalid tensor size"; not rerun here).

Upstream: the Keras 2 form was reported as a documentation problem, keras-team/keras#15666
and tensorflow/tensorflow#53107 (closed: "with padding='same' ... output_padding should be set
to stride - 1, or mistakes may occur"); tensorflow#50168 (closed, stalled: output shapes with
output_padding=0 vs None).  The Keras 3 multi-backend inconsistency (TF fails where torch/JAX
run) was not found (queries: "Conv2DTranspose output_padding padding same Size of out_backprop
doesn't match computed", "keras Conv2DTranspose output_padding=0 even kernel_size same padding
error tensorflow backend torch works", "keras 3 Conv3DTranspose padding same output_padding 0
tensorflow InvalidArgumentError jax works").  keras-team/keras#22127 / #22439 (output_padding
>= strides) are another trigger.

    python findings/keras_tf_conv_transpose_same_output_padding.py   # exit 1 and REPRODUCED while the bug is there

(It runs each implementation in its own process: TF eager, tf.function, tf.function with XLA,
tf.function with TF_ENABLE_ONEDNN_OPTS=0, torch, JAX.)
"""
import json
import os
import re
import subprocess
import sys

import numpy as np

CASES = [  # (name, layer rank, layer kwargs, input shape (channels_last, batch 2))
    ("Conv2DTranspose(k=4, s=2, same, output_padding=0) on 4x4", 2, dict(kernel_size=4, strides=2), (2, 4, 4, 3)),
    ("Conv2DTranspose(k=2, s=1, same, output_padding=0) on 4x4", 2, dict(kernel_size=2, strides=1), (2, 4, 4, 3)),
    ("Conv3DTranspose(k=2, s=(3,1,3), same, op=0) on 5x1x4 [campaign; out dim 0]", 3,
     dict(kernel_size=2, strides=(3, 1, 3)), (2, 5, 1, 4, 1)),
    ("control: Conv2DTranspose(k=3, s=2, same, output_padding=0) on 4x4", 2, dict(kernel_size=3, strides=2), (2, 4, 4, 3)),
]
MODES = [("tensorflow", "eager"), ("tensorflow", "tf.function"), ("tensorflow", "XLA"),
         ("tensorflow", "oneDNN off"), ("torch", "eager"), ("jax", "jit")]


def reference(x, k, strides, out_shape):
    """Full transposed convolution (kernel (*k, filters, in_ch)), cropped like TF's SAME:
    the output starts (full - out) // 2 into the full result."""
    sp = x.shape[1:-1]
    full = [(n - 1) * s + kk for n, s, kk in zip(sp, strides, k.shape[:-2])]
    y = np.zeros((x.shape[0], *full, k.shape[-2]))
    for idx in np.ndindex(*sp):
        for kidx in np.ndindex(*k.shape[:-2]):
            pos = tuple(i * s + a for i, s, a in zip(idx, strides, kidx))
            y[(slice(None), *pos)] += x[(slice(None), *idx)] @ k[kidx].T
    start = [(f - o) // 2 for f, o in zip(full, out_shape)]
    return y[(slice(None), *[slice(s0, s0 + o) for s0, o in zip(start, out_shape)])]


def child(mode):
    if mode == "oneDNN off":
        os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    res = []
    for _, rank, kw, shape in CASES:
        layer = getattr(keras.layers, f"Conv{rank}DTranspose")(2, padding="same", output_padding=0, use_bias=False, **kw)
        rng = np.random.default_rng(0)
        x = rng.normal(size=shape).astype("float32")
        layer.build(shape)
        k = rng.normal(size=tuple(layer.kernel.shape)).astype("float32")
        layer.set_weights([k])
        declared = list(layer.compute_output_shape(shape))
        try:
            if keras.backend.backend() == "tensorflow" and mode != "eager":
                import tensorflow as tf
                y = tf.function(lambda t: layer(t), jit_compile=(mode == "XLA"))(x)
            elif keras.backend.backend() == "jax":
                import jax
                y = jax.jit(lambda t: layer(t))(x)
            else:
                y = layer(x)
            y = np.asarray(keras.ops.convert_to_numpy(y), np.float64)
            strides = kw["strides"] if isinstance(kw["strides"], tuple) else (kw["strides"],) * rank
            ref = reference(x.astype(np.float64), k.astype(np.float64), strides, declared[1:-1])
            err = float(np.abs(y - ref).max()) if y.size else 0.0
            res.append({"declared": declared, "shape": list(y.shape), "err": err})
        except Exception as e:  # noqa: BLE001 -- the error is the result
            msg = " ".join(str(e).split())
            m = re.search(r"\w+: Size of out_backprop doesn't match computed: actual = \d+, computed = \d+", msg)
            if m:
                msg = m.group(0)
            elif "could not create a primitive descriptor" in msg:
                msg = msg[msg.index("could not create"):][:90]
            res.append({"declared": declared, "error": f"{type(e).__name__}: {msg[:110]}"})
    print("JSON" + json.dumps(res))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        child(sys.argv[1])
        sys.exit(0)
    results = {}
    for backend, mode in MODES:
        env = dict(os.environ, KERAS_BACKEND=backend)
        p = subprocess.run([sys.executable, os.path.abspath(__file__), mode], env=env, capture_output=True, text=True)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("JSON")]
        results[f"{backend} {mode}"] = json.loads(line[0][4:]) if line else [{"error": f"died ({p.returncode})"}] * len(CASES)
    bad = False
    for i, (name, *_rest) in enumerate(CASES):
        print(name, "-- Keras declares", next((r[i]["declared"] for r in results.values() if "declared" in r[i]), "?"))
        for impl, rs in results.items():
            r = rs[i]
            if "error" in r:
                print(f"    {impl:24s} {r['error']}")
                bad |= not name.startswith("control") and impl.startswith("tensorflow")
            else:
                print(f"    {impl:24s} shape {tuple(r['shape'])}, max |y - ref| = {r['err']:.2g}")
    if bad:
        print("REPRODUCED: TensorFlow refuses a Conv*DTranspose(padding='same', output_padding=0) that torch and JAX compute")
        sys.exit(1)
    print("NOT REPRODUCED: TensorFlow computes every case")
