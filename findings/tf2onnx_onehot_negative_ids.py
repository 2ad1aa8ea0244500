"""tf2onnx 1.17 converts `tf.one_hot` to an ONNX OneHot without guarding negative ids, so onnxruntime gives a
1 where TensorFlow gives an all-zero row.  TensorFlow's tf.one_hot documents that an id outside [0, depth) makes
a row of off_value; ONNX OneHot (since opset 11, onnx/onnx#2260) counts ids in [-depth, -1] from the end (id + depth)
and gives off_value only outside [-depth, depth - 1].  tf2onnx's handler (tf2onnx/onnx_opset/tensor.py,
OneHot.any_version_after9) passes the ids through unchanged, so with depth 9 the id -5 lands at index 4 and -1 at
index 8 on onnxruntime, where TensorFlow (and torch's and JAX's Keras one_hot) give zeros; -10 and 9, outside both
ranges, are zero rows on both.  Keras' CategoryEncoding(output_mode="one_hot") meets it on any negative id.  A
guard (e.g. Where(ids < 0, depth, ids) before the OneHot, a value OneHot maps to off_value) would keep TensorFlow's
rows.

    python findings/tf2onnx_onehot_negative_ids.py
    # prints REPRODUCED and exits 1 while the bug is there (TensorFlow + tf2onnx + onnxruntime, no Keras)

Versions: tensorflow 2.21.0, tf2onnx 1.17.0, onnxruntime 1.31.1, CPU, opset 15.  Upstream: no tf2onnx report of
it.  onnx/onnx#4154 (closed, 2022) asked why ONNX OneHot differs from tf.one_hot on negative ids; an ONNX
maintainer answered that converting tf.one_hot properly is the TensorFlow-ONNX converter's job ("If the converter
doesn't do the right thing today, please file a bug in onnx/tensorflow-onnx"), and no such bug was found (queries:
"tf2onnx one_hot negative indices", "OneHot negative index onnxruntime tensorflow zeros", "tensorflow-onnx OneHot
negative indices wrong result differs from tensorflow").  onnx/tensorflow-onnx#2194 (open, 2023: a signature with
tf.one_hot gives different results after conversion, undiagnosed) may be this.  tensorflow-onnx's main (6537fcb,
2026-07-01) has no guard in the OneHot handler.
Found by audee: the api-cpu campaign, rng 2877 (its known-match check: CategoryEncoding one_hot, num_tokens 9,
id -5, filed under ort-fp16-cast-roundtrip-elided).
"""
import logging
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import onnxruntime as ort
import tensorflow as tf
import tf2onnx

logging.getLogger("tf2onnx").setLevel(logging.ERROR)
print("tensorflow", tf.__version__, "tf2onnx", tf2onnx.__version__, "onnxruntime", ort.__version__)
depth = 9
ids = np.array([-5, -1, -10, 3, 9], np.int32)
sig = [tf.TensorSpec((None,), tf.int32, name="ids")]
f = tf.function(lambda i: tf.one_hot(i, depth), input_signature=sig)
proto, _ = tf2onnx.convert.from_function(f, input_signature=sig, opset=15)
print("ONNX nodes:", [n.op_type for n in proto.graph.node])
s = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
got = s.run(None, {s.get_inputs()[0].name: ids})[0]
want = f(tf.constant(ids)).numpy()


def hot(row):
    return int(row.argmax()) if row.any() else "zeros"


differ = []
for i, x in enumerate(ids):
    print(f"id {int(x):3d}: tensorflow {hot(want[i])!s:6s} onnxruntime {hot(got[i])}")
    if not np.array_equal(got[i], want[i]):
        differ.append(f"id {int(x)} -> index {hot(got[i])} (TensorFlow: {hot(want[i])})")
if differ:
    print(f"REPRODUCED: tf2onnx's OneHot (depth {depth}) counts negative ids from the end on onnxruntime: "
          + ", ".join(differ))
    sys.exit(1)
print("NOT REPRODUCED")
sys.exit(0)
