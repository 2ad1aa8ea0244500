"""OpenVINO 2026.4.1 (CPU plugin, ONNX frontend; onnx 1.23.2, onnxruntime 1.31.1, tf2onnx 1.17.0,
TensorFlow 2.21, Keras 3.15.1): ONNX Resize(mode='cubic', exclude_outside=1) is computed as if
exclude_outside were 0.  The ONNX frontend (src/frontends/onnx/frontend/src/op/resize.cpp,
get_resize_attrs) copies mode, coordinate_transformation_mode, nearest_mode, antialias and
cubic_coeff_a into Interpolate-11 and never reads exclude_outside (Interpolate has no such
attribute); nothing warns.  With exclude_outside=1 the weights of taps outside the image
should be zeroed and the rest renormalized (what TensorFlow's ResizeBicubic with
half_pixel_centers=True does); OpenVINO instead clamps the taps to the edge pixel, so every
output pixel within two taps of a border is wrong (max error 0.042 on the N(0, 1) 2x3 image
below, upscaled to 9x13, whose largest output is 0.76; onnxruntime is within 4e-7 of the ONNX
reference).

tf2onnx writes exactly this node for tf.image.resize(method='bicubic') (cubic_coeff_a=-0.5,
exclude_outside=1, half_pixel), so keras.layers.Resizing(interpolation='bicubic') converted with
tf2onnx is wrong on OpenVINO and right on onnxruntime.  audee reached it as
deviation-openvino-Resizing-d2c3ae87 (Resizing(9, 13, 'bicubic', crop_to_aspect_ratio=True)
on a 2x8 image: max |tensorflow - openvino| 2.30, onnxruntime agrees with TensorFlow).
Upstream: not found (queries "OpenVINO ONNX Resize exclude_outside ignored cubic",
"openvino Interpolate cubic differs from onnxruntime bicubic resize tf2onnx half_pixel results
mismatch", "[Bug] OpenVINO ONNX frontend Resize attribute exclude_outside=1 not supported
silently wrong result"); the sibling report openvinotoolkit/openvino#35893 (open) is about the
`antialias` attribute of the same cubic Resize being ignored by the CPU plugin.

    python findings/openvino_resize_exclude_outside.py     # exit 1 and REPRODUCED while the bug is there
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator


def resize_model(exclude_outside, shape_in, shape_out):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape_in)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    roi = helper.make_tensor("roi", TensorProto.FLOAT, [0], [])
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [o / i for o, i in zip(shape_out, shape_in)])
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="cubic", cubic_coeff_a=-0.5,
                            exclude_outside=exclude_outside, coordinate_transformation_mode="half_pixel")
    graph = helper.make_graph([node], "resize", [x], [y], [roi, scales])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)], ir_version=8)


def openvino_run(proto, feed):
    core = ov.Core()
    compiled = core.compile_model(core.read_model(proto.SerializeToString()), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})
    return compiled(feed)[0]


def main():
    print("openvino", ov.__version__.split("-")[0], "| onnxruntime", ort.__version__, "| onnx", onnx.__version__)
    worst = 0.0
    x = np.random.default_rng(0).normal(size=(1, 1, 2, 3)).astype("float32")
    for exclude in (0, 1):
        m = resize_model(exclude, (1, 1, 2, 3), (1, 1, 9, 13))
        ref = ReferenceEvaluator(m).run(None, {"x": x})[0]
        y_ort = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        y_ov = openvino_run(m, {"x": x})
        other = ReferenceEvaluator(resize_model(1 - exclude, (1, 1, 2, 3), (1, 1, 9, 13))).run(None, {"x": x})[0]
        print(f"ONNX Resize cubic a=-0.5 half_pixel exclude_outside={exclude}, 2x3 -> 9x13:")
        print(f"  onnxruntime  max |y - onnx reference| = {np.abs(y_ort - ref).max():.2e}")
        print(f"  openvino     max |y - onnx reference| = {np.abs(y_ov - ref).max():.2e}"
              f"   (vs the reference with exclude_outside={1 - exclude}: {np.abs(y_ov - other).max():.2e})")
        worst = max(worst, float(np.abs(y_ov - ref).max()))

    # the same through Keras -> tf2onnx, against TensorFlow itself
    import logging
    import keras
    import tensorflow as tf
    import tf2onnx
    logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
    inp = keras.Input((2, 3, 1))
    model = keras.Model(inp, keras.layers.Resizing(9, 13, interpolation="bicubic")(inp))
    proto, _ = tf2onnx.convert.from_keras(model, input_signature=[tf.TensorSpec((None, 2, 3, 1), tf.float32, name="x")],
                                          opset=15)
    node = next(n for n in proto.graph.node if n.op_type == "Resize")
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    xk = x.transpose(0, 2, 3, 1)
    ref = np.asarray(model(xk))
    y_ort = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": xk})[0]
    y_ov = openvino_run(proto, {"x": xk})
    print(f"keras.layers.Resizing(9, 13, 'bicubic') via tf2onnx (Resize attrs: cubic_coeff_a={attrs.get('cubic_coeff_a')}, "
          f"exclude_outside={attrs.get('exclude_outside')}), against TensorFlow:")
    print(f"  onnxruntime  max |y - tensorflow| = {np.abs(y_ort - ref).max():.2e}")
    print(f"  openvino     max |y - tensorflow| = {np.abs(y_ov - ref).max():.2e}   (max |tensorflow| = {np.abs(ref).max():.2f})")
    if worst > 1e-3:
        print("REPRODUCED: OpenVINO ignores exclude_outside=1 of ONNX Resize (cubic)")
        return 1
    print("NOT REPRODUCED: OpenVINO matches the ONNX reference for exclude_outside=0 and 1")
    return 0


if __name__ == "__main__":
    sys.exit(main())
