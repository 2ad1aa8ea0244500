"""tf2onnx 1.17 (TensorFlow 2.21, Keras 3.15.1, onnxruntime 1.31, opset 15): four Keras layers
convert to graphs onnxruntime refuses, because a TensorFlow op is left as is or is mapped
without a dtype check:
  * Discretization -> TF Bucketize, which has no ONNX mapping ("No Op registered for Bucketize");
  * Activation('celu') -> TF Expm1 (Keras' TF celu uses tf.math.expm1), same ("... Expm1");
  * Resizing with antialias=True that shrinks an image -> TF ScaleAndTranslate (tf.image.resize's
    antialiased kernel), no ONNX mapping either ("... ScaleAndTranslate");
  * Softmax(axis=(1, 2)) in float16 (a multi-axis softmax is exp(x - logsumexp(x)); TF's
    reduce_logsumexp uses IsInf) -> ONNX IsInf on float16, valid only from opset 20 (which
    tf2onnx 1.17 cannot target): "Type 'tensor(float16)' ... of operator (IsInf) ... is invalid".
    A single-axis float16 Softmax converts (one ONNX Softmax node) and runs.
TensorFlow itself runs all four.

    python tf2onnx_unconverted_ops.py   # prints REPRODUCED and exits 1 while the gaps are there
    # (onnxruntime refuses, or computes otherwise than TensorFlow, one of the first four layers;
    # the single-axis float16 Softmax is the control)

Found by audee (onnxruntime divergent acceptance).  Upstream: Bucketize is a known gap
(onnx/tensorflow-onnx#1158: "all ops are now implemented except for Bucketize and SparseCross";
microsoft/onnxruntime#8297 asks for a Bucketize op, open); Expm1 and float16 IsInf: not found;
ScaleAndTranslate (found by the api-cpu campaign's rng 3013): not found (query: "tf2onnx
ScaleAndTranslate not supported resize lanczos"); tf2onnx 1.17's sources have no handler for it.
"""
import os
os.environ.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
import logging
import re
import sys
import numpy as np
import tensorflow as tf, tf2onnx, onnxruntime as ort, keras
logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)

x = np.array([[[-0.5, 0.5], [2.0, 1.0]]])
failed = []
for name, layer, dt in [("Discretization([0, 1])", keras.layers.Discretization(bin_boundaries=[0.0, 1.0]), "float32"),
                        ("Activation('celu')", keras.layers.Activation("celu"), "float32"),
                        ("Resizing(1, 1, antialias=True)", keras.layers.Resizing(1, 1, antialias=True), "float32"),
                        ("Softmax(axis=(1, 2)) float16", keras.layers.Softmax(axis=(1, 2), dtype="float16"), "float16"),
                        ("Softmax(axis=-1) float16", keras.layers.Softmax(axis=-1, dtype="float16"), "float16")]:
    xi = x.astype(dt)
    want = keras.ops.convert_to_numpy(layer(xi))
    print(f"{name}: TensorFlow returns {want.ravel().tolist()}")
    control = name == "Softmax(axis=-1) float16"
    fn = tf.function(lambda t: layer(t))
    proto, _ = tf2onnx.convert.from_function(fn, input_signature=[tf.TensorSpec((None, 2, 2), dt, name="x")], opset=15)
    try:
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        y = sess.run(None, {'x': xi})[0]
        ok = y.shape == want.shape and np.allclose(y.astype("float32"), want.astype("float32"),
                                                   atol=1e-2 if dt == "float16" else 1e-5)
        print(f"    onnxruntime returns {y.ravel().tolist()}{'' if ok else '  WRONG'}")
        what = "computes otherwise"
    except Exception as e:
        m = re.search(r"No Op registered for \w+|Type '[^']+' of input parameter \(.*?\) of operator \(\w+\)", str(e))
        what = f"{type(e).__name__}: {m.group(0) if m else str(e)[:150]}"
        print(f"    onnxruntime: {what}")
        ok = False
    if not ok and not control:
        failed.append(f"{name} ({what})")
if failed:
    print("REPRODUCED: onnxruntime cannot run what tf2onnx made of " + "; ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED: onnxruntime runs all four converted layers as TensorFlow computes them")
