"""NaN/-Inf in max pooling, Keras 3.15.1.  GlobalMaxPooling{1,2,3}D: TensorFlow 2.21, torch
2.13 and JAX 0.10.2 AGREE (tf.reduce_max propagates NaN on CPU) -- the odd one out in the
campaign is onnxruntime 1.31, in two kernels.  Channels_last, tf2onnx makes reduce_max a
ReduceMax, whose CPU kernel keeps a NaN only when it comes first in the reduced row
([1, nan, 2, 3] -> 3; microsoft/onnxruntime#10514).  Channels_first, it makes a GlobalMaxPool,
which onnxruntime computes with its MaxPool kernel (MLAS): that one keeps a NaN only at some
positions of a window (one NaN in 1..6: only at position 3) and gives -3.4e38 for an all-NaN
one; no upstream report found.  AdaptiveMaxPooling{1,2,3}D (output_size > 1; output_size 1
cannot be traced on TF, see keras_tf_adaptive_pool_global.py): Keras' TF backend builds it from
tf.nn.pool(MAX), so TensorFlow drops NaN and gives -3.4e38 for an all-NaN or all--Inf window --
the known TF max-pool bug -- where torch and JAX return NaN / -Inf; onnxruntime's converted
graph (MaxPool again) keeps NaN only in some positions.

    for b in tensorflow torch jax; do KERAS_BACKEND=$b python maxpool_nan_patterns.py; done
    (the tensorflow run also converts the layers with tf2onnx and runs them in onnxruntime,
    and runs one-node ONNX MaxPool and GlobalMaxPool graphs there)
    # prints REPRODUCED and exits 1 where a result's NaN/-Inf pattern departs from numpy's
    # reference (tensorflow: its AdaptiveMax and onnxruntime's, while the bugs are there)

Found by audee (NaN oracle on GlobalMaxPooling*D and AdaptiveMaxPooling2D; GlobalMaxPooling1D
channels_first in the api-cpu campaign, rng 2821).  Upstream: known -- ReduceMax:
microsoft/onnxruntime#10514 (open); TF max pooling: tensorflow/tensorflow#2501 (closed),
keras-team/keras#16158 (closed); onnxruntime's MaxPool / GlobalMaxPool: not found.
"""
import os
import sys
import numpy as np
import keras

nan, inf = np.nan, np.inf
rows = [[nan, 1, 2, 3], [1, nan, 2, 3], [nan, nan, -inf, -inf]]
x = np.array(rows, "float32")[:, :, None]  # (3 rows, length 4, 1 channel)
r = np.array(rows)
refs = {"GlobalMaxPooling1D": r.max(1), "AdaptiveMaxPooling1D(2)": np.stack([r[:, :2].max(1), r[:, 2:].max(1)], 1).ravel()}
print("rows:", rows, "\nreference  GlobalMax:", refs["GlobalMaxPooling1D"].tolist(), " Adaptive(2):", refs["AdaptiveMaxPooling1D(2)"].tolist())
refs["GlobalMaxPooling1D(channels_first)"] = refs["GlobalMaxPooling1D"]
layers = {"GlobalMaxPooling1D": keras.layers.GlobalMaxPooling1D(), "AdaptiveMaxPooling1D(2)": keras.layers.AdaptiveMaxPooling1D(2),
          "GlobalMaxPooling1D(channels_first)": keras.layers.GlobalMaxPooling1D(data_format="channels_first")}
feeds = {name: np.ascontiguousarray(x.transpose(0, 2, 1)) if "channels_first" in name else x for name in layers}
failed = []


def check(who, name, y):
    """Print a result; a NaN/-Inf pattern or value other than the reference's is a failure."""
    y = np.asarray(y, "float64").ravel()
    ok = np.array_equal(y, refs[name], equal_nan=True)
    print(f"{who:11s} {name:36s} {y.tolist()}{'' if ok else '  WRONG'}")
    if not ok:
        failed.append(f"{who} {name}")


for name, layer in layers.items():
    check(keras.backend.backend(), name, keras.ops.convert_to_numpy(layer(feeds[name])))
if keras.backend.backend() == "tensorflow":
    import logging
    import tensorflow as tf, tf2onnx, onnxruntime as ort
    logging.getLogger("tf2onnx").setLevel(logging.CRITICAL)
    from onnx import TensorProto, helper
    for name, layer in layers.items():
        fn = tf.function(lambda t: layer(t))
        spec = tf.TensorSpec((None, *feeds[name].shape[1:]), "float32", name="x")
        proto, _ = tf2onnx.convert.from_function(fn, input_signature=[spec], opset=15)
        y = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": feeds[name]})[0]
        check("onnxruntime", name, y)
        print(f"{'':11s} {'':36s} (tf2onnx: {', '.join(n.op_type for n in proto.graph.node)})")
    # the kernel alone: one ONNX node on 1..6 with one NaN, at each position (numpy: NaN throughout)
    for op, attrs in (("GlobalMaxPool", {}), ("MaxPool", {"kernel_shape": [6]})):
        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], op,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 1, 6])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
        model.ir_version = 8
        seq = np.tile(np.arange(1, 7, dtype="float32"), (6, 1))
        seq[np.arange(6), np.arange(6)] = nan  # row p: NaN at position p
        y = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": seq[:, None, :]})[0]
        y = y.ravel().astype("float64")
        ok = bool(np.isnan(y).all())
        print(f"{'onnxruntime':11s} {op + ' (one node)':36s} {y.tolist()}{'' if ok else '  WRONG'}")
        if not ok:
            failed.append(f"onnxruntime {op}")
if failed:
    print(f"REPRODUCED on {keras.backend.backend()}: differs from numpy's NaN/-Inf: " + ", ".join(failed))
    sys.exit(1)
print(f"NOT REPRODUCED on {keras.backend.backend()}: every result equals numpy's, NaN and -Inf included")
