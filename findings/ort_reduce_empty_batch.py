"""onnxruntime CPU Reduce* on a tensor with a 0-sized batch dim returns the INPUT shape unchanged
instead of dropping/keeping the reduced axis: ReduceSum(x[0,3,4], axes=[-1], keepdims=0) -> (0,3,4),
want (0,3). In tf2onnx-converted Keras AdditiveAttention / Attention(score_mode='concat') the
wrong (0,3,5,4) score feeds a MatMul which then fails 'left operand cannot broadcast on dim 0'
(the MatMul itself is fine: see ort_matmul_empty_batch.py)."""
import sys
import numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto

def run(op, shape, axes, keepdims, opset):
    inputs, attrs, inits = ["X"], {"keepdims": keepdims}, []
    if op == "ReduceSum" and opset >= 13 or opset >= 18:
        inputs.append("axes"); inits.append(helper.make_tensor("axes", TensorProto.INT64, [len(axes)], axes))
    else:
        attrs["axes"] = axes
    g = helper.make_graph([helper.make_node(op, inputs, ["Y"], **attrs)], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None] * len(shape))],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]); m.ir_version = 8
    so = ort.SessionOptions(); so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, {"X": np.zeros(shape, "float32")})[0].shape

npf = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceProd": np.prod}
bad = 0
cases = [("ReduceSum", (2, 3, 4), [-1], 0, 17), ("ReduceSum", (0, 3, 4), [-1], 0, 17),
         ("ReduceSum", (0, 3, 4), [-1], 1, 17), ("ReduceSum", (0, 3, 4), [1], 0, 17), ("ReduceSum", (0, 3, 4), [2], 0, 17), ("ReduceSum", (0, 3, 4), [-2], 0, 17),
         ("ReduceSum", (0, 3, 4), [-1], 0, 11), ("ReduceSum", (3, 0, 4), [-1], 0, 17),
         ("ReduceMean", (0, 3, 4), [-1], 0, 17), ("ReduceMax", (0, 3, 4), [-1], 0, 17),
         ("ReduceMax", (0, 3, 4), [-1], 0, 18), ("ReduceProd", (0, 3, 4), [-1], 0, 17)]
for op, shape, axes, kd, opset in cases:
    want = npf[op](np.zeros(shape, "float32"), axis=tuple(axes), keepdims=bool(kd)).shape
    try:
        got = tuple(run(op, shape, axes, kd, opset))
    except Exception as e:
        got = f"{type(e).__name__}: {' '.join(str(e).split())[-70:]}"
    ok = got == want; bad += not ok
    print(f"{'ok ' if ok else 'BAD'} {op:10s} opset{opset} x{str(shape):10s} axes={axes} keepdims={kd} got {got} want {want}")
print("onnxruntime", ort.__version__)
if bad:
    print(f"REPRODUCED {bad} Reduce case(s) return a wrong shape for an empty input"); sys.exit(1)
print("NOT REPRODUCED"); sys.exit(0)
