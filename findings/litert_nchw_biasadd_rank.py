"""TFLite converter (TensorFlow 2.21, ai-edge-litert 2.3.0, Keras 3.15.1, TFLITE_BUILTINS, no
Flex): tf.nn.bias_add(x, b, data_format='NCHW') on a rank-3 or rank-5 x -- valid TensorFlow,
"N...C" and "NC..." are both documented, and TensorFlow runs it -- fails to convert with
"'tf.Transpose' op x should be of the same rank with y, got x of rank 3, and y of rank 4":
the converter's NCHW -> NHWC layout rewrite of BiasAdd builds a 4-D permutation whatever the
rank.  Rank 4 converts and is exact.

Keras' TensorFlow backend emits that op for every channels_first 1D (and 3D) convolution with
use_bias=True and more than one output channel (its ops.add of a (1, C, 1) bias becomes
tf.nn.bias_add(..., data_format='NCHW')): Conv1D, Conv1DTranspose, SeparableConv1D and
DepthwiseConv1D(data_format='channels_first') cannot be converted for LiteRT.  A sibling
failure with no bias: Conv1D(filters >= 2, data_format='channels_first') (Conv2D NCHW between
ExpandDims and Squeeze) fails with "'tfl.transpose' op expect output type tensor<1x2x1x9xf32>,
got tensor<1x2x9xf32>" -- printed below, not counted in the verdict.

audee reached it as divergent_acceptance-litert-DepthwiseConv1D-17291510
(DepthwiseConv1D(4, strides=3, data_format='channels_first', depth_multiplier=2,
use_bias=True), mixed_float16 -- float32 fails the same way).  Upstream: not found (queries
"TFLite converter BiasAdd NCHW data_format rank 3 conversion error tf.Transpose same rank",
"tflite convert Conv1D channels_first bias fails keras 3", "bias_add data_format NCHW 5D
Conv3D channels_first TFLite converter error", "'tf.Transpose' op x should be of the same rank
with y tflite converter"); TensorFlow itself gained rank 3/5 NCHW BiasAdd in
tensorflow/tensorflow#22127.

    python findings/litert_nchw_biasadd_rank.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter


def convert_and_run(fn, x):
    """LiteRT's output for ``x``, or the converter's error line."""
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], tf.Module())
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    try:
        flat = conv.convert()
    except Exception as exc:  # ConverterError: the MLIR diagnostic
        msg = str(exc)
        at = msg.find("error: ")
        return None, msg[at + 7:].split("\n")[0].split("<frozen")[0].strip()[:120] if at >= 0 else msg[:120]
    it = Interpreter(model_content=flat)
    assert len(it.get_input_details()) == 1, "the function must have one input"
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]), None


def nchw_bias_add(shape):
    """x -> tf.nn.bias_add(x, [1, 2, ...], data_format='NCHW'), the bias a captured constant."""
    bias = tf.constant(np.arange(1, shape[1] + 1, dtype="float32"))

    @tf.function(input_signature=[tf.TensorSpec(shape, tf.float32)])
    def fn(t):
        return tf.nn.bias_add(t, bias, data_format="NCHW")
    return fn


def keras_fn(model, shape):
    """The Keras model as a traced function of its input alone, its weights baked in as constants
    (as audee's litert backend and a deployed model do)."""
    consts = [tf.constant(v.value) for v in model.trainable_variables]

    @tf.function(input_signature=[tf.TensorSpec((1, *shape), tf.float32)], autograph=False)
    def fn(t):
        return model.stateless_call(consts, [], t)[0]
    return fn


def main():
    import ai_edge_litert
    print("tensorflow", tf.__version__, "| ai-edge-litert", getattr(ai_edge_litert, "__version__", "2.3.0"))
    rng = np.random.default_rng(0)
    failed = 0
    for shape in [(1, 2, 9), (1, 2, 4, 5), (1, 2, 3, 4, 5)]:
        fn = nchw_bias_add(shape)
        x = rng.normal(size=shape).astype("float32")
        ref = fn(x).numpy()  # TensorFlow runs it
        got, err = convert_and_run(fn, x)
        head = f"tf.nn.bias_add(data_format='NCHW') rank {len(shape)} {shape}:"
        if err:
            failed += len(shape) != 4
            print(f"{head:<58} tensorflow ok; litert converter: {err}")
        else:
            print(f"{head:<58} tensorflow ok; litert max |y - tensorflow| = {np.abs(got - ref).max():.2e}")

    import keras
    for name, layer, shape in [
            ("DepthwiseConv1D(4, channels_first, depth_multiplier=2)",
             keras.layers.DepthwiseConv1D(4, data_format="channels_first", depth_multiplier=2), (1, 12)),
            ("Conv1D(2, 4, channels_first)", keras.layers.Conv1D(2, 4, data_format="channels_first"), (1, 12)),
            ("Conv1D(2, 4, channels_first, use_bias=False) [sibling]",
             keras.layers.Conv1D(2, 4, data_format="channels_first", use_bias=False), (1, 12))]:
        inp = keras.Input(shape)
        model = keras.Model(inp, layer(inp))
        fn = keras_fn(model, shape)
        x = rng.normal(size=(1, *shape)).astype("float32")
        ref = fn(x).numpy()
        got, err = convert_and_run(fn, x)
        print(f"keras {name:<52} tensorflow ok; litert "
              + (f"converter: {err}" if err else f"max |y - tensorflow| = {np.abs(got - ref).max():.2e}"))
    if failed:
        print(f"REPRODUCED: the TFLite converter rejects tf.nn.bias_add(data_format='NCHW') on rank 3/5 ({failed} of 2)")
        return 1
    print("NOT REPRODUCED: NCHW bias_add of rank 3 and 5 converts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
