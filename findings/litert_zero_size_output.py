"""LiteRT (ai-edge-litert 2.3.0; TFLite converter of TensorFlow 2.21): a model whose output is a
zero-size tensor converts, allocates and invokes, but reading the output from Python raises
"ValueError: Invalid tensor size." -- through Interpreter.get_tensor and through the signature
runner alike -- where TensorFlow returns an empty array.  The interpreter reports the right
shape (get_output_details()[0]['shape'] == [1, 0, 3]); only the Python read-out refuses an
empty buffer.

audee reached it as divergent_acceptance-litert-Conv3DTranspose-b752c27e:
Conv3DTranspose(kernel_size=2, strides=(3, 1, 3), padding='same', output_padding=0) on a
(5, 1, 4) volume, whose Keras output shape is (12, 0, 9) -- Keras' "same" + output_padding
formula (in - 1) * stride + kernel % 2 + output_padding gives 0 for a size-1 axis with an even
kernel and stride 1.  TensorFlow (oneDNN) returns the empty tensor; LiteRT raises this error.
(The same case is also rejected by TensorFlow without oneDNN and under XLA, whose SAME padding
cannot produce depth 12 from 5 -- the Keras root cause, reported with the TensorFlow and tf2onnx
findings of that case.)  Known: tensorflow/tensorflow#57084 ("ValueError: Invalid tensor size"
when output is a zero-size tensor; closed as stale, unfixed), also #48786; the open
google-ai-edge/LiteRT#122 is another zero-size-tensor failure.

    python findings/litert_zero_size_output.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter


def convert(fn):
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], tf.Module())
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    return conv.convert()


def read_out(flat, x):
    """(get_tensor result, signature-runner result): an array's shape, or the error."""
    results = []
    it = Interpreter(model_content=flat)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    try:
        results.append(f"shape {it.get_tensor(it.get_output_details()[0]['index']).shape}")
    except Exception as exc:
        results.append(f"{type(exc).__name__}: {exc}")
    it2 = Interpreter(model_content=flat)
    runner = it2.get_signature_runner()
    try:
        out = runner(x=x)
        results.append(f"shape {next(iter(out.values())).shape}")
    except Exception as exc:
        results.append(f"{type(exc).__name__}: {exc}")
    return results, it.get_output_details()[0]["shape"].tolist()


def main():
    print("tensorflow", tf.__version__)
    empty = 0
    x = np.ones((1, 4, 3), np.float32)

    @tf.function(input_signature=[tf.TensorSpec((1, 4, 3), tf.float32, name="x")])
    def first_zero_rows(x):
        return {"y": x[:, :0, :] * 2.0}

    @tf.function(input_signature=[tf.TensorSpec((1, 4, 3), tf.float32, name="x")])
    def first_two_rows(x):
        return {"y": x[:, :2, :] * 2.0}

    for name, fn in [("x[:, :0, :] * 2", first_zero_rows), ("x[:, :2, :] * 2", first_two_rows)]:
        ref = fn(x)["y"].numpy()
        (got_tensor, got_runner), shape = read_out(convert(fn), x)
        print(f"{name}: tensorflow shape {ref.shape}; litert output details shape {shape}")
        print(f"    litert get_tensor:       {got_tensor}")
        print(f"    litert signature runner: {got_runner}")
        if ref.size == 0 and ("Invalid tensor size" in got_tensor or "Invalid tensor size" in got_runner):
            empty += 1

    import keras
    layer = keras.layers.Conv3DTranspose(2, 2, strides=(3, 1, 3), padding="same", output_padding=0, use_bias=False)
    inp = keras.Input((5, 1, 4, 1))
    model = keras.Model(inp, layer(inp))
    consts = [tf.constant(v.value) for v in model.trainable_variables]

    @tf.function(input_signature=[tf.TensorSpec((1, 5, 1, 4, 1), tf.float32, name="x")], autograph=False)
    def conv3dt(x):
        return {"y": model.stateless_call(consts, [], x)[0]}
    xv = np.ones((1, 5, 1, 4, 1), np.float32)
    ref = conv3dt(xv)["y"].numpy()
    (got_tensor, got_runner), shape = read_out(convert(conv3dt), xv)
    print(f"keras Conv3DTranspose(2, 2, strides=(3, 1, 3), 'same', output_padding=0) on (5, 1, 4, 1): "
          f"tensorflow shape {ref.shape}; litert output details shape {shape}")
    print(f"    litert get_tensor:       {got_tensor}")
    print(f"    litert signature runner: {got_runner}")
    if empty:
        print("REPRODUCED: LiteRT cannot return a zero-size output tensor (ValueError: Invalid tensor size.)")
        return 1
    print("NOT REPRODUCED: LiteRT returns the empty output")
    return 0


if __name__ == "__main__":
    sys.exit(main())
