"""tf2onnx 1.17 converts TensorFlow's Atan2 (ONNX has no Atan2 op) as
`Atan(y / (x + 1 - sign(x)**2))` plus a pi correction by the signs (tf2onnx's `Atan2Op`,
`onnx_opset/math.py`).  For two infinite arguments that divides inf by inf: every (+-inf,
+-inf) pair gives NaN on onnxruntime where TensorFlow, NumPy, torch and JAX give +-pi/4 or
+-3pi/4 (IEEE 754 / C99 atan2).  The rewrite also loses signed zeros on finite inputs:
atan2(0, -0) is 0 instead of pi, atan2(-0, -1) is +pi instead of -pi.

Keras' STFTSpectrogram(mode="angle") computes arctan2(imag, real): one +inf sample in a
frame makes every frequency bin NaN on the converted graph (TensorFlow: only bin 0, whose
imaginary kernel is exactly 0, is NaN, 0 * inf, on every backend).

    python findings/tf2onnx_atan2_inf.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: tensorflow 2.21.0, tf2onnx 1.17.0, onnxruntime 1.31.1, CPU.  Not found upstream
(tf2onnx's stored source at d8b1009 has the same rewrite; related only: pytorch/pytorch#162570,
torch's ONNX exporter's atan2 at (0, 0), and microsoft/onnxruntime#19003).  Found by audee
(the api-cpu campaign, rng 2816: STFTSpectrogram mode "angle" with an inf, onnxruntime odd).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

y = np.array([np.inf, np.inf, -np.inf, -np.inf, 0.0, -0.0, 1.0], np.float32)
x = np.array([np.inf, -np.inf, np.inf, -np.inf, -0.0, -1.0, 2.0], np.float32)
spec = [tf.TensorSpec([None], tf.float32, name="y"), tf.TensorSpec([None], tf.float32, name="x")]
f = tf.function(lambda a, b: tf.identity(tf.math.atan2(a, b), name="out"), input_signature=spec)
proto, _ = tf2onnx.convert.from_function(f, input_signature=spec, opset=15)
session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
want = np.arctan2(y, x)
tf_got = f(y, x).numpy()
ort_got = session.run(None, {"y": y, "x": x})[0]
print("tensorflow", tf.__version__, "tf2onnx", tf2onnx.__version__, "onnxruntime", ort.__version__)
print("y          ", y)
print("x          ", x)
print("numpy      ", want)
print("tensorflow ", tf_got)
print("onnxruntime", ort_got)
assert np.allclose(tf_got, want, equal_nan=True), "TensorFlow itself differs from numpy"
bad = ~np.isclose(ort_got, want, atol=1e-6) | np.isnan(ort_got)
if bad.any():
    pairs = ", ".join(f"atan2({a:g}, {b:g}) = {g:g} (want {w:g})"
                      for a, b, g, w in zip(y[bad], x[bad], ort_got[bad], want[bad]))
    print(f"REPRODUCED: tf2onnx's Atan2 rewrite is wrong on onnxruntime: {pairs}")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
