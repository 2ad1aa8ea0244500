"""tf2onnx 1.17 (TensorFlow 2.21, Keras 3.15, onnxruntime 1.31, opset 15): a Keras
Conv2DTranspose / Conv3DTranspose with padding='valid' and a non-zero output_padding -- a
valid configuration (each output_padding below its stride), which TensorFlow, PyTorch and JAX
compute -- converts to an ONNX ConvTranspose whose `pads` are negative: tf2onnx turns
Conv2DBackpropInput's explicit output shape into pads (total_padding = stride * (in - 1) +
kernel - out, negative when the output is larger than the 'valid' size) instead of using
ConvTranspose's `output_padding` attribute, and onnxruntime refuses the graph at load
("[ShapeInferenceError] Attribute pads must not contain negative values").

    python tf2onnx_convtranspose_output_padding.py   # prints REPRODUCED and exits 1 while the bug is there
    # (onnxruntime refuses a converted layer, or its output is more than 1e-4 off Keras')

Found by audee (api-cpu campaign, rng 2: api-Conv2DTranspose-v00000, api-Conv3DTranspose-v00001;
one root cause, classed bug).  Upstream: not found (queries: "tf2onnx ConvTranspose Attribute
pads must not contain negative values output_padding", "tensorflow-onnx conv2d_transpose
output_padding negative pads"); tensorflow-onnx#1501 (closed) is about choosing pads over
output_shape, not this.
"""
import os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["KERAS_BACKEND"] = "tensorflow"
import logging
import sys
import numpy as np
import keras, tensorflow as tf, tf2onnx, onnxruntime as ort
logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)

failed = []
for rank, (k, s, op) in {2: (5, 3, (0, 1)), 3: (4, 2, (1, 1, 0))}.items():
    layer = getattr(keras.layers, f"Conv{rank}DTranspose")(2, k, strides=s, padding="valid", output_padding=op)
    shape = (4,) * rank + (3,)
    x = np.random.default_rng(0).normal(size=(2, *shape)).astype("float32")
    inp = keras.Input(shape)
    model = keras.Model(inp, layer(inp))
    ref = model.predict(x, verbose=0)
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=[tf.TensorSpec((None, *shape), "float32", name="x")],
                                          opset=15)
    try:
        y = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        ok = y.shape == ref.shape and bool(np.abs(y - ref).max() <= 1e-4)
        res = f"max |onnx - keras| = {np.abs(y - ref).max():.3g}" if y.shape == ref.shape else f"shape {y.shape}"
    except Exception as e:
        res = f"{type(e).__name__}: {str(e).split(' : ')[-1][:120]}"
        ok = False
    print(f"Conv{rank}DTranspose(kernel {k}, strides {s}, valid, output_padding {op}): keras {ref.shape}; onnxruntime: {res}")
    if not ok:
        failed.append(f"Conv{rank}DTranspose: {res}")
if failed:
    print("REPRODUCED: " + "; ".join(failed))
    sys.exit(1)
print("NOT REPRODUCED: onnxruntime computes both converted layers as Keras does")
