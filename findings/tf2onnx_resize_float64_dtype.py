"""tf2onnx 1.17 (TensorFlow 2.21, onnx 1.23, onnxruntime 1.31, opset 15): TensorFlow's
ResizeBilinear, ResizeBicubic and ResizeArea always return float32 (tf.raw_ops docs: "output:
A Tensor of type float32"), and tf.image.resize casts back to the input's dtype after them.
tf2onnx converts each into an ONNX Resize, which keeps its input's type, but leaves the
float32 type TensorFlow declared on the output: on a float64 input the graph says float32
where Resize makes float64, and the ONNX checker and onnxruntime refuse the model ("Inferred
elem type differs from existing elem type: (11) vs (1)"; in Keras' UpSampling2D bilinear or
bicubic under a float64 policy: "Type parameter (T) of Optype (Min) bound to different
types (tensor(double) and tensor(float))" at the clip that follows).  Nearest-neighbour
resizing, whose TF op keeps the input's dtype, converts into a valid graph (which
onnxruntime then cannot run: it has no float64 Resize kernel, an explicit limitation, not
this bug).

    python tf2onnx_resize_float64_dtype.py      # prints REPRODUCED and exits 1 while the bug is there

Found by audee's equivalence oracle (rule float64: the whole model under a float64 dtype
policy; Keras UpSampling2D(interpolation='bilinear'/'bicubic') on onnxruntime).  Upstream:
not found (queries: "tf2onnx ResizeBilinear float64 double input Resize type inference error
elem type", "tensorflow-onnx resize float64 UpSampling2D double invalid model"); related:
onnx/tensorflow-onnx#2191 (closed), the same converter's ResizeBilinear on an int64 input.
"""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import logging
import sys
import numpy as np
import onnx
import onnxruntime as ort
import tensorflow as tf
import tf2onnx
logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)

x = np.random.default_rng(0).normal(size=(1, 3, 4, 2))
bad = 0
for method in ("nearest", "bilinear", "bicubic", "area"):
    for dtype in (tf.float32, tf.float64):
        fn = tf.function(lambda t, m=method: tf.image.resize(t, [6, 8], method=m))
        sig = [tf.TensorSpec([None, 3, 4, 2], dtype, name="x")]
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)
        want = fn(tf.constant(x, dtype)).numpy()
        try:
            onnx.checker.check_model(proto, full_check=True)
            sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
            got = sess.run(None, {"x": x.astype(dtype.as_numpy_dtype)})[0]
            res = f"ok, max |onnx - tf| = {np.abs(got - want).max():.3g}"
        except Exception as e:  # the checker or onnxruntime refuses the converted graph
            res = f"REFUSED: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
            bad += dtype == tf.float64 and method != "nearest"
        print(f"tf.image.resize({method:8s}) {dtype.name}: {res}")
print("REPRODUCED" if bad else "NOT REPRODUCED")
sys.exit(1 if bad else 0)
