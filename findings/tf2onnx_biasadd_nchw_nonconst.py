"""tf2onnx 1.17 (TensorFlow 2.21, onnxruntime 1.31, opset 15): tf.nn.bias_add(x, b,
data_format='NCHW') -- what Keras' TF backend emits for a channels_first Conv*/Conv*Transpose
with use_bias=True -- becomes an ONNX Add whose bias broadcasts along the LAST axis whenever b
is not a Const (tf2onnx/onnx_opset/nn.py BiasAdd.version_7 reshapes b to (C, 1, ...) only
`if node.inputs[1].type == 'Const'`).  With weights fed as graph inputs (audee's bridge: a
tf.function taking the weights, converted with from_function) the graph then fails in
onnxruntime ("Incompatible dimensions" at load, or "BroadcastIterator::Init ... axis == 1 ||
axis == largest was false" at run when shapes are dynamic), or -- when C equals the last
dimension -- silently adds the bias to the wrong axis.  With a constant bias (from_keras on a
built model) the conversion is right, which is why the campaign's own repro script, converting
with from_keras, does not reproduce the campaign's Conv1DTranspose failure.

    python tf2onnx_biasadd_nchw_nonconst.py   # prints REPRODUCED and exits 1 while the bug is there
    # (a converted bias_add refused by onnxruntime, or more than 1e-5 off x + b[:, None])

Found by audee (Conv1DTranspose(data_format='channels_first', use_bias=True), onnxruntime run
error).  Upstream: not found; the Const-only NCHW handling dates from onnx/tensorflow-onnx#121.
"""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import logging
import sys
import numpy as np
import tensorflow as tf, tf2onnx, onnxruntime as ort
logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)

failed = []
for shape in [(2, 3, 4), (2, 3, 3)]:  # (N, C, L); the second has C == L
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    b = np.arange(1, 4, dtype="float32")
    ref = x + b[None, :, None]
    for bias_is_input in (False, True):
        fn = (tf.function(lambda t, bias: tf.nn.bias_add(t, bias, data_format="NCHW")) if bias_is_input
              else tf.function(lambda t: tf.nn.bias_add(t, tf.constant(b), data_format="NCHW")))
        sig = [tf.TensorSpec((None, *shape[1:]), "float32", name="x")] + [tf.TensorSpec((3,), "float32", name="b")] * bias_is_input
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)
        feed = {"x": x, **({"b": b} if bias_is_input else {})}
        try:
            y = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)[0]
            err = np.abs(y - ref).max()
            res = f"max |onnx - (x + b[:, None])| = {err:.3g}"
            ok = bool(err <= 1e-5)
        except Exception as e:
            res = f"{type(e).__name__}: {str(e).split(' : ')[-1][:90]}"
            ok = False
        what = f"x{shape} bias {'graph input' if bias_is_input else 'constant   '}"
        print(f"{what}: {res}")
        if not ok:
            failed.append(f"{' '.join(what.split())}: {res}")
if failed:
    print("REPRODUCED: " + "; ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED: every converted NCHW bias_add equals x + b[:, None]")
