"""tf2onnx 1.17: an L2 normalization, ``c * rsqrt(sum(square(c), -1))``, of an NHWC Conv2D output with a size-1
spatial dimension (H == 1) is converted to a graph that onnx.checker and onnxruntime refuse:
"(op_type:Mul, node name: .../mul): [ShapeInferenceError] Incompatible dimensions".  TensorFlow runs it; H == 2
converts and matches.

Mechanism: ``tf.square`` becomes ``Mul(t, t)``, where t is the Transpose(NCHW -> NHWC) after the ONNX Conv.
TransposeOptimizer._mul_handler has a branch for a Mul whose two inputs are the same transposed tensor ("Mul as
Square", onnx/tensorflow-onnx#1339).  It moves the Transpose below the Mul by rewiring the inputs but, unlike
_switch_transpose_and_node, does not update the recorded shapes: the Mul's output keeps the NHWC shape
(-1, 1, 5, 16) while it now holds NCHW (-1, 16, 1, 5).  post_optimize_action then sees a size-1 dimension in that
stale shape and replaces the moved Transpose by a Reshape to [-1, 5, 16, 1], where a real transpose is needed.
The ReduceSum after it gives (N, 1, 16, 1), and the last Mul against the (N, 1, 5, 16) conv output is refused.
Setting the two shapes in that branch (the Mul's output to the Transpose's input shape, the Transpose's output to
the Mul's old shape) makes the graph valid and equal to TensorFlow.

    python findings/tf2onnx_transpose_square_stale_shape.py
    # prints REPRODUCED and exits 1 while the bug is there (TensorFlow + tf2onnx + onnx + onnxruntime, no Keras)

Versions: tensorflow 2.21, tf2onnx 1.17, onnx (the one tf2onnx 1.17 installs with), onnxruntime 1.31.  Upstream: no
exact report (queries: "transpose optimizer Mul same input square shape Incompatible dimensions reshape", "tf2onnx l2
normalize conv2d ShapeInferenceError Incompatible dimensions Mul", "tf2onnx transpose optimizer
post_optimize_action Reshape wrong shape size 1 dimension Mul square").  Same kind as onnx/tensorflow-onnx#226 (2018,
closed: a Transpose moved without back-transposing the node's shape, so post_optimize_action's Reshape is wrong;
fixed then in _switch_transpose_and_node by #227).  The same-input branch came with #1339 (2021) and is unchanged on
tensorflow-onnx's main (read at 6537fcb, July 2026: no set_shape in it).  Related: the open #1729 (a maintainer: "most
likely an incorrect shape exists in the graph", as the triage read it; not re-read here).
Found by audee: the api-cpu campaign, rng 2873 (api-UnitNormalization-v00001, the first case of its root:
UnitNormalization(axis [1, -1]) after a Conv2D(16, 1) on a (1, 5, 3) input).
"""
import sys
import numpy as np
import tensorflow as tf
import tf2onnx
import onnx
import onnxruntime as ort

W = np.random.RandomState(0).rand(1, 1, 3, 16).astype(np.float32)   # a 1x1 conv, 3 -> 16 channels, no bias


def f(x):
    c = tf.nn.conv2d(x, tf.constant(W), 1, "VALID")                  # NHWC (N, 1, 5, 16)
    return tf.identity(c * tf.math.rsqrt(tf.reduce_sum(tf.square(c), axis=[-1], keepdims=True)), name="y")


sig = [tf.TensorSpec((None, 1, 5, 3), tf.float32, name="x")]          # H == 1
fn = tf.function(f, input_signature=sig, autograph=False)
proto, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)
print("ONNX nodes:", [n.op_type for n in proto.graph.node])
x = np.random.RandomState(1).rand(2, 1, 5, 3).astype(np.float32)
want = fn(tf.constant(x)).numpy()
print("TensorFlow output shape:", want.shape)
try:
    onnx.checker.check_model(proto, full_check=True)
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
except Exception as exc:
    print("refused:", str(exc)[:400])
    print("REPRODUCED: the tf2onnx graph is refused where TensorFlow computes", want.shape)
    sys.exit(1)
ok = got.shape == want.shape and np.allclose(got, want, rtol=1e-5, atol=1e-6)
print("onnxruntime output shape:", got.shape, "max |ort - tf|:", float(np.abs(got - want).max()) if got.shape == want.shape else "-")
print("NOT REPRODUCED" if ok else "REPRODUCED: values or shape differ from TensorFlow")
sys.exit(0 if ok else 1)
