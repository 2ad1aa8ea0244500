"""LiteRT (ai-edge-litert 2.3.0, the TFLite converter of TensorFlow 2.21): a float CONV_3D maps
a NaN to 3.4028235e+38 (float32's max), so a NaN input leaves no trace in its output.  A 1x1x1
Conv3D (weight 2, no bias) of [1, nan, inf, -inf, 3e38]: TensorFlow gives [2, nan, inf, -inf,
inf]; LiteRT's default kernel [2, 3.4e38, 3.4e38, -3.4e38, 3.4e38].  The same model with
LiteRT's reference kernels (OpResolverType.BUILTIN_REF) keeps the NaN: the optimized CONV_3D
kernel's output clamp turns NaN into the upper bound.  The infinities become +-3.4e38 in
every kernel, reference included: the clamp of a float op with no fused activation is
[lowest, max], not [-inf, inf] -- known, tensorflow/tensorflow#45312 (closed unfixed; its
pull request #46991, setting the bounds to +-inf, was closed).  CONV_2D and FULLY_CONNECTED
keep NaN and, under the default XNNPACK delegate, the infinities too; CONV_3D is not delegated.

audee found it as a NaN finding with LiteRT the odd one: a Conv3D(2, kernel 1) fed an input
with three NaNs and values near float32's max; TensorFlow, onnxruntime and OpenVINO give 7
non-finite outputs, LiteRT none.

Not found upstream for the NaN (queries: "TFLite Conv3D NaN input output finite 3.4028235e+38
float max", "tflite inf clamped to FLT_MAX fused activation none lowest max clamp output
infinity replaced").

    python findings/litert_conv3d_nan_to_flt_max.py
    # prints REPRODUCED and exits 1 while the bug is there

Versions: tensorflow 2.21.0, ai-edge-litert 2.3.0, CPU.  Found by audee (the compilers
campaign, rng 2811).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter, OpResolverType

x = np.array([1.0, np.nan, np.inf, -np.inf, 3e38], np.float32).reshape(1, 1, 1, 5, 1)  # (N, D, H, W, C)
w = np.full((1, 1, 1, 1, 1), 2.0, np.float32)


def conv(t):
    return tf.nn.conv3d(t, w, [1, 1, 1, 1, 1], "VALID")


def litert(resolver):
    fn = tf.function(conv, input_signature=[tf.TensorSpec(x.shape, tf.float32)])
    model = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function()], fn).convert()
    it = Interpreter(model_content=model, experimental_op_resolver_type=resolver)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"]).ravel()


with np.errstate(over="ignore"):
    want = conv(x).numpy().ravel()
got = litert(OpResolverType.AUTO)
ref = litert(OpResolverType.BUILTIN_REF)
print("tensorflow", tf.__version__)
print(f"Conv3D 1x1x1, weight 2, on {x.ravel().tolist()}:")
print(f"  tensorflow            : {want.tolist()}")
print(f"  litert (default)      : {got.tolist()}")
print(f"  litert (reference ops): {ref.tolist()}")
lost = np.isnan(want) & ~np.isnan(got)
if lost.any():
    print(f"REPRODUCED: LiteRT's CONV_3D turns NaN into {got[lost].tolist()} (the reference kernel keeps NaN: "
          f"{bool(np.isnan(ref[lost]).all())})")
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
