"""tf2onnx 1.17: a resize to a size the input does not divide (tf.image.resize, Keras Resizing) is converted
to an ONNX Resize with float32 ``scales`` (7 / 3 -> 2.3333333) instead of the ``sizes`` TensorFlow knows.
ONNX shape inference computes floor(3 * 2.3333333) in double, 6 rows; onnxruntime computes 7.  With one channel,
tf2onnx's transpose optimizer replaces the NCHW -> NHWC Transpose after the Resize by a Reshape that bakes in the
inferred [-1, 6, 3, 1], so onnxruntime fails at run where TensorFlow computes (N, 7, 3, 1).  With more channels the
Transpose stays and this size runs; other sizes (7 -> 31) give onnxruntime a silently shorter output.

    python findings/tf2onnx_resize_scales_reshape.py
    # prints REPRODUCED and exits 1 while the bug is there (TensorFlow + tf2onnx + onnxruntime, no Keras)

Versions: tensorflow 2.21, tf2onnx 1.17, onnxruntime 1.31.  Not found upstream (queries: "tf2onnx resize scales
float rounding output size off by one reshape onnxruntime nearest"); related, not the same: onnx/onnx#4919 (open:
floor vs round of scale * size in float vs double), microsoft/onnxruntime#25417, tensorflow-onnx#874 (2020, sizes
for a resize; 1.17 converts TensorFlow's resize with scales again).  Found by audee: the api-cpu campaign, rng 2853
(api-Resizing-v00004: Resizing(7, 3, nearest) of a (3, 3, 1) image, onnxruntime refusing at a Reshape).
"""
import sys
import numpy as np
import tensorflow as tf
import tf2onnx
import onnxruntime as ort

def f(x):
    return tf.identity(tf.image.resize(x, (7, 3), method="nearest"))

sig = [tf.TensorSpec((None, 3, 3, 1), tf.float32, name="x")]
proto, _ = tf2onnx.convert.from_function(tf.function(f, input_signature=sig, autograph=False),
                                         input_signature=sig, opset=15)
x = np.random.default_rng(0).random((2, 3, 3, 1), dtype=np.float32)
want = f(tf.constant(x)).numpy()
print("TensorFlow output shape:", want.shape)
try:
    got = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
except Exception as exc:
    print("onnxruntime error:", str(exc)[:400])
    print("REPRODUCED: the tf2onnx graph fails at run where TensorFlow computes", want.shape)
    sys.exit(1)
ok = got.shape == want.shape and np.array_equal(got, want)
print("onnxruntime output shape:", got.shape)
print("NOT REPRODUCED" if ok else "REPRODUCED: values or shape differ")
sys.exit(0 if ok else 1)
