"""Candidate 5: ConvLSTM2D / MultiHeadAttention via tf2onnx -> onnxruntime on a 0-row batch ->
'running Reshape node ... ReshapeHelper ... size != 0 && (input_shape_size % size) == 0 was false'.
Two different producers of a Reshape whose -1 cannot be inferred when the tensor has 0 elements
(ONNX Reshape: -1 is 'inferred from the size of the tensor and the remaining dimensions'; with 0 elements
and another 0 dim it is undetermined, and the ONNX reference implementation / numpy reject it, while
TensorFlow's Reshape infers it from the non-zero dims):
 MHA: tf2onnx's Einsum decomposition emits Reshape(x, Concat[ReduceProd(batch dims), -1, K]) (node
      Reshape__NNN, in the converted graph itself; fails with every ORT optimisation level).
 ConvLSTM2D: the tf2onnx graph is fine (runs with ORT_DISABLE_ALL); onnxruntime's own NchwcTransformer
      (ORT_ENABLE_ALL, x86 NCHWc kernels) rewrites Conv+Conv->Add with unknown shapes into
      nchwc Conv -> Reshape[0,-1,0,0,16] (Reshape_token_N), which its own Reshape kernel rejects on 0 rows."""
import os, sys
import numpy as np, onnx, onnxruntime as ort
from onnx import helper as h, TensorProto as T, numpy_helper as nh
from onnx.reference import ReferenceEvaluator
bad = []
LV = ort.GraphOptimizationLevel
def sess(model, lvl):
    so = ort.SessionOptions(); so.log_severity_level = 4; so.graph_optimization_level = lvl
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
def check(name, fn, want, is_bug=True):
    try:
        got = tuple(fn()); ok = got == want
        print(f"{name}: {got} want {want} {'OK' if ok else 'WRONG'}")
    except Exception as e:
        ok = False; print(f"{name}: ERROR {str(e).strip().splitlines()[0][-150:]}")
    if not ok and is_bug: bad.append(name)
# (1) raw Reshape with -1 on an empty tensor: spec-ambiguous; not counted as a bug by itself
x = np.zeros((0, 12, 4, 7, 1, 10), np.float32); shp = np.array([0, -1, 10], np.int64)
g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["y"])], "g",
                 [h.make_tensor_value_info("x", T.FLOAT, None), h.make_tensor_value_info("s", T.INT64, [3])],
                 [h.make_tensor_value_info("y", T.FLOAT, None)])
rm = h.make_model(g, opset_imports=[h.make_opsetid("", 15)], ir_version=8)
check("raw ONNX Reshape (0,12,4,7,1,10)->[0,-1,10] onnxruntime", lambda: sess(rm, LV.ORT_DISABLE_ALL).run(None, {"x": x, "s": shp})[0].shape, (0, 336, 10), False)
check("raw ONNX Reshape (0,12,4,7,1,10)->[0,-1,10] onnx.reference", lambda: ReferenceEvaluator(rm).run(None, {"x": x, "s": shp})[0].shape, (0, 336, 10), False)
check("raw numpy reshape(0,-1,10)", lambda: np.reshape(x, (0, -1, 10)).shape, (0, 336, 10), False)
# (2) onnxruntime NchwcTransformer: Conv, Conv -> Add, input shapes unknown
rng = np.random.default_rng(0)
W1 = nh.from_array(rng.standard_normal((13, 3, 4, 4)).astype("float32"), "W1")
W2 = nh.from_array(rng.standard_normal((13, 13, 4, 4)).astype("float32"), "W2")
g = h.make_graph([h.make_node("Conv", ["x", "W1"], ["a"], strides=[3, 3], pads=[1, 1, 2, 2]),
                  h.make_node("Conv", ["s", "W2"], ["b"], pads=[1, 1, 2, 2]), h.make_node("Add", ["a", "b"], ["y"])], "g",
                 [h.make_tensor_value_info("x", T.FLOAT, None), h.make_tensor_value_info("s", T.FLOAT, None)],
                 [h.make_tensor_value_info("y", T.FLOAT, None)], [W1, W2])
cm = h.make_model(g, opset_imports=[h.make_opsetid("", 15)], ir_version=8)
for n in (2, 0):
    f = {"x": np.zeros((n, 3, 7, 7), "float32"), "s": np.zeros((n, 13, 3, 3), "float32")}
    for lvl in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
        check(f"raw Conv+Conv->Add batch {n} {lvl}", lambda: sess(cm, getattr(LV, lvl)).run(None, f)[0].shape, (n, 13, 3, 3))
# (3) the Keras layers through tf2onnx
if "--no-keras" not in sys.argv:
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    import keras, tensorflow as tf, tf2onnx
    def convert(model, sig):
        fn = tf.function(lambda *a: {"y": tf.identity(model(list(a), training=False))}, input_signature=sig, autograph=False)
        return tf2onnx.convert.from_function(fn, input_signature=sig, opset=15)[0]
    L = keras.layers.MultiHeadAttention(num_heads=4, key_dim=10, value_dim=6, use_bias=False, output_shape=1, attention_axes=[1])
    q = keras.Input((7, 12, 3)); v = keras.Input((7, 12, 3)); mha = keras.Model([q, v], L(q, v, use_causal_mask=True))
    p = convert(mha, [tf.TensorSpec((None, 7, 12, 3), tf.float32, name="q"), tf.TensorSpec((None, 7, 12, 3), tf.float32, name="v")])
    for n in (2, 0):
        f = {"q": np.random.rand(n, 7, 12, 3).astype("float32"), "v": np.random.rand(n, 7, 12, 3).astype("float32")}
        for lvl in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
            check(f"tf2onnx MultiHeadAttention batch {n} {lvl}", lambda: sess(p, getattr(LV, lvl)).run(None, f)[0].shape, (n, 7, 12, 1))
    L = keras.layers.ConvLSTM2D(filters=13, kernel_size=(4, 4), strides=3, padding="same", use_bias=False, go_backwards=True)
    xi = keras.Input((3, 7, 7, 3)); mi = keras.Input((3,), dtype="int32"); cl = keras.Model([xi, mi], L(xi, mask=mi))
    p = convert(cl, [tf.TensorSpec((None, 3, 7, 7, 3), tf.float32, name="x"), tf.TensorSpec((None, 3), tf.int32, name="mask")])
    for n in (2, 0):
        f = {"x": np.random.rand(n, 3, 7, 7, 3).astype("float32"), "mask": np.ones((n, 3), "int32")}
        for lvl in ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL"):
            check(f"tf2onnx ConvLSTM2D batch {n} {lvl}", lambda: sess(p, getattr(LV, lvl)).run(None, f)[0].shape, (n, 3, 3, 13))
if bad:
    print(f"REPRODUCED onnxruntime {ort.__version__}: a Reshape with -1 on a 0-row tensor fails (tf2onnx Einsum reshape for MHA; ORT NchwcTransformer reshape for Conv/ConvLSTM2D): {', '.join(bad)}"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
